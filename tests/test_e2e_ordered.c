/*
 * Per-sender order on the production backend (epoll, pthreads): the cases
 * of tests/ordered_cases.h, each run once (the file also runs under TSan).
 * Nothing depends on timing: a counter that must not run yet is held by
 * its own handler until the sender reports that everything is queued.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#include <unistd.h>

#define WATCHDOG_S 120
#define ORD_RUNS 1u

static void ord_configure(unsigned run) { (void)run; }

static const char *ord_name(unsigned run) {
  (void)run;
  return "epoll";
}

#include "ordered_cases.h"

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {ORDERED_CASES};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
