/*
 * The runs of a test case on the simulator, for the test files that run a
 * cases header written for both backends (bounded_cases.h, run_cases.h):
 * seeds 1..SIM_SEEDS, each under every strategy (random, pct, none). Run r
 * is seed 1 + r / 3 under strategy r % 3. The including file defines
 * SIM_SEEDS first.
 */
#ifndef TESTS_SIM_RUNS_H
#define TESTS_SIM_RUNS_H

#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include <stackhouse/sim.h>

#define SIM_NSTRATEGIES 3u
#define SIM_RUNS (SIM_SEEDS * SIM_NSTRATEGIES)

static const sh_sim_strategy sim_strategies[SIM_NSTRATEGIES] = {SH_SIM_RANDOM, SH_SIM_PCT,
                                                                SH_SIM_NONE};

static uint64_t sim_run_seed(unsigned run) { return 1 + run / SIM_NSTRATEGIES; }
static sh_sim_strategy sim_run_strategy(unsigned run) {
  return sim_strategies[run % SIM_NSTRATEGIES];
}

/* The simulator's options for the next system: seed, strategy, and a bound
 * on virtual time (0: the default). */
static void sim_configure(uint64_t seed, sh_sim_strategy strategy, uint64_t vtime_limit_ns) {
  sh_sim_options o;
  sh_sim_options_default(&o);
  o.seed = seed;
  o.strategy = strategy;
  if (vtime_limit_ns != 0) o.vtime_limit_ns = vtime_limit_ns;
  sh_sim_configure(&o);
}

static const char *sim_run_name(unsigned run) {
  static char name[64];
  snprintf(name, sizeof(name), "seed %llu, strategy %s", (unsigned long long)sim_run_seed(run),
           sh_sim_strategy_name(sim_run_strategy(run)));
  return name;
}

/* A failed simulation cannot go on: says which run it was and ends the
 * program. */
static void sim_run_failed(const char *kind, const char *detail, unsigned run) {
  fprintf(stderr, "simulation failed: %s: %s (run %u: %s)\n", kind, detail, run,
          sim_run_name(run));
  fflush(NULL);
  _exit(1);
}

#endif
