/*
 * The core's invariants that only the simulation and test builds check
 * (SH_INVARIANT, core/base/check.h) fire on the states they forbid: each test
 * breaks one by hand in a forked child, which must die of the failed check
 * (SIGABRT). That they hold in correct runs is what every scenario run
 * shows.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/child.h"
#include "actor/future.h"
#include "actor/house.h"
#include "sched/housequeue.h"
#include "sched/loop.h"
#include "sched/worker.h"

#define WATCHDOG_S 10

static int child_status(void (*body)(const void *arg)) {
  char out[64];
  return th_in_child(body, NULL, WATCHDOG_S, out, sizeof(out));
}

/* A completed future that still holds a timer: its timeout was left armed. */
static void free_completed_with_timer(const void *arg) {
  (void)arg;
  sh_future f;
  memset(&f, 0, sizeof(f));
  f.done = true;
  f.timer = (struct sh_timer *)(void *)&f; /* never touched: the check comes first */
  sh_future_free(&f);
  _exit(0);
}

static void test_completed_future_holds_no_timer(void **state) {
  (void)state;
  assert_int_equal(child_status(free_completed_with_timer), 128 + SIGABRT);
}

/* A house owned by worker 1 in worker 0's mounting queue: mounted elsewhere. */
static sh_worker worker;
static sh_house house;

static void mount_on_another_worker(const void *arg) {
  (void)arg;
  worker.index = 0;
  sh_hq_init(&worker.mounting);
  sh_hq_init(&worker.io);
  sh_hq_init(&worker.state);
  house.owner = 1;
  sh_hq_push(&worker.mounting, &house.qlink, false);
  sh_loop_drain(&worker);
  _exit(0);
}

static void test_house_mounted_by_its_owner(void **state) {
  (void)state;
  assert_int_equal(child_status(mount_on_another_worker), 128 + SIGABRT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_completed_future_holds_no_timer),
      cmocka_unit_test(test_house_mounted_by_its_owner),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
