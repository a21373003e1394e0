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
 * fails the test with its result and the command that replays it with
 * the project's own runner: the shsim its Makefile links from its
 * scenario objects and -lstackhouse-shsim (the installed shsim knows only
 * stackhouse's own scenarios). The runner named is, first found:
 *   - SH_SIM_RUNNER, a string macro defined before this header is included;
 *   - the environment variable SH_SIM_RUNNER when the test runs;
 *   - `shsim` beside the test program (the directory of its argv[0],
 *     program_invocation_name), as examples/sim-project builds them.
 */
#ifndef SH_SIM_CMOCKA_H
#define SH_SIM_CMOCKA_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <stackhouse/sim.h>

/* glibc's and musl's name of the running program, as exec was given it. */
extern char *program_invocation_name;

/* The replay command of a failing seed, in buf (see the top of the file). */
static inline void sh_sim_replay_hint(char *buf, size_t n, const char *name, uint64_t seed,
                                      sh_sim_strategy strategy) {
#ifdef SH_SIM_RUNNER
  const char *runner = SH_SIM_RUNNER;
#else
  const char *runner = getenv("SH_SIM_RUNNER");
#endif
  const char *prog = program_invocation_name != NULL ? program_invocation_name : "";
  const char *slash = strrchr(prog, '/');
  int dir = slash != NULL ? (int)(slash - prog) : 0;
  if (runner != NULL && runner[0] != '\0')
    snprintf(buf, n, "%s run %s --seed %llu --strategy %s", runner, name,
             (unsigned long long)seed, sh_sim_strategy_name(strategy));
  else
    snprintf(buf, n, "%.*s%sshsim run %s --seed %llu --strategy %s", dir, prog,
             slash != NULL ? "/" : "./", name, (unsigned long long)seed,
             sh_sim_strategy_name(strategy));
}

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
      char hint[512];
      sh_sim_replay_hint(hint, sizeof(hint), name, seed, strategy);
      print_error("%s seed %llu: FAIL:%s: %s\nreplay: %s\n", name, (unsigned long long)seed,
                  r.kind, r.detail, hint);
      _fail(file, line);
    }
  }
}

/* Runs scenario `name` for every seed of [first_seed, last_seed] with the
 * strategy's defaults; fails the test at the first failing seed. */
#define sh_sim_assert_sweep(name, first_seed, last_seed, strategy) \
  sh_sim_assert_sweep_at((name), (first_seed), (last_seed), (strategy), __FILE__, __LINE__)

#endif
