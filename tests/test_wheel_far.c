/*
 * Tests for the timer wheel (core/time/wheel.c) far ahead: entries beyond the
 * last level wait in the overflow list; next_ns is a lower bound that
 * reaches every expiry in a bounded number of wake-ups; large jumps, even
 * over centuries, stop only where something is due.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wheel_fixture.h"

/* Beyond 64^4 ticks (~4.6 h) entries wait in the overflow list. */
static void test_far_future(void **state) {
  (void)state;
  harness *h = harness_new(1 * SEC, 0);
  static const uint64_t at[] = {5 * HOUR, 10 * HOUR + 7, 30 * HOUR, 100 * 24 * HOUR};
  enum { N = sizeof at / sizeof at[0] };
  timer ts[N] = {0};
  for (size_t i = 0; i < N; i++) add(h, &ts[i], 1 * SEC + at[i]);
  for (size_t i = 0; i < N; i++) {
    uint64_t expire = 1 * SEC + at[i];
    assert_true(sh_wheel_next_ns(&h->w) <= tick_up_ns(expire));
    assert_int_equal(advance(h, tick_up_ns(expire) - 1, 0), 0);
    assert_int_equal(ts[i].fires, 0);
    assert_int_equal(advance(h, tick_up_ns(expire), 0), 1);
    assert_int_equal(ts[i].fires, 1);
    assert_int_equal(sh_wheel_count(&h->w), N - 1 - i);
  }
  harness_free(h);
}

/* next_ns is a lower bound, yet following it reaches every expiry in a
 * bounded number of wake-ups (it is a cascade point, never a busy loop). */
static void test_next_ns(void **state) {
  (void)state;
  enum { N = 200 };
  harness *h = harness_new(0, 0);
  timer *ts = calloc(N, sizeof *ts);
  assert_non_null(ts);
  rng_seed(0xabcdef);
  for (size_t i = 0; i < N; i++) add(h, &ts[i], 1 + rng_below(rng_below(2) ? 2 * SEC : 20 * HOUR));
  size_t wakeups = 0;
  for (; sh_wheel_count(&h->w) > 0 && wakeups < 100000; wakeups++) {
    uint64_t next = sh_wheel_next_ns(&h->w);
    assert_true(next > h->now_ns);
    assert_true(next <= earliest_linked_tick_ns(ts, N));
    advance(h, next, 0);
  }
  assert_int_equal(sh_wheel_count(&h->w), 0);
  assert_true(sh_wheel_next_ns(&h->w) == UINT64_MAX);
  /* At most one wake-up per entry and level plus one per 4.6 h of overflow. */
  assert_true(wakeups <= N * (SH_WHEEL_LEVELS + 1) + 20 * HOUR / (16777216 * MS) + 1);
  for (size_t i = 0; i < N; i++) assert_int_equal(ts[i].fires, 1);
  free(ts);
  harness_free(h);
}

/* A 10-hour jump with a few timers stops only where something happens. */
static void test_large_jump_skips(void **state) {
  (void)state;
  harness *h = harness_new(42 * MS, 0);
  assert_int_equal(advance(h, 10 * HOUR, 0), 0);
  assert_true(h->w.steps <= 1);
  timer ts[5] = {0};
  add(h, &ts[0], 10 * HOUR + 1 * SEC);
  add(h, &ts[1], 12 * HOUR);
  add(h, &ts[2], 15 * HOUR + 3);
  add(h, &ts[3], 17 * HOUR);
  add(h, &ts[4], 40 * HOUR); /* stays */
  uint64_t steps = h->w.steps;
  assert_int_equal(advance(h, 20 * HOUR, 0), 4);
  /* Per entry: a stop per level it cascades through, plus one per overflow
   * re-examination (every 64^4 ticks) and the final stop. */
  assert_true(h->w.steps - steps <= 5 * SH_WHEEL_LEVELS + 10 * HOUR / (16777216 * MS) + 2);
  assert_int_equal(sh_wheel_count(&h->w), 1);
  assert_int_equal(ts[4].fires, 0);
  harness_free(h);
}

/* Overflow windows (64^4 ticks) with nothing due are skipped too, even over
 * centuries, as when a worker discards its timers at shutdown. */
static void test_overflow_jump_skips(void **state) {
  (void)state;
  const uint64_t day = 24 * HOUR, far = 200ull * 365 * day;
  harness *h = harness_new(0, 0);
  timer ts[4] = {0};
  add(h, &ts[0], 100 * day);
  add(h, &ts[1], 3 * day);
  add(h, &ts[2], far);
  add(h, &ts[3], 50 * day);
  sh_wheel_remove(&h->w, &ts[1].link); /* leaves a stale, lower bound */
  assert_true(sh_wheel_next_ns(&h->w) <= 50 * day);
  assert_int_equal(advance(h, 99 * day, 0), 1);
  assert_int_equal(ts[3].fires, 1);
  assert_int_equal(advance(h, far - 1, 0), 1);
  assert_int_equal(ts[0].fires, 1);
  assert_int_equal(advance(h, far, 0), 1);
  assert_int_equal(ts[2].fires, 1);
  assert_int_equal(advance(h, UINT64_MAX / 4, 0), 0);
  /* Per entry a stop per level plus its window; one for the stale bound. */
  assert_true(h->w.steps <= 4 * (SH_WHEEL_LEVELS + 1) + 1 + 4);
  assert_int_equal(sh_wheel_count(&h->w), 0);
  harness_free(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_far_future),
      cmocka_unit_test(test_next_ns),
      cmocka_unit_test(test_large_jump_skips),
      cmocka_unit_test(test_overflow_jump_skips),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
