/*
 * The counter's scenario as a cmocka test: a sweep of seeds under each
 * strategy. A failing seed fails the test with the shsim command that
 * replays it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stackhouse/sim.h>
#include <stackhouse/sim_cmocka.h>

static void test_counter_random(void **state) {
  (void)state;
  sh_sim_assert_sweep("counter", 1, 20, SH_SIM_RANDOM);
}

static void test_counter_pct(void **state) {
  (void)state;
  sh_sim_assert_sweep("counter", 1, 20, SH_SIM_PCT);
}

/* The store's fault point fires by the spec: a run with it is another run,
 * and one that still passes. */
static void test_counter_store_faults(void **state) {
  (void)state;
  sh_sim_options o;
  sh_sim_options_default(&o);
  o.seed = 3;
  sh_sim_result plain, faulty;
  assert_int_equal(sh_sim_run("counter", &o, &plain), 0);
  o.faults = "app/counter/store:0.2";
  assert_int_equal(sh_sim_run("counter", &o, &faulty), 0);
  assert_true(plain.ok && faulty.ok);
  assert_true(faulty.hash != plain.hash);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_counter_random),
      cmocka_unit_test(test_counter_pct),
      cmocka_unit_test(test_counter_store_faults),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
