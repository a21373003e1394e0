/*
 * A house run on the deterministic simulator: the cases of
 * tests/run_cases.h under every strategy (random, pct, none) with several
 * seeds. X's busy handler polls with sh_yield_cpu, where the simulator lets
 * the other fibers run. A run the simulator itself fails (deadlock,
 * livelock, a run past its virtual-time limit) is reported with its seed
 * and strategy and ends the program.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#define WATCHDOG_S 240
#define SIM_SEEDS 8u

#include "sim_runs.h"

#define RUN_RUNS SIM_RUNS

static void run_configure(unsigned run) {
  sim_configure(sim_run_seed(run), sim_run_strategy(run), 0);
}
static const char *run_name(unsigned run) { return sim_run_name(run); }

#include "run_cases.h"

static void sim_failed(const char *kind, const char *detail) {
  sim_run_failed(kind, detail, run_current);
}

int main(void) {
  alarm(WATCHDOG_S);
  sh_sim_on_failure(sim_failed);
  const struct CMUnitTest tests[] = {RUN_CASES};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
