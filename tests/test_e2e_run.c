/*
 * A house run on the production backend (epoll, pthreads): the cases of
 * tests/run_cases.h, each run once (the file also runs under TSan). Nothing
 * depends on timing: X is held by its own handler until Y reports that the
 * case's messages are queued.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#include <unistd.h>

#define WATCHDOG_S 120
#define RUN_RUNS 1u

static void run_configure(unsigned run) { (void)run; }

static const char *run_name(unsigned run) {
  (void)run;
  return "epoll";
}

#include "run_cases.h"

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {RUN_CASES};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
