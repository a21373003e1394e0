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

#include <stackhouse/sim_cmocka.h>

static void test_counter_random(void **state) {
  (void)state;
  sh_sim_assert_sweep("counter", 1, 20, SH_SIM_RANDOM);
}

static void test_counter_pct(void **state) {
  (void)state;
  sh_sim_assert_sweep("counter", 1, 20, SH_SIM_PCT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_counter_random),
      cmocka_unit_test(test_counter_pct),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
