/*
 * Every visible scenario that is not simulator-only (scenarios/), once on
 * the production epoll backend, seed 1, its default worker count: the run
 * must pass the invariants every scenario shares and its own. One cmocka
 * test per scenario, named after it (the list is built from the registry, so
 * a new scenario is tested without touching this file).
 *
 * No timing is asserted; an alarm() watchdog fails a run that hangs.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include <stackhouse/scenario.h>

#define WATCHDOG_S 240

static void test_scenario(void **state) {
  const sh_scenario *sc = *state;
  sh_scn_result r;
  sh_scenario_run(sc, 1, 0, &r);
  if (!r.ok)
    fprintf(stderr, "%s: FAIL:%s: %s\n  replay: shrun %s --seed 1\n", sc->name, r.kind, r.detail,
            sc->name);
  assert_true(r.ok);
}

static bool on_epoll(const sh_scenario *sc) {
  return (sc->flags & (SH_SCN_HIDDEN | SH_SCN_SIM_ONLY)) == 0;
}

int main(void) {
  alarm(WATCHDOG_S);
  size_t count = sh_scenario_count(), n = 0;
  struct CMUnitTest *tests = calloc(count > 0 ? count : 1, sizeof(*tests));
  if (tests == NULL) return 1;
  for (size_t i = 0; i < count; i++) {
    const sh_scenario *sc = sh_scenario_at(i);
    if (!on_epoll(sc)) continue;
    /* cmocka hands initial_state to the test as *state. */
    tests[n++] = (struct CMUnitTest){.name = sc->name,
                                     .test_func = test_scenario,
                                     .initial_state = (void *)sc};
  }
  if (n == 0) {
    fprintf(stderr, "no scenario to run on the epoll backend\n");
    free(tests);
    return 1;
  }
  int failed = _cmocka_run_group_tests("scenarios on epoll", tests, n, NULL, NULL);
  free(tests);
  return failed;
}
