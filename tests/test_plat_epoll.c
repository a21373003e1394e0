/*
 * Tests for the production platform backend (backend-epoll/plat.c):
 * creation, time and randomness, workers started and joined, park and
 * wake, and threads that are not workers. Its events are
 * test_plat_epoll_event.c's.
 *
 * Timing: nothing here asserts how long something took, only that it
 * happened (and, for deadlines, that the park was not early), so the tests
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

/* ---- creation ------------------------------------------------------------ */

static void test_new_zero_workers_is_einval(void **state) {
  (void)state;
  sh_plat *p = (sh_plat *)0x1;
  assert_int_equal(sh_plat_new(0, &p), -EINVAL);
  assert_ptr_equal(p, (sh_plat *)0x1); /* untouched on failure */
}

static void test_new_free_without_start(void **state) {
  (void)state;
  sh_plat *p = NULL;
  assert_int_equal(sh_plat_new(4, &p), 0);
  assert_non_null(p);
  sh_plat_join(p); /* nothing started: a no-op */
  sh_plat_free(p);
  sh_plat_free(NULL);
}

/* ---- time and randomness ------------------------------------------------- */

static void test_now_ns_is_monotonic(void **state) {
  (void)state;
  uint64_t prev = sh_plat_now_ns();
  for (int i = 0; i < 10000; i++) {
    uint64_t now = sh_plat_now_ns();
    assert_true(now >= prev);
    prev = now;
  }
  sleep_ms(2);
  assert_true(sh_plat_now_ns() > prev);
}

static void test_random_differs(void **state) {
  (void)state;
  uint64_t v[64];
  for (int i = 0; i < 64; i++) v[i] = sh_plat_random();
  /* 64 draws of 64 bits: any repeat would mean a broken generator. */
  for (int i = 0; i < 64; i++)
    for (int j = i + 1; j < 64; j++) assert_true(v[i] != v[j]);
}

static void *random_thread(void *arg) {
  *(uint64_t *)arg = sh_plat_random();
  return NULL;
}

static void test_random_threads_get_distinct_streams(void **state) {
  (void)state;
  uint64_t a = 0, b = 0;
  pthread_t ta, tb;
  assert_int_equal(pthread_create(&ta, NULL, random_thread, &a), 0);
  assert_int_equal(pthread_create(&tb, NULL, random_thread, &b), 0);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  assert_true(a != b); /* both seeded independently, not a shared fixed seed */
}

/* ---- start / join / thread-locals ---------------------------------------- */

#define NSTART 3

typedef struct start_ctx {
  atomic_int seen[NSTART];     /* times each index was entered */
  atomic_int local_ok[NSTART]; /* the thread-local round-tripped */
  atomic_int bad_index;
} start_ctx;

static void start_entry(void *vctx, uint32_t worker) {
  start_ctx *c = vctx;
  if (worker >= NSTART) {
    atomic_fetch_add(&c->bad_index, 1);
    return;
  }
  atomic_fetch_add(&c->seen[worker], 1);
  /* A fresh thread starts unclaimed; what it stores it reads back. */
  bool ok = sh_plat_local() == NULL;
  sh_plat_set_local(&c->seen[worker]);
  ok = ok && sh_plat_local() == &c->seen[worker];
  sh_plat_set_local(NULL);
  ok = ok && sh_plat_local() == NULL;
  if (ok) atomic_store(&c->local_ok[worker], 1);
}

static void test_start_three_workers(void **state) {
  (void)state;
  static start_ctx c; /* zeroed; static so workers never see a dead frame */
  int main_marker;
  sh_plat_set_local(&main_marker);

  sh_plat *p = NULL;
  assert_int_equal(sh_plat_new(NSTART, &p), 0);
  assert_int_equal(sh_plat_start(p, start_entry, &c), 0);
  sh_plat_join(p);
  sh_plat_join(p); /* idempotent */

  assert_int_equal(atomic_load(&c.bad_index), 0);
  for (int i = 0; i < NSTART; i++) {
    assert_int_equal(atomic_load(&c.seen[i]), 1);
    assert_int_equal(atomic_load(&c.local_ok[i]), 1);
  }
  /* Workers' thread-locals are their own. */
  assert_ptr_equal(sh_plat_local(), &main_marker);
  sh_plat_set_local(NULL);
  sh_plat_free(p);
}

/* ---- park and wake ------------------------------------------------------- */

static void test_wake_before_park_returns(void **state) {
  (void)state;
  sh_plat *p = NULL;
  assert_int_equal(sh_plat_new(2, &p), 0);
  sh_plat_wake(p, 1);
  sh_plat_wake(p, 1); /* wakes coalesce in the counter */
  /* Would sleep 10 s (or trip the watchdog with no deadline) if the wake were lost. */
  uint64_t deadline = sh_plat_now_ns() + UINT64_C(10) * 1000000000u;
  sh_plat_park(p, 1, deadline);
  assert_true(sh_plat_now_ns() < deadline); /* it returned, not timed out */
  sh_plat_free(p);
}

static void test_park_deadline_not_early(void **state) {
  (void)state;
  sh_plat *p = NULL;
  assert_int_equal(sh_plat_new(1, &p), 0);
  /* Not multiples of 1 ms, to exercise the round-up. */
  uint64_t offsets[] = {20000000u, 1500000u, 300000u, 1u};
  for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
    uint64_t deadline = sh_plat_now_ns() + offsets[i];
    sh_plat_park(p, 0, deadline);
    assert_true(sh_plat_now_ns() >= deadline);
  }
  sh_plat_free(p);
}

static void test_park_past_deadline_returns(void **state) {
  (void)state;
  sh_plat *p = NULL;
  assert_int_equal(sh_plat_new(1, &p), 0);
  sh_plat_park(p, 0, 0);
  sh_plat_park(p, 0, sh_plat_now_ns());
  sh_plat_free(p);
}

static void test_wake_drained_by_park(void **state) {
  (void)state;
  sh_plat *p = NULL;
  assert_int_equal(sh_plat_new(1, &p), 0);
  sh_plat_wake(p, 0);
  sh_plat_park(p, 0, SH_PLAT_NO_DEADLINE); /* consumes the wake */
  /* The wake is gone: this park runs to its (short) deadline. */
  uint64_t deadline = sh_plat_now_ns() + 5000000u;
  sh_plat_park(p, 0, deadline);
  assert_true(sh_plat_now_ns() >= deadline);
  sh_plat_free(p);
}

#define NWAKE 2

typedef struct wake_ctx {
  sh_plat *p;
  atomic_int parking[NWAKE]; /* worker reached its park loop */
  atomic_int go[NWAKE];      /* main wants worker i to return */
  atomic_int parks[NWAKE];   /* park calls made (>= 1; more means spurious returns) */
} wake_ctx;

static void wake_entry(void *vctx, uint32_t worker) {
  wake_ctx *c = vctx;
  atomic_store(&c->parking[worker], 1);
  /* Parks are allowed to return spuriously, so the condition is the flag. */
  while (!atomic_load(&c->go[worker])) {
    sh_plat_park(c->p, worker, SH_PLAT_NO_DEADLINE);
    atomic_fetch_add(&c->parks[worker], 1);
  }
}

static void test_wake_from_other_thread_unparks(void **state) {
  (void)state;
  static wake_ctx c;
  assert_int_equal(sh_plat_new(NWAKE, &c.p), 0);
  assert_int_equal(sh_plat_start(c.p, wake_entry, &c), 0);
  for (uint32_t w = 0; w < NWAKE; w++) {
    while (!atomic_load(&c.parking[w])) sleep_ms(1);
  }
  /* Give them time to actually block in epoll_wait. Correctness does not
   * depend on it: an early wake is kept by the eventfd. */
  sleep_ms(20);
  for (uint32_t w = 0; w < NWAKE; w++) {
    atomic_store(&c.go[w], 1);
    sh_plat_wake(c.p, w);
  }
  sh_plat_join(c.p); /* hangs (watchdog) if a wake is lost */
  for (uint32_t w = 0; w < NWAKE; w++) assert_true(atomic_load(&c.parks[w]) >= 1);
  sh_plat_free(c.p);
}

/* Smoke test: both polling hints return (a fault or a hang fails it). */
static void test_relax_and_yield(void **state) {
  (void)state;
  int n = 0;
  for (int i = 0; i < 100; i++, n++) {
    sh_plat_relax();
    sh_plat_yield_cpu();
  }
  assert_int_equal(n, 100);
}

/* ---- threads that are not workers ---------------------------------------- */

typedef struct thread_rec {
  atomic_int runs;     /* fn calls */
  atomic_int local_ok; /* the thread started unclaimed (sh_plat_local NULL) */
} thread_rec;

static void thread_fn(void *arg) {
  thread_rec *r = arg;
  if (sh_plat_local() == NULL) atomic_store(&r->local_ok, 1);
  sh_plat_set_local(r); /* its own: the starter's stays as it was */
  atomic_fetch_add(&r->runs, 1);
}

static void test_thread_start_join(void **state) {
  (void)state;
  static thread_rec r;
  int marker;
  sh_plat_set_local(&marker);
  sh_plat_thread *t = NULL;
  assert_int_equal(sh_plat_thread_start(thread_fn, &r, &t), 0);
  assert_non_null(t);
  sh_plat_thread_join(t);
  assert_int_equal(atomic_load(&r.runs), 1);
  assert_int_equal(atomic_load(&r.local_ok), 1);
  assert_ptr_equal(sh_plat_local(), &marker);
  sh_plat_set_local(NULL);
}

static void test_thread_start_einval(void **state) {
  (void)state;
  static thread_rec r;
  sh_plat_thread *t = (sh_plat_thread *)0x1;
  assert_int_equal(sh_plat_thread_start(NULL, &r, &t), -EINVAL);
  assert_int_equal(sh_plat_thread_start(thread_fn, &r, NULL), -EINVAL);
  assert_ptr_equal(t, (sh_plat_thread *)0x1); /* untouched on failure */
}

/* More than the simulator's limit at once: epoll has none of its own. */
#define NTHREADS (2 * SH_PLAT_MAX_THREADS)

static void test_many_threads(void **state) {
  (void)state;
  static thread_rec r[NTHREADS];
  sh_plat_thread *t[NTHREADS];
  for (int i = 0; i < NTHREADS; i++)
    assert_int_equal(sh_plat_thread_start(thread_fn, &r[i], &t[i]), 0);
  for (int i = NTHREADS - 1; i >= 0; i--) sh_plat_thread_join(t[i]);
  for (int i = 0; i < NTHREADS; i++) {
    assert_int_equal(atomic_load(&r[i].runs), 1);
    assert_int_equal(atomic_load(&r[i].local_ok), 1);
  }
}

int main(void) {
  alarm(WATCHDOG_S); /* default SIGALRM action kills the run: a hang fails */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_new_zero_workers_is_einval),
      cmocka_unit_test(test_new_free_without_start),
      cmocka_unit_test(test_now_ns_is_monotonic),
      cmocka_unit_test(test_random_differs),
      cmocka_unit_test(test_random_threads_get_distinct_streams),
      cmocka_unit_test(test_start_three_workers),
      cmocka_unit_test(test_wake_before_park_returns),
      cmocka_unit_test(test_park_deadline_not_early),
      cmocka_unit_test(test_park_past_deadline_returns),
      cmocka_unit_test(test_wake_drained_by_park),
      cmocka_unit_test(test_wake_from_other_thread_unparks),
      cmocka_unit_test(test_relax_and_yield),
      cmocka_unit_test(test_thread_start_join),
      cmocka_unit_test(test_thread_start_einval),
      cmocka_unit_test(test_many_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
