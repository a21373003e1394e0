/*
 * Tests of the deterministic simulator (backend-sim/), in process, through
 * the scenarios (scenarios/) it runs (sim_core_fixture.h):
 *   - the failures the simulator detects: the scenarios' test_deadlock and
 *     test_livelock (with a small max_steps) and this file's virtual-time
 *     overrun end the run through the failure handler with the kind
 *     "deadlock", "livelock", "vtime"; every hidden scenario with an
 *     `expect` ends with that kind. Each runs in a fork()ed child, whose
 *     handler reports the kind through a pipe and exits: a failed
 *     simulation cannot go on;
 *   - schedules: replaying a run's recorded schedule is the same run; the
 *     shrinker finds the two choices a synthetic failure needs, and cuts a
 *     failing seed of test_race down to a few choices that still fail.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#include <errno.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <stackhouse/sim.h>

#include "support/child.h"
#include "plat.h"
#include <stackhouse/scenario.h>

#include "sim_core_fixture.h"

/* ---- this file's scenario (hidden: never in `all`) -------------------------- */

/* sim_core_vtime: a sleeper's one-shot timer, due ten seconds after its
 * first notice, would end the workload, but the scenario's virtual-time
 * limit is one second: the run must end with FAIL:vtime. */
#define SLEEPER_DELAY_MS 10000
#define SLEEPER_LIMIT_MS 1000

static sh_yield sleeper_notice(sh_actor *self, sh_stack *st) {
  sleeper *z = (sleeper *)self;
  int rc = sh_timer_start(self, SLEEPER_DELAY_MS, 0, NULL, NULL);
  SH_SCN_CHECK(z->s, rc == 0, "sh_timer_start: %d", rc);
  return sh_return(st, NULL);
}

static void sleeper_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)id;
  (void)arg;
  sleeper *z = (sleeper *)self;
  sh_scn_done(z->s, sh_actor_system(self));
}

static const sh_actor_class sleeper_class = {
    .name = "sleeper",
    .size = sizeof(sleeper),
    .init = sleeper_init,
    .notice = sleeper_notice,
    .timeout = sleeper_timeout,
};

static int sleeper_setup(sh_scn *s, sh_system *sys) {
  const sh_addr *a;
  int rc = sh_spawn_on(sys, &sleeper_class, s, 0, &a);
  tick *t = rc == 0 ? sh_msg_new(tick) : NULL;
  if (rc == 0) rc = t == NULL ? -ENOMEM : sh_notice(a, &t->hdr);
  return rc;
}

static const sh_scenario sim_core_vtime = {
    .name = "sim_core_vtime",
    .summary = "a timer beyond the virtual-time limit (test: FAIL:vtime)",
    .vtime_limit_ms = SLEEPER_LIMIT_MS,
    .flags = SH_SCN_HIDDEN | SH_SCN_SIM_ONLY,
    .expect = "vtime",
    .setup = sleeper_setup,
};
SH_SCENARIO(sim_core_vtime);

/* ---- failures the simulator detects ------------------------------------------------ */

/* sc, seed 1, strategy random, must end with failure `want`. */
static void expect_failure(const sh_scenario *sc, const char *want) {
  expect_arg a = {.sc = sc};
  scenario_options(sc, 1, SH_SIM_RANDOM, &a.o);
  if (strcmp(want, "livelock") == 0) a.o.max_steps = LIVELOCK_STEPS;
  char kind[64];
  int status = in_child(expect_body, &a, kind, sizeof(kind));
  if (status != 0 || strcmp(kind, want) != 0)
    fprintf(stderr, "%s ended with \"%s\" (child status %d), want \"%s\"\n", sc->name, kind,
            status, want);
  assert_int_equal(status, 0);
  assert_string_equal(kind, want);
}

/* One of the scenarios' own test scenarios: it exists and must end so. */
static void expect_named(const char *name, const char *want) {
  const sh_scenario *sc = sh_scenario_find(name);
  assert_non_null(sc);
  assert_true(!visible(sc) && sc->expect != NULL);
  assert_string_equal(sc->expect, want);
  expect_failure(sc, want);
}

static void test_fail_deadlock(void **state) {
  (void)state;
  expect_named("test_deadlock", "deadlock");
}

static void test_fail_livelock(void **state) {
  (void)state;
  expect_named("test_livelock", "livelock");
}

static void test_fail_vtime(void **state) {
  (void)state;
  expect_failure(&sim_core_vtime, "vtime");
}

/* Every hidden scenario that says how it must end (the ones above too). */
static void test_hidden_expectations(void **state) {
  (void)state;
  int n = 0;
  for (size_t i = 0; i < sh_scenario_count(); i++) {
    const sh_scenario *sc = sh_scenario_at(i);
    if (visible(sc) || sc->expect == NULL) continue;
    expect_failure(sc, sc->expect);
    n++;
  }
  assert_true(n >= 3);
}

/* ---- schedules: replay and shrinking ------------------------------------------- */

/* A run's own schedule, replayed with the same seed and options, is the same
 * run: same hash, steps and result. */
static void test_replay_reproduces(void **state) {
  (void)state;
  static const char *const names[] = {"ask_reply", "barrier", "fanout", "test_race"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    const sh_scenario *sc = sh_scenario_find(names[i]);
    assert_non_null(sc);
    for (size_t k = 0; k < NSTRATEGIES; k++) {
      for (uint64_t seed = 1; seed <= 3; seed++) {
        sh_sim_options o;
        scenario_options(sc, seed, strategies[k], &o);
        sh_scn_result r[2];
        sh_sim_report rep[2];
        sim_run(sc, &o, &r[0], &rep[0]);
        const sh_sim_choice *c;
        size_t n = sh_sim_schedule(&c);
        sh_sim_choice *copy = malloc((n + 1) * sizeof(*copy));
        assert_non_null(copy);
        memcpy(copy, c, n * sizeof(*copy));
        o.schedule = copy;
        o.schedule_len = n;
        sim_run(sc, &o, &r[1], &rep[1]);
        free(copy);
        if (!same_report(&rep[0], &rep[1]))
          fprintf(stderr, "%s seed %llu %s: the replay differs\n", sc->name,
                  (unsigned long long)seed, sh_sim_strategy_name(strategies[k]));
        assert_true(same_report(&rep[0], &rep[1]));
        assert_int_equal(r[0].ok, r[1].ok);
      }
    }
  }
}

/* The shrinker on a synthetic failure that needs exactly the choices at
 * steps 7 and 42, out of 100: it finds exactly those two. */
static bool needs_7_and_42(void *ctx, const sh_sim_choice *c, size_t n) {
  (void)ctx;
  bool a = false, b = false;
  for (size_t i = 0; i < n; i++) {
    a |= c[i].step == 7;
    b |= c[i].step == 42;
  }
  return a && b;
}

static void test_shrink_synthetic(void **state) {
  (void)state;
  sh_sim_choice c[100];
  for (uint32_t i = 0; i < 100; i++) c[i] = (sh_sim_choice){.step = i, .to = i % 3};
  uint32_t trials = 0;
  size_t n = sh_sim_shrink(c, 100, needs_7_and_42, NULL, 1000, &trials);
  assert_int_equal(n, 2);
  assert_int_equal(c[0].step, 7);
  assert_int_equal(c[1].step, 42);
  assert_true(trials > 0 && trials < 200);
  /* The budget is a bound: one trial, and the schedule is left as it was. */
  for (uint32_t i = 0; i < 100; i++) c[i] = (sh_sim_choice){.step = i, .to = i % 3};
  n = sh_sim_shrink(c, 100, needs_7_and_42, NULL, 1, &trials);
  assert_int_equal(trials, 1);
  assert_int_equal(n, 100);
}

/* A replay of schedule c in a child: how it ends ("ok" or its kind). A
 * replay runs with the strategy of the recording: its bookkeeping (how far
 * an idle poll moves the clock, PCT's priorities) is part of the run. */
typedef struct replay_ctx {
  const sh_scenario *sc;
  uint64_t seed;
  sh_sim_strategy strategy;
} replay_ctx;

static void replay_kind(const replay_ctx *k, const sh_sim_choice *c, size_t n, char *kind,
                        size_t size) {
  expect_arg a = {.sc = k->sc};
  scenario_options(k->sc, k->seed, k->strategy, &a.o);
  a.o.schedule = c;
  a.o.schedule_len = n;
  a.o.max_steps = LIVELOCK_STEPS;
  int status = in_child(expect_body, &a, kind, size);
  if (status != 0) snprintf(kind, size, "status %d", status);
}

static bool replay_fails(void *ctx, const sh_sim_choice *c, size_t n) {
  char kind[64];
  replay_kind(ctx, c, n, kind, sizeof(kind));
  return strcmp(kind, "invariant") == 0;
}

/* test_race (scenarios/test_race.c) fails on some seeds under random: the
 * first such seed's schedule shrinks to a few choices that still fail, and
 * the shrunk schedule replays the same way every time. */
static void test_shrink_race(void **state) {
  (void)state;
  const sh_scenario *sc = sh_scenario_find("test_race");
  assert_non_null(sc);
  sh_sim_choice *c = NULL;
  size_t n = 0;
  replay_ctx k = {.sc = sc, .strategy = SH_SIM_RANDOM};
  /* An invariant failure ends the run normally: no child needed here. */
  for (uint64_t seed = 1; seed <= 50 && c == NULL; seed++) {
    sh_sim_options o;
    scenario_options(sc, seed, SH_SIM_RANDOM, &o);
    sh_scn_result r;
    sh_sim_report rep;
    sim_run(sc, &o, &r, &rep);
    if (r.ok) continue;
    assert_string_equal(r.kind, "invariant");
    const sh_sim_choice *log;
    n = sh_sim_schedule(&log);
    c = malloc((n + 1) * sizeof(*c));
    assert_non_null(c);
    memcpy(c, log, n * sizeof(*c));
    k.seed = seed;
  }
  assert_non_null(c);
  assert_true(replay_fails(&k, c, n));
  uint32_t trials;
  size_t m = sh_sim_shrink(c, n, replay_fails, &k, 500, &trials);
  fprintf(stderr, "test_race seed %llu: %zu -> %zu choices in %u replays\n",
          (unsigned long long)k.seed, n, m, trials);
  assert_true(m >= 1); /* with no preemption the window never opens */
  assert_true(m < n && m <= 8);
  assert_true(replay_fails(&k, c, m));
  free(c);
}

int main(void) {
  alarm(WATCHDOG_S);
  sh_sim_on_failure(unexpected_failure);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fail_deadlock),
      cmocka_unit_test(test_fail_livelock),
      cmocka_unit_test(test_fail_vtime),
      cmocka_unit_test(test_hidden_expectations),
      cmocka_unit_test(test_replay_reproduces),
      cmocka_unit_test(test_shrink_synthetic),
      cmocka_unit_test(test_shrink_race),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
