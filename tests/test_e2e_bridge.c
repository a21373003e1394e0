/*
 * End-to-end tests of the outside-thread bridge (sh_bridge_*) on the
 * production backend (epoll, pthreads; also run under TSan): the cases of
 * bridge_cases.h, each on a fresh system:
 *   1. the three ways to receive: SH_FOREVER gets the reply; SH_NOWAIT with
 *      an ask pending and no reply yet is -EAGAIN, a timeout -ETIMEDOUT;
 *      nothing pending is -ENOMSG;
 *   2. a hundred asks in flight from one bridge, to plain, round-robin and
 *      per-worker addresses: each ticket answered exactly once;
 *   3. exceptions (the actor throws, no ask handler) and stopped actors;
 *   4. blocking sends into full bounded mailboxes (notice and ask): refused
 *      with SH_NOWAIT and a short timeout (the message stays the caller's),
 *      admitted from another thread with SH_FOREVER once room is made;
 *   5. threads blocked on one full mailbox get room in the order they came;
 *   6. sh_stop wakes blocked senders with -ESHUTDOWN, messages theirs;
 *   7. sh_system_shutdown wakes a thread blocked in a receive and one
 *      blocked for room; no bridge after shutdown;
 *   8. a freed bridge's late reply never reaches its next user;
 *   9. misuse: NULL arguments, wrong message kinds, a bridge from a worker;
 *  10. a thread asking in a loop while a busy workload makes workers steal;
 *  11. threads making and freeing bridges while the system shuts down: each
 *      sh_bridge_new succeeds or is -ESHUTDOWN.
 * No timing assertion: timeouts used here expire on things that cannot
 * happen, and waits for other threads poll with a bound.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#include <unistd.h>

#include "support/harness.h"

#define WATCHDOG_S 120
#define BUSY_ASKS (TH_UNDER_TSAN ? 500 : 2000)
/* The asker's end stops the tokens; this only bounds a lost stop. */
#define BUSY_MAX_HOPS 1000000u

static void backend_setup(void) {}

/* Real threads: sleep a little, so a polling wait does not starve them. */
static void backend_pause(void) { th_sleep_us(50); }

#include "bridge_cases.h"

#define TEST_OF(name)                   \
  static void test_##name(void **state) { \
    (void)state;                        \
    case_##name();                      \
  }
BRIDGE_CASES(TEST_OF)

#define ENTRY_OF(name) cmocka_unit_test(test_##name),

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {BRIDGE_CASES(ENTRY_OF)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
