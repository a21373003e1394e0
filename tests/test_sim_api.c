/*
 * sh_sim_run (sim.h) and the cmocka helper (sim_cmocka.h), on the tree's
 * scenarios: a passing run is the same run twice, a failing one comes back
 * with its kind, an unknown scenario is an error, a sweep of passing
 * seeds passes, and a failing seed's replay command names the project's
 * own runner.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <stackhouse/sim.h>
#include <stackhouse/sim_cmocka.h>

static sh_sim_result run(const char *name, uint64_t seed, sh_sim_strategy st) {
  sh_sim_options o;
  sh_sim_options_default(&o);
  o.seed = seed;
  o.strategy = st;
  sh_sim_result r;
  assert_int_equal(sh_sim_run(name, &o, &r), 0);
  return r;
}

static void test_run_ok_is_deterministic(void **state) {
  (void)state;
  sh_sim_result a = run("barrier", 3, SH_SIM_PCT);
  sh_sim_result b = run("barrier", 3, SH_SIM_PCT);
  assert_true(a.ok);
  assert_string_equal(a.kind, "");
  assert_true(a.messages > 0 && a.steps > 0);
  assert_true(a.hash == b.hash && a.steps == b.steps && a.vtime_ns == b.vtime_ns);
}

static void test_run_failures_have_their_kind(void **state) {
  (void)state;
  sh_sim_result r = run("test_deadlock", 1, SH_SIM_RANDOM);
  assert_false(r.ok);
  assert_string_equal(r.kind, "deadlock");
  r = run("test_invariant", 1, SH_SIM_RANDOM);
  assert_false(r.ok);
  assert_string_equal(r.kind, "invariant");
}

static void test_run_unknown_scenario(void **state) {
  (void)state;
  sh_sim_result r;
  assert_int_equal(sh_sim_run("no_such_scenario", NULL, &r), -ENOENT);
}

static void test_sweep_passes(void **state) {
  (void)state;
  sh_sim_assert_sweep("ask_reply", 1, 4, SH_SIM_RANDOM);
}

/* The replay command names the project's own runner, not the installed
 * shsim: by default the shsim beside the test program. */
static void test_replay_hint_names_the_runner(void **state) {
  (void)state;
  char hint[512], want[600];
  unsetenv("SH_SIM_RUNNER");
  sh_sim_replay_hint(hint, sizeof hint, "counter", 3, SH_SIM_PCT);
  const char *slash = strrchr(program_invocation_name, '/');
  assert_non_null(slash);
  snprintf(want, sizeof want, "%.*s/shsim run counter --seed 3 --strategy pct",
           (int)(slash - program_invocation_name), program_invocation_name);
  assert_string_equal(hint, want);
  setenv("SH_SIM_RUNNER", "build/my-sim", 1);
  sh_sim_replay_hint(hint, sizeof hint, "counter", 3, SH_SIM_RANDOM);
  assert_string_equal(hint, "build/my-sim run counter --seed 3 --strategy random");
  unsetenv("SH_SIM_RUNNER");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_run_ok_is_deterministic),
      cmocka_unit_test(test_run_failures_have_their_kind),
      cmocka_unit_test(test_run_unknown_scenario),
      cmocka_unit_test(test_sweep_passes),
      cmocka_unit_test(test_replay_hint_names_the_runner),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
