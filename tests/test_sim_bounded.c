/*
 * Bounded mailboxes on the deterministic simulator: the cases of
 * tests/bounded_cases.h, each run under every strategy (random, pct, none)
 * with several seeds, on virtual time (the timeouts pass at once in real
 * time). A run the simulator itself fails (deadlock, livelock, a run past
 * its virtual-time limit) is reported with its seed and strategy and ends
 * the program: a failed simulation cannot go on.
 *
 * Determinism: one case run twice with the same seed and strategy gives
 * the same report (trace hash, steps, virtual time, switches, jumps).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#define WATCHDOG_S 240
#define SIM_SEEDS 8u
/* A case is done in well under a virtual second; far more means a hang. */
#define VTIME_LIMIT_NS (600ull * 1000000000ull)

#include "sim_runs.h"

#define BOUNDED_RUNS SIM_RUNS

static void bounded_configure(unsigned run) {
  sim_configure(sim_run_seed(run), sim_run_strategy(run), VTIME_LIMIT_NS);
}
static const char *bounded_run_name(unsigned run) { return sim_run_name(run); }

#include "bounded_cases.h"

static void sim_failed(const char *kind, const char *detail) {
  sim_run_failed(kind, detail, bounded_current_run);
}

/* ---- determinism ------------------------------------------------------------ */

static void run_once(void (*body)(void), uint64_t seed, sh_sim_strategy strategy,
                     sh_sim_report *rep) {
  sim_configure(seed, strategy, VTIME_LIMIT_NS);
  body();
  sh_sim_report_get(rep);
}

static void assert_same_twice(void (*body)(void)) {
  for (unsigned s = 0; s < SIM_NSTRATEGIES; s++) {
    sh_sim_report a, b;
    run_once(body, 7, sim_strategies[s], &a);
    run_once(body, 7, sim_strategies[s], &b);
    assert_true(a.hash == b.hash);
    assert_true(a.steps == b.steps);
    assert_true(a.vtime_ns == b.vtime_ns);
    assert_true(a.switches == b.switches);
    assert_true(a.jumps == b.jumps);
  }
}

static void test_deterministic(void **state) {
  (void)state;
  bounded_all_ran = true; /* this test names no run */
  assert_same_twice(case_fifo_put);
  assert_same_twice(case_timeouts);
  assert_same_twice(case_many_producers_cap1);
}

int main(void) {
  alarm(WATCHDOG_S);
  sh_sim_on_failure(sim_failed);
  const struct CMUnitTest tests[] = {BOUNDED_CASES, cmocka_unit_test(test_deterministic)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
