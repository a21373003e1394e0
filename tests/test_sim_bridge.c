/*
 * The outside-thread bridge (sh_bridge_*) in the deterministic simulator:
 * the cases of bridge_cases.h (see test_e2e_bridge.c for the list), where
 * the test's own threads are fibers scheduled with the workers, each case
 * under SEEDS seeds of every strategy (random, pct, none); and determinism:
 * a case with blocked thread fibers run twice with the same seed gives the
 * same report (trace hash, steps, virtual time, switches, jumps).
 *
 * A failed run cannot go on (a failure the simulator detects must not
 * return; a failed assertion leaves the simulation mid-run, so the next
 * sh_sim_configure could not start): each test runs its case in a fork()ed
 * child, whose output names the case, seed and strategy; the parent checks
 * the child's exit status.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stackhouse/sim.h>

#include "plat.h"

#define WATCHDOG_S 240
#ifndef SEEDS
#define SEEDS 8
#endif
#define DET_SEED 11
/* Smaller than on epoll: every step of the busy ring is simulated. */
#define BUSY_ASKS 200
#define BUSY_MAX_HOPS 200u

static const sh_sim_strategy strategies[] = {SH_SIM_RANDOM, SH_SIM_PCT, SH_SIM_NONE};
#define NSTRATEGIES (sizeof(strategies) / sizeof(strategies[0]))

/* The run in progress: what backend_setup configures, and what a failure
 * report names. */
static struct {
  const char *name;
  uint64_t seed;
  sh_sim_strategy strategy;
  bool weak; /* weak memory and atomic points (test_weak_new_vs_shutdown) */
} current = {"?", 1, SH_SIM_RANDOM, false};

static void backend_setup(void) {
  sh_sim_options o;
  sh_sim_options_default(&o);
  o.seed = current.seed;
  o.strategy = current.strategy;
  if (current.weak) {
    o.stale_permille = 500;
    o.atomic_points = 1;
  }
  sh_sim_configure(&o);
}

/* A polling wait gives the CPU to the other fibers (and advances the clock
 * when none can run). */
static void backend_pause(void) { sh_plat_yield_cpu(); }

#include "bridge_cases.h"

static void unexpected_failure(const char *kind, const char *detail) {
  fprintf(stderr, "simulation failed: %s: %s\n  case %s, seed %llu, strategy %s\n", kind, detail,
          current.name, (unsigned long long)current.seed, sh_sim_strategy_name(current.strategy));
  fflush(NULL);
  _exit(1);
}

static void run_case(const char *name, void (*body)(void), uint64_t seed, sh_sim_strategy s) {
  current.name = name;
  current.seed = seed;
  current.strategy = s;
  body();
}

/* Every seed under every strategy. A cmocka failure leaves the simulation
 * mid-run: the print says which run it was. */
static void run_all(const char *name, void (*body)(void)) {
  for (size_t k = 0; k < NSTRATEGIES; k++)
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
      print_message("%s: seed %llu %s\n", name, (unsigned long long)seed,
                    sh_sim_strategy_name(strategies[k]));
      run_case(name, body, seed, strategies[k]);
    }
}

/* Runs fn(state) in a child, as a cmocka group of one test of its own;
 * the parent's test fails if the child's did. */
static void in_child(const char *name, CMUnitTestFunction fn) {
  fflush(NULL); /* the child must not write the parent's buffered output again */
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    const struct CMUnitTest one[] = {{.name = name, .test_func = fn}};
    _exit(cmocka_run_group_tests_name(name, one, NULL, NULL) == 0 ? 0 : 1);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail_msg("%s failed in its child (status %#x)", name, (unsigned)status);
}

#define TEST_OF(name)                      \
  static void all_##name(void **state) {   \
    (void)state;                           \
    run_all(#name, case_##name);           \
  }                                        \
  static void test_##name(void **state) {  \
    (void)state;                           \
    in_child(#name, all_##name);           \
  }
BRIDGE_CASES(TEST_OF)

/* Bridges made while the system shuts down, with weak memory: a look at
 * `shut` repeated under the registry lock may read it set where the first
 * read it clear (shutdown stores it without the lock). */
static void weak_new_vs_shutdown(void **state) {
  (void)state;
  current.weak = true;
  run_all("new_vs_shutdown (weak memory)", case_new_vs_shutdown);
  current.weak = false;
}

static void test_weak_new_vs_shutdown(void **state) {
  (void)state;
  in_child("weak_new_vs_shutdown", weak_new_vs_shutdown);
}

static sh_sim_report report_of(const char *name, void (*body)(void), sh_sim_strategy s) {
  run_case(name, body, DET_SEED, s);
  sh_sim_report r;
  sh_sim_report_get(&r);
  return r;
}

/* Threads blocked for room and woken in turn: the same seed, the same run. */
static void determinism(void **state) {
  (void)state;
  for (size_t k = 0; k < NSTRATEGIES; k++) {
    sh_sim_report a = report_of("fifo", case_fifo, strategies[k]);
    sh_sim_report b = report_of("fifo", case_fifo, strategies[k]);
    assert_int_equal(a.hash, b.hash);
    assert_int_equal(a.steps, b.steps);
    assert_int_equal(a.vtime_ns, b.vtime_ns);
    assert_int_equal(a.switches, b.switches);
    assert_int_equal(a.jumps, b.jumps);
    assert_true(a.switches > 0);
  }
}

static void test_determinism(void **state) {
  (void)state;
  in_child("determinism", determinism);
}

#define ENTRY_OF(name) cmocka_unit_test(test_##name),

int main(void) {
  alarm(WATCHDOG_S);
  sh_sim_on_failure(unexpected_failure);
  const struct CMUnitTest tests[] = {BRIDGE_CASES(ENTRY_OF) cmocka_unit_test(test_weak_new_vs_shutdown),
                                     cmocka_unit_test(test_determinism)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
