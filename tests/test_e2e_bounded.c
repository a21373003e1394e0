/*
 * Bounded mailboxes on the production backend (epoll, pthreads): the cases
 * of tests/bounded_cases.h, each run once (the file also runs under TSan).
 * Nothing here depends on timing: every case holds its consumer still by
 * messages, and the one timeout meant to pass is short and only waited for.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#include <unistd.h>

#define WATCHDOG_S 120
#define BOUNDED_RUNS 1u

static void bounded_configure(unsigned run) { (void)run; }

static const char *bounded_run_name(unsigned run) {
  (void)run;
  return "epoll";
}

#include "bounded_cases.h"

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {BOUNDED_CASES};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
