/*
 * Reclaimed actors on the production backend (epoll, pthreads): the cases
 * of tests/reclaim_cases.h, each run once. The test thread polls (sleeping
 * between looks) only for what actors report; nothing depends on timing.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#include <unistd.h>

#define WATCHDOG_S 240
#define RC_RUNS 1u
#define RC_MEM_RUNS 1u
/* Two waves: 100,000 cycles (fewer under TSan, several times slower). */
#define RC_MEM_CYCLES (TH_UNDER_TSAN ? 12800u : 50000u)
#define RC_CHECK_RSS 1

static void run_configure(unsigned run) { (void)run; }

static const char *run_name(unsigned run) {
  (void)run;
  return "epoll";
}

#include "support/harness.h"

static void rc_pause(void) { th_sleep_us(100); }

#include "reclaim_cases.h"

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {RC_CASES};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
