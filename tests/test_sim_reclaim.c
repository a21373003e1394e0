/*
 * Reclaimed actors on the deterministic simulator: the cases of
 * tests/reclaim_cases.h under every strategy (random, pct, none) with
 * several seeds; the memory case, the longest, with one seed per strategy.
 * The test thread is a fiber; its polling gives the others the CPU. A run
 * the simulator itself fails (deadlock, livelock, past its virtual-time
 * limit) is reported with its seed and strategy and ends the program.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#define WATCHDOG_S 600
#define SIM_SEEDS 6u

#include <stackhouse/probe.h>

#include "sim_runs.h"

#define RC_RUNS SIM_RUNS
#define RC_MEM_RUNS SIM_NSTRATEGIES
#define RC_MEM_CYCLES 50000u
#define RC_CHECK_RSS 0

static void run_configure(unsigned run) {
  sim_configure(sim_run_seed(run), sim_run_strategy(run), 0);
}
static const char *run_name(unsigned run) { return sim_run_name(run); }

static void rc_pause(void) { sh_yield_cpu(); }

#include "reclaim_cases.h"

static void sim_failed(const char *kind, const char *detail) {
  sim_run_failed(kind, detail, run_current);
}

int main(void) {
  alarm(WATCHDOG_S);
  sh_sim_on_failure(sim_failed);
  const struct CMUnitTest tests[] = {RC_CASES};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
