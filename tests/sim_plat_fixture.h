/*
 * What the tests of the simulator's thread fibers (test_sim_plat.c,
 * test_sim_plat_determinism.c) share: a started simulated system of
 * WORKERS workers, an actor that does what its spawn argument says with
 * each poke it gets (set an event, start a thread fiber, end the run after
 * so many pokes), and a failure handler for simulations that must not
 * fail.
 */
#ifndef TESTS_SIM_PLAT_FIXTURE_H
#define TESTS_SIM_PLAT_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include <cmocka.h>

#include <stackhouse/sim.h>
#include <stackhouse/stackhouse.h>

#include "plat.h"

#define WATCHDOG_S 120
#define WORKERS 2

static const sh_sim_strategy strategies[] = {SH_SIM_RANDOM, SH_SIM_PCT, SH_SIM_NONE};
#define NSTRATEGIES (sizeof(strategies) / sizeof(strategies[0]))

/* ---- a simulated system ---------------------------------------------------- */

static void unexpected_failure(const char *kind, const char *detail) {
  fprintf(stderr, "simulation failed: %s: %s\n", kind, detail);
  fflush(NULL);
  _exit(1);
}

/* A new, started system of WORKERS workers on the current simulation. */
static sh_system *system_up(void) {
  sh_config cfg;
  sh_config_default(&cfg);
  cfg.workers = WORKERS;
  sh_system *sys = NULL;
  assert_int_equal(sh_system_new(&cfg, &sys), 0);
  assert_int_equal(sh_system_start(sys), 0);
  return sys;
}

static void system_down(sh_system *sys) {
  assert_int_equal(sh_system_shutdown(sys), 0);
  sh_system_free(sys);
}

/* ---- actors ------------------------------------------------------------------ */

typedef struct poke {
  sh_msg hdr;
} poke;
static SH_MSG_DEFINE(poke, SH_NOTICE, 0);

/* What an actor does with a poke, given by its spawn argument. */
typedef struct act_cfg {
  sh_plat_event *set;       /* set this event */
  void (*start)(void *arg); /* start a thread fiber running start(start_arg) */
  void *start_arg;
  sh_plat_thread **started; /* ... whose handle goes here */
  int start_rc;             /* and its result */
  int exit_after;           /* > 0: sh_system_exit once this many pokes came */
  int pokes;
} act_cfg;

typedef struct act {
  sh_actor base;
  act_cfg *cfg;
} act;

static int act_init(sh_actor *self, void *arg) {
  ((act *)self)->cfg = arg;
  return 0;
}

static sh_yield act_notice(sh_actor *self, sh_stack *st) {
  act_cfg *c = ((act *)self)->cfg;
  c->pokes++;
  if (c->set != NULL) sh_plat_event_set(c->set);
  if (c->start != NULL && *c->started == NULL)
    c->start_rc = sh_plat_thread_start(c->start, c->start_arg, c->started);
  if (c->exit_after > 0 && c->pokes == c->exit_after) sh_system_exit(sh_actor_system(self), 0);
  return sh_return(st, NULL);
}

static const sh_actor_class act_class = {
    .name = "act", .size = sizeof(act), .init = act_init, .notice = act_notice};

static const sh_addr *spawn_act(sh_system *sys, act_cfg *c, uint32_t worker) {
  const sh_addr *a = NULL;
  assert_int_equal(sh_spawn_on(sys, &act_class, c, worker, &a), 0);
  return a;
}

/* From any fiber; a test thread's failure shows in what it records. */
static int send_poke(const sh_addr *a) {
  poke *m = sh_msg_new(poke);
  return m == NULL ? -ENOMEM : sh_notice(a, &m->hdr);
}

#endif
