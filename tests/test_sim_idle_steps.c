/*
 * The simulator's cost of idle time, in steps (deterministic: a count, not
 * a timing). A cluster whose nodes only exchange heartbeats spends most of
 * its steps in workers that poll for work between messages; while no
 * fiber has work, every poller waits only for time, and its polls advance
 * the clock by the idle step instead of the ordinary one. This test fails
 * if polls while other fibers also merely poll fall back to the ordinary
 * step (about 25,000 steps per virtual second for the 3-node idle failover
 * cluster then, about 6,000 now), and checks that the run itself still
 * passes, the same on two strategies.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include <stackhouse/scenario.h>
#include <stackhouse/sim.h>

/* Steps per virtual second the idle 3-node cluster may take, at most:
 * about twice what it takes, a quarter of what it took with ordinary
 * steps for polls among pollers. */
#define MAX_STEPS_PER_VSEC 12000u

static uint64_t steps_per_vsec(const char *scenario, uint64_t seed, sh_sim_strategy strategy) {
  const sh_scenario *sc = sh_scenario_find(scenario);
  assert_non_null(sc);
  sh_sim_options o;
  sh_sim_options_default(&o);
  o.seed = seed;
  o.strategy = strategy;
  sh_sim_configure(&o);
  sh_scn_result r;
  sh_scenario_run(sc, seed, 0, &r);
  if (!r.ok) fprintf(stderr, "%s seed %llu: FAIL:%s: %s\n", scenario, (unsigned long long)seed,
                     r.kind, r.detail);
  assert_true(r.ok);
  sh_sim_report rep;
  sh_sim_report_get(&rep);
  assert_true(rep.vtime_ns >= 10000000000ull); /* the idle scenario's 10 s */
  return rep.steps / (rep.vtime_ns / 1000000000u);
}

static void test_idle_cluster_polls_cost_idle_steps(void **state) {
  (void)state;
  for (uint64_t seed = 1; seed <= 2; seed++) {
    uint64_t s = steps_per_vsec("failover_idle", seed, SH_SIM_RANDOM);
    fprintf(stderr, "failover_idle seed %llu (random): %llu steps per virtual second\n",
            (unsigned long long)seed, (unsigned long long)s);
    assert_true(s <= MAX_STEPS_PER_VSEC);
  }
}

static void test_idle_cluster_same_under_pct(void **state) {
  (void)state;
  uint64_t s = steps_per_vsec("failover_idle", 1, SH_SIM_PCT);
  fprintf(stderr, "failover_idle seed 1 (pct): %llu steps per virtual second\n",
          (unsigned long long)s);
  assert_true(s <= MAX_STEPS_PER_VSEC);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_idle_cluster_polls_cost_idle_steps),
      cmocka_unit_test(test_idle_cluster_same_under_pct),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
