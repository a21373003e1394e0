/*
 * What the in-process tests of the simulator through its scenarios
 * (test_sim_core.c, test_sim_failures.c) share: running one scenario with a
 * runner's options and reading its report; a failure handler that names
 * the run to replay; running what may fail in a fork()ed child, whose
 * handler reports the failure's kind through a pipe (a failed simulation
 * cannot go on); and the sleeper actor of the files' own hidden scenarios.
 */
#ifndef TESTS_SIM_CORE_FIXTURE_H
#define TESTS_SIM_CORE_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include <cmocka.h>

#include <stackhouse/scenario.h>
#include <stackhouse/sim.h>

#include "support/child.h"

#define WATCHDOG_S 240
/* A child simulation that should have failed by now hangs instead. */
#define CHILD_WATCHDOG_S 120

/* The livelock test's step bound: small, so the run fails quickly. */
#define LIVELOCK_STEPS 200000

static const sh_sim_strategy strategies[] = {SH_SIM_RANDOM, SH_SIM_PCT, SH_SIM_NONE};
#define NSTRATEGIES (sizeof(strategies) / sizeof(strategies[0]))

/* ---- the sleeper: an actor that knows its scenario ------------------------- */

typedef struct tick {
  sh_msg hdr;
} tick;
static SH_MSG_DEFINE(tick, SH_NOTICE, 0);

typedef struct sleeper {
  sh_actor base;
  sh_scn *s;
} sleeper;

static int sleeper_init(sh_actor *self, void *arg) {
  ((sleeper *)self)->s = arg;
  return 0;
}

/* ---- running a scenario in process ---------------------------------------- */

/* The run in progress, for the failure handler's replay line. */
static struct {
  const char *name;
  uint64_t seed;
  sh_sim_strategy strategy;
} current;

static void print_replay(void) {
  fprintf(stderr, "  replay: shsim run %s --seed %llu --strategy %s\n", current.name,
          (unsigned long long)current.seed, sh_sim_strategy_name(current.strategy));
}

/* The handler of every run not expected to fail. The run cannot go on, so
 * say which run it was and end the process (in the determinism test, the
 * child of one scenario). */
static void unexpected_failure(const char *kind, const char *detail) {
  fprintf(stderr, "simulation failed: %s: %s\n", kind, detail);
  print_replay();
  fflush(NULL);
  _exit(1);
}

/* The options a runner uses for scenario sc: defaults, the seed and
 * strategy, and the scenario's virtual-time bound. */
static void scenario_options(const sh_scenario *sc, uint64_t seed, sh_sim_strategy strategy,
                             sh_sim_options *o) {
  sh_sim_options_default(o);
  o->seed = seed;
  o->strategy = strategy;
  o->vtime_limit_ns = sh_scenario_vtime_limit_ns(sc);
  o->max_steps = sh_scenario_max_steps(sc, o->max_steps);
  o->hang_real_ms = sh_scenario_hang_real_ms(sc, o->hang_real_ms);
}

/* One simulation of sc with options o: its result and report. */
static void sim_run(const sh_scenario *sc, const sh_sim_options *o, sh_scn_result *r,
                    sh_sim_report *rep) {
  current.name = sc->name;
  current.seed = o->seed;
  current.strategy = o->strategy;
  sh_sim_configure(o);
  sh_scenario_run(sc, o->seed, 0, r);
  sh_sim_report_get(rep);
}

static bool visible(const sh_scenario *sc) { return (sc->flags & SH_SCN_HIDDEN) == 0; }

static bool same_report(const sh_sim_report *a, const sh_sim_report *b) {
  return a->hash == b->hash && a->steps == b->steps && a->vtime_ns == b->vtime_ns &&
         a->switches == b->switches && a->jumps == b->jumps;
}

/* ---- child processes ------------------------------------------------------- */

/* A simulation that fails cannot go on (the failure handler must not
 * return), so whatever may fail runs in a child: a failure there is
 * reported and the tests go on. */

static void child_write(const char *text) { th_child_write(text); }

static int in_child(void (*body)(const void *arg), const void *arg, char *out, size_t size) {
  return th_in_child(body, arg, CHILD_WATCHDOG_S, out, size);
}

/* ---- a run that may fail, in a child --------------------------------------- */

static void child_failure(const char *kind, const char *detail) {
  (void)detail;
  child_write(kind);
  _exit(0);
}

/* What expect_body runs. */
typedef struct expect_arg {
  const sh_scenario *sc;
  sh_sim_options o;
} expect_arg;

/* In a child: run the scenario and tell how it ended ("ok" or its kind). */
static void expect_body(const void *arg) {
  const expect_arg *a = arg;
  sh_sim_on_failure(child_failure);
  sh_scn_result r;
  sh_sim_report rep;
  sim_run(a->sc, &a->o, &r, &rep);
  child_write(r.ok ? "ok" : r.kind);
  _exit(0);
}

#endif
