/*
 * Simulation sweeps inside a cmocka test (header only). It includes
 * <cmocka.h> (and what cmocka.h needs before it). Link the test with its
 * scenario objects, `pkg-config --libs stackhouse-shsim` and -lcmocka (the
 * test's own main stays: the runner library's main is left out when the
 * test has one).
 *
 *   static void test_counter(void **state) {
 *     (void)state;
 *     sh_sim_assert_sweep("counter", 1, 50, SH_SIM_RANDOM);
 *   }
 *
 * Each seed runs in a forked child (sh_sim_run). The first failing seed
 * fails the test with its result and the shsim command that replays it.
 */
#ifndef SH_SIM_CMOCKA_H
#define SH_SIM_CMOCKA_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <stackhouse/sim.h>

static inline void sh_sim_assert_sweep_at(const char *name, uint64_t first_seed, uint64_t last_seed,
                                          sh_sim_strategy strategy, const char *file, int line) {
  sh_sim_options o;
  sh_sim_options_default(&o);
  o.strategy = strategy;
  for (uint64_t seed = first_seed; seed >= first_seed && seed <= last_seed; seed++) {
    o.seed = seed;
    sh_sim_result r;
    int rc = sh_sim_run(name, &o, &r);
    if (rc != 0) {
      print_error("sh_sim_run(\"%s\"): %s\n", name, strerror(-rc));
      _fail(file, line);
    }
    if (!r.ok) {
      print_error("%s seed %llu: FAIL:%s: %s\nreplay: shsim run %s --seed %llu --strategy %s\n",
                  name, (unsigned long long)seed, r.kind, r.detail, name,
                  (unsigned long long)seed, sh_sim_strategy_name(strategy));
      _fail(file, line);
    }
  }
}

/* Runs scenario `name` for every seed of [first_seed, last_seed] with the
 * strategy's defaults; fails the test at the first failing seed. */
#define sh_sim_assert_sweep(name, first_seed, last_seed, strategy) \
  sh_sim_assert_sweep_at((name), (first_seed), (last_seed), (strategy), __FILE__, __LINE__)

#endif
