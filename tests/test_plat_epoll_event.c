/*
 * Tests for the events of the production platform backend
 * (backend-epoll/plat.c): a set wakes every waiter and stays set until
 * reset; a timed wait runs to its deadline, never returns early, and ends
 * with 0 when set before or while it waits; a waiter may free the event
 * once woken.
 *
 * Timing: nothing here asserts how long something took, only that it
 * happened (and, for deadlines, that the wait was not early), so the tests
 * hold on a loaded machine. A SIGALRM watchdog turns a lost wake (a hang)
 * into a failed run instead of a stuck CI job.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* nanosleep, alarm under -std=c11 */
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "plat.h"

/* Generous: the whole suite normally runs in well under a second. */
#define WATCHDOG_S 60

static void sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- event --------------------------------------------------------------- */

#define NWAITERS 3

typedef struct event_ctx {
  sh_plat_event *e;
  atomic_int waiting;
  atomic_int done;
} event_ctx;

static void *event_waiter(void *arg) {
  event_ctx *c = arg;
  atomic_fetch_add(&c->waiting, 1);
  sh_plat_event_wait(c->e);
  atomic_fetch_add(&c->done, 1);
  return NULL;
}

static void test_event_set_wakes_all_waiters(void **state) {
  (void)state;
  event_ctx c = {0};
  assert_int_equal(sh_plat_event_new(&c.e), 0);
  pthread_t t[NWAITERS];
  for (int i = 0; i < NWAITERS; i++)
    assert_int_equal(pthread_create(&t[i], NULL, event_waiter, &c), 0);
  while (atomic_load(&c.waiting) < NWAITERS) sleep_ms(1);
  sleep_ms(10);
  assert_int_equal(atomic_load(&c.done), 0); /* nobody got past an unset event */
  sh_plat_event_set(c.e);
  for (int i = 0; i < NWAITERS; i++) pthread_join(t[i], NULL);
  assert_int_equal(atomic_load(&c.done), NWAITERS);
  /* Future waiters pass straight through. */
  sh_plat_event_wait(c.e);
  sh_plat_event_free(c.e);
}

static void test_event_set_before_wait(void **state) {
  (void)state;
  sh_plat_event *e = NULL;
  assert_int_equal(sh_plat_event_new(&e), 0);
  sh_plat_event_set(e);
  sh_plat_event_set(e); /* setting twice is harmless */
  sh_plat_event_wait(e);
  sh_plat_event_wait(e);
  sh_plat_event_free(e);
  sh_plat_event_free(NULL);
}

static void *event_wait_then_free(void *arg) {
  sh_plat_event *e = arg;
  sh_plat_event_wait(e);
  sh_plat_event_free(e); /* as sh_system_wait's caller may: free once woken */
  return NULL;
}

static void test_event_waiter_frees_after_wake(void **state) {
  (void)state;
  for (int i = 0; i < 50; i++) {
    sh_plat_event *e = NULL;
    assert_int_equal(sh_plat_event_new(&e), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, event_wait_then_free, e), 0);
    sh_plat_event_set(e);
    pthread_join(t, NULL);
  }
}

/* ---- resettable event, timed waits --------------------------------------- */

#define MS_NS UINT64_C(1000000)

static void test_event_reset(void **state) {
  (void)state;
  sh_plat_event *e = NULL;
  assert_int_equal(sh_plat_event_new(&e), 0);
  sh_plat_event_set(e);
  assert_int_equal(sh_plat_event_wait_until(e, sh_plat_now_ns() + 1000 * MS_NS), 0);
  /* Set stays set until reset ... */
  assert_int_equal(sh_plat_event_wait_until(e, 0), 0);
  sh_plat_event_reset(e);
  /* ... and after it the wait runs to its deadline. */
  uint64_t deadline = sh_plat_now_ns() + 5 * MS_NS;
  assert_int_equal(sh_plat_event_wait_until(e, deadline), -ETIMEDOUT);
  assert_true(sh_plat_now_ns() >= deadline);
  sh_plat_event_reset(e); /* resetting a clear event is harmless */
  /* A set after the reset is kept. */
  sh_plat_event_set(e);
  assert_int_equal(sh_plat_event_wait_until(e, sh_plat_now_ns() + 1000 * MS_NS), 0);
  sh_plat_event_wait(e);
  sh_plat_event_free(e);
}

static void test_event_wait_until_times_out_not_early(void **state) {
  (void)state;
  sh_plat_event *e = NULL;
  assert_int_equal(sh_plat_event_new(&e), 0);
  /* Not multiples of 1 ms, and one below a microsecond. */
  uint64_t offsets[] = {20 * MS_NS, 1500000u, 300000u, 1u};
  for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
    uint64_t deadline = sh_plat_now_ns() + offsets[i];
    assert_int_equal(sh_plat_event_wait_until(e, deadline), -ETIMEDOUT);
    assert_true(sh_plat_now_ns() >= deadline);
  }
  /* A deadline already past: an immediate timeout. */
  assert_int_equal(sh_plat_event_wait_until(e, 0), -ETIMEDOUT);
  assert_int_equal(sh_plat_event_wait_until(e, sh_plat_now_ns()), -ETIMEDOUT);
  sh_plat_event_free(e);
}

typedef struct timed_ctx {
  sh_plat_event *e;
  uint64_t deadline;
  atomic_int waiting; /* the waiter is about to wait */
  atomic_int go;      /* the condition: stored just before the set */
  atomic_int rc;      /* its result, 1 until it returns */
} timed_ctx;

static void timed_waiter(void *arg) {
  timed_ctx *c = arg;
  atomic_store(&c->waiting, 1);
  /* A 0 may be spurious: the waiter re-checks its condition. A time-out
   * comes only at the deadline, beyond the watchdog's. Bounded by it. */
  int rc;
  do rc = sh_plat_event_wait_until(c->e, c->deadline);
  while (rc == 0 && !atomic_load(&c->go));
  atomic_store(&c->rc, rc);
}

static void go_and_set(timed_ctx *c) {
  atomic_store(&c->go, 1);
  sh_plat_event_set(c->e);
}

/* The waiter's deadline is beyond the watchdog: only the set can end it. */
static void run_timed_waiter(bool set_first) {
  static timed_ctx c;
  c.deadline = sh_plat_now_ns() + UINT64_C(2) * WATCHDOG_S * 1000 * MS_NS;
  atomic_store(&c.waiting, 0);
  atomic_store(&c.go, 0);
  atomic_store(&c.rc, 1);
  assert_int_equal(sh_plat_event_new(&c.e), 0);
  if (set_first) go_and_set(&c);
  sh_plat_thread *t = NULL;
  assert_int_equal(sh_plat_thread_start(timed_waiter, &c, &t), 0);
  assert_non_null(t);
  if (!set_first) {
    while (!atomic_load(&c.waiting)) sleep_ms(1);
    sleep_ms(10); /* likely in the condvar wait by now; an earlier set is kept anyway */
    assert_int_equal(atomic_load(&c.rc), 1);
    go_and_set(&c);
  }
  sh_plat_thread_join(t);
  assert_int_equal(atomic_load(&c.rc), 0);
  sh_plat_event_free(c.e);
}

static void test_event_wait_until_set_before(void **state) {
  (void)state;
  run_timed_waiter(true);
}

static void test_event_wait_until_set_while_waiting(void **state) {
  (void)state;
  run_timed_waiter(false);
}

static void wait_then_free(void *arg) {
  sh_plat_event *e = arg;
  /* This backend returns from a wait without a deadline only once set. */
  int rc = sh_plat_event_wait_until(e, SH_PLAT_NO_DEADLINE);
  (void)rc;
  sh_plat_event_free(e);
}

/* As test_event_waiter_frees_after_wake, through the timed wait. */
static void test_event_wait_until_waiter_frees(void **state) {
  (void)state;
  for (int i = 0; i < 50; i++) {
    sh_plat_event *e = NULL;
    assert_int_equal(sh_plat_event_new(&e), 0);
    sh_plat_thread *t = NULL;
    assert_int_equal(sh_plat_thread_start(wait_then_free, e, &t), 0);
    sh_plat_event_set(e);
    sh_plat_thread_join(t);
  }
}

int main(void) {
  alarm(WATCHDOG_S); /* default SIGALRM action kills the run: a hang fails */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_event_set_wakes_all_waiters),
      cmocka_unit_test(test_event_set_before_wait),
      cmocka_unit_test(test_event_waiter_frees_after_wake),
      cmocka_unit_test(test_event_reset),
      cmocka_unit_test(test_event_wait_until_times_out_not_early),
      cmocka_unit_test(test_event_wait_until_set_before),
      cmocka_unit_test(test_event_wait_until_set_while_waiting),
      cmocka_unit_test(test_event_wait_until_waiter_frees),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
