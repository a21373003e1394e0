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

#include <stdio.h>
#include <unistd.h>

#include <stackhouse/sim.h>

#define WATCHDOG_S 240
#define SEEDS 8u
#define NSTRATEGIES 3u
#define BOUNDED_RUNS (SEEDS * NSTRATEGIES)
/* A case is done in well under a virtual second; far more means a hang. */
#define VTIME_LIMIT_NS (600ull * 1000000000ull)

static const sh_sim_strategy strategies[NSTRATEGIES] = {SH_SIM_RANDOM, SH_SIM_PCT, SH_SIM_NONE};

static uint64_t run_seed(unsigned run) { return 1 + run / NSTRATEGIES; }
static sh_sim_strategy run_strategy(unsigned run) { return strategies[run % NSTRATEGIES]; }

static void sim_configure(uint64_t seed, sh_sim_strategy strategy) {
  sh_sim_options o;
  sh_sim_options_default(&o);
  o.seed = seed;
  o.strategy = strategy;
  o.vtime_limit_ns = VTIME_LIMIT_NS;
  sh_sim_configure(&o);
}

static void bounded_configure(unsigned run) { sim_configure(run_seed(run), run_strategy(run)); }

static const char *bounded_run_name(unsigned run) {
  static char name[64];
  snprintf(name, sizeof(name), "seed %llu, strategy %s", (unsigned long long)run_seed(run),
           sh_sim_strategy_name(run_strategy(run)));
  return name;
}

#include "bounded_cases.h"

static void sim_failed(const char *kind, const char *detail) {
  fprintf(stderr, "simulation failed: %s: %s (run %u: %s)\n", kind, detail, bounded_current_run,
          bounded_run_name(bounded_current_run));
  fflush(NULL);
  _exit(1);
}

/* ---- determinism ------------------------------------------------------------ */

static void run_once(void (*body)(void), uint64_t seed, sh_sim_strategy strategy,
                     sh_sim_report *rep) {
  sim_configure(seed, strategy);
  body();
  sh_sim_report_get(rep);
}

static void assert_same_twice(void (*body)(void)) {
  for (unsigned s = 0; s < NSTRATEGIES; s++) {
    sh_sim_report a, b;
    run_once(body, 7, strategies[s], &a);
    run_once(body, 7, strategies[s], &b);
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
