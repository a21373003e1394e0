/*
 * A system's whole life on the deterministic simulator, where no scenario
 * can go (the framework makes, shuts and frees the one system a run may
 * have):
 *
 *   - sh_run (system.h): the entry actor gets its notice, an sh_args with
 *     the very argc and argv given, once; the exit code it gives
 *     sh_system_exit is sh_run's result; the system was shut down before
 *     sh_run returned (the entry's stop hook ran once), on every strategy
 *     and several seeds;
 *   - a shutdown whose final drain hits its bound (system.h: -EBUSY,
 *     counted in sh_stats.drain_overruns, "the system is shut down
 *     anyway"), forced by the fault point sh/system/drain firing at every
 *     pass, while actors have stacks suspended on an ask and on a sleep:
 *     the stacks are discarded, every pooled object comes back
 *     (pool_outstanding 0), no actor is left busy, every ask is resolved
 *     (asks == asks_resolved: given up with its stack), and the system can
 *     still be freed (LeakSanitizer watches the rest under ASan).
 *
 * Handlers run on fibers of the simulation: they record what they saw in
 * `g` and the test asserts afterwards.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#define WATCHDOG_S 120
#define SIM_SEEDS 4u

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <stackhouse/probe.h>
#include <stackhouse/stackhouse.h>

#include "sim_runs.h"

#define POLLS 100000u /* yields the test spends waiting for the actors' state */

static struct {
  int args_seen, argc, same_argv, stops, mounted;
  int suspended; /* stacks that reached their wait */
} g;

/* ---- sh_run ---------------------------------------------------------------- */

static char arg0[] = "prog", arg1[] = "--seed", arg2[] = "7";
static char *run_argv[] = {arg0, arg1, arg2, NULL};

static sh_yield entry_notice(sh_actor *self, sh_stack *st) {
  const sh_msg *m = sh_stack_msg(st);
  if (sh_msg_is(m, &sh_args_type)) {
    const sh_args *a = (const sh_args *)m;
    g.args_seen++;
    g.argc = a->argc;
    g.same_argv = a->argv == run_argv && strcmp(a->argv[2], "7") == 0;
    sh_system_exit(sh_actor_system(self), 40 + a->argc);
  }
  return sh_return(st, NULL);
}

static void count_stop(sh_actor *self) {
  (void)self;
  g.stops++;
}

static const sh_actor_class entry_class = {
    .name = "entry", .size = sizeof(sh_actor), .notice = entry_notice, .stop = count_stop};

static void test_sh_run(void **state) {
  (void)state;
  for (unsigned run = 0; run < SIM_RUNS; run++) {
    memset(&g, 0, sizeof(g));
    sim_configure(sim_run_seed(run), sim_run_strategy(run), 0);
    sh_config cfg;
    sh_config_default(&cfg);
    cfg.workers = 1 + run % 3;
    assert_int_equal(sh_run(&cfg, &entry_class, 3, run_argv), 43);
    assert_int_equal(g.args_seen, 1);
    assert_int_equal(g.argc, 3);
    assert_int_equal(g.same_argv, 1);
    assert_int_equal(g.stops, 1);
  }
}

/* ---- a shutdown past its drain's bound -------------------------------------- */

typedef struct wait_locals {
  sh_future *f;
} wait_locals;

/* The sleeper answers an ask only after a long nap: its stack and the
 * asker's are both suspended when the shutdown comes. */
static sh_yield sleeper_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  wait_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_sleep(st, 60000);
    g.suspended++;
    return l->f != NULL ? sh_suspend(st, 1) : sh_throw(st, -ENOMEM);
  }
  return sh_throw(st, -ECANCELED);
}

typedef struct asker {
  sh_actor base;
  const sh_addr *to;
} asker;

static int asker_init(sh_actor *self, void *arg) {
  ((asker *)self)->to = arg;
  return 0;
}

typedef struct ping {
  sh_msg hdr;
} ping;
static SH_MSG_DEFINE(ping, SH_ASK, 0);

static sh_yield asker_notice(sh_actor *self, sh_stack *st) {
  wait_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    sh_msg *m = sh_msg_alloc(&ping_type);
    l->f = m != NULL ? sh_ask(st, ((asker *)self)->to, m, SH_FOREVER) : NULL;
    g.suspended++;
    return l->f != NULL ? sh_suspend(st, 1) : SH_RETURN;
  }
  return SH_RETURN;
}

typedef struct go {
  sh_msg hdr;
} go;
static SH_MSG_DEFINE(go, SH_NOTICE, 0);

static const sh_actor_class sleeper_class = {.name = "sleeper",
                                             .size = sizeof(sh_actor),
                                             .locals_size = sizeof(wait_locals),
                                             .ask = sleeper_ask,
                                             .stop = count_stop};
static const sh_actor_class asker_class = {.name = "asker",
                                           .size = sizeof(asker),
                                           .locals_size = sizeof(wait_locals),
                                           .init = asker_init,
                                           .notice = asker_notice,
                                           .stop = count_stop};

static void overrun_once(uint64_t seed, sh_sim_strategy strategy) {
  memset(&g, 0, sizeof(g));
  sh_sim_options o;
  sh_sim_options_default(&o);
  o.seed = seed;
  o.strategy = strategy;
  o.faults = "sh/system/drain:1";
  sh_sim_configure(&o);
  sh_system *sys;
  assert_int_equal(sh_system_new(NULL, &sys), 0);
  assert_int_equal(sh_system_start(sys), 0);
  const sh_addr *sl = NULL, *as = NULL;
  assert_int_equal(sh_spawn(sys, &sleeper_class, NULL, 1, &sl), 0);
  assert_int_equal(sh_spawn(sys, &asker_class, (void *)sl, 1, &as), 0);
  assert_int_equal(sh_notice(as, sh_msg_alloc(&go_type)), 0);
  /* Bounded: both stacks suspend after a few steps of the actors. */
  for (uint32_t i = 0; i < POLLS && g.suspended < 2; i++) sh_yield_cpu();
  assert_int_equal(g.suspended, 2);
  sh_system_exit(sys, 0);
  assert_int_equal(sh_system_wait(sys), 0);
  assert_int_equal(sh_system_shutdown(sys), -EBUSY);
  assert_int_equal(sh_system_shutdown(sys), 0); /* shut already */
  sh_stats st;
  sh_system_stats(sys, &st);
  assert_int_equal(st.drain_overruns, 1);
  assert_int_equal(st.pool_outstanding, 0);
  assert_int_equal(st.asks, st.asks_resolved);
  /* system.h: -EBUSY when actors were still busy: the drain left them queued. */
  assert_true(sh_system_busy(sys) <= 2);
  /* stackhouse.h: every actor whose init succeeded gets its stop. */
  assert_int_equal(g.stops, 2);
  sh_system_free(sys);
  assert_int_equal(g.stops, 2); /* once */
}

static void test_drain_overrun_discards_stacks(void **state) {
  (void)state;
  for (unsigned run = 0; run < SIM_RUNS; run++)
    overrun_once(sim_run_seed(run), sim_run_strategy(run));
}

static unsigned run_current;

static void sim_failed(const char *kind, const char *detail) {
  sim_run_failed(kind, detail, run_current);
}

int main(void) {
  alarm(WATCHDOG_S);
  sh_sim_on_failure(sim_failed);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sh_run),
      cmocka_unit_test(test_drain_overrun_discards_stacks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
