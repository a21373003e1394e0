/*
 * Tests for the timer wheel (core/time/wheel.c): firing never early and at most
 * one tick late, expiry order, removal, re-adding from fire (periodic
 * timers), the per-call `max`, and an exact count, plus a randomized run
 * checked against a trivial model. Far expiries (the overflow list),
 * next_ns and large jumps are test_wheel_far.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wheel_fixture.h"

static void test_empty(void **state) {
  (void)state;
  harness *h = harness_new(123 * MS, 0);
  assert_int_equal(sh_wheel_count(&h->w), 0);
  assert_true(sh_wheel_next_ns(&h->w) == UINT64_MAX);
  assert_int_equal(advance(h, 10 * HOUR, 0), 0);
  assert_true(sh_wheel_next_ns(&h->w) == UINT64_MAX);
  harness_free(h);
}

static void test_single_not_before_expiry(void **state) {
  (void)state;
  harness *h = harness_new(0, 4);
  timer on_tick = {0}, mid_tick = {0};
  add(h, &on_tick, 5 * MS);
  add(h, &mid_tick, 7 * MS + MS / 2);
  assert_int_equal(sh_wheel_count(&h->w), 2);
  assert_int_equal(advance(h, 5 * MS - 1, 0), 0);
  assert_int_equal(advance(h, 5 * MS, 0), 1);
  assert_int_equal(on_tick.fires, 1);
  assert_int_equal(sh_wheel_count(&h->w), 1);
  /* Rounded up: 7.5 ms is due at the 8 ms tick, never at 7 ms. */
  assert_int_equal(advance(h, 7 * MS + MS / 2 - 1, 0), 0);
  assert_int_equal(advance(h, 8 * MS - 1, 0), 0);
  assert_int_equal(advance(h, 8 * MS, 0), 1);
  assert_int_equal(mid_tick.fires, 1);
  assert_int_equal(advance(h, 1 * HOUR, 0), 0);
  assert_int_equal(sh_wheel_count(&h->w), 0);
  harness_free(h);
}

static void test_past_expiry_fires_at_next_advance(void **state) {
  (void)state;
  harness *h = harness_new(100 * MS + 3, 0);
  timer t = {0}, u = {0}, v = {0};
  add(h, &t, 40 * MS);
  add(h, &u, 100 * MS);
  add(h, &v, 100 * MS + 2); /* rounds up to the 101 ms tick */
  assert_true(sh_wheel_next_ns(&h->w) <= 40 * MS);
  /* Same time as init: no tick is crossed, the past ones fire anyway. */
  assert_int_equal(advance(h, 100 * MS + 3, 0), 2);
  assert_int_equal(t.fires, 1);
  assert_int_equal(u.fires, 1);
  assert_int_equal(v.fires, 0);
  assert_int_equal(sh_wheel_next_ns(&h->w), 101 * MS);
  assert_int_equal(advance(h, 101 * MS, 0), 1);
  assert_int_equal(v.fires, 1);
  assert_int_equal(sh_wheel_count(&h->w), 0);
  harness_free(h);
}

static void test_remove_prevents_firing(void **state) {
  (void)state;
  harness *h = harness_new(0, 0);
  timer near = {0}, far = {0}, past = {0}, keep = {0};
  add(h, &near, 3 * MS);
  add(h, &far, 6 * HOUR);
  add(h, &keep, 4 * MS);
  advance(h, 1 * MS, 0);
  add(h, &past, 0);
  assert_int_equal(sh_wheel_count(&h->w), 4);
  sh_wheel_remove(&h->w, &near.link);
  sh_wheel_remove(&h->w, &far.link);
  sh_wheel_remove(&h->w, &past.link);
  assert_false(sh_wheel_linked(&near.link));
  assert_false(sh_wheel_linked(&far.link));
  assert_false(sh_wheel_linked(&past.link));
  assert_int_equal(sh_wheel_count(&h->w), 1);
  assert_int_equal(advance(h, 10 * HOUR, 0), 1);
  assert_int_equal(keep.fires, 1);
  assert_int_equal(near.fires + far.fires + past.fires, 0);
  /* A removed entry can be added again. */
  add(h, &near, 10 * HOUR + 2 * MS);
  assert_int_equal(advance(h, 10 * HOUR + 2 * MS, 0), 1);
  assert_int_equal(near.fires, 1);
  harness_free(h);
}

/* Random expiries across all four levels, advanced one tick at a time: each
 * timer fires once, in expiry order, within the tick after its expiry. */
static void test_order_tick_by_tick(void **state) {
  (void)state;
  enum { N = 3000 };
  const uint64_t horizon = 300 * SEC; /* past 64^3 ticks, so level 3 cascades */
  harness *h = harness_new(0, N);
  timer *ts = calloc(N, sizeof *ts);
  assert_non_null(ts);
  rng_seed(0x5eed1);
  for (size_t i = 0; i < N; i++) add(h, &ts[i], 1 + rng_below(horizon));
  for (uint64_t now = MS; now <= horizon + MS; now += MS) {
    advance(h, now, 0);
    assert_int_equal(sh_wheel_count(&h->w), N - h->nlog);
  }
  assert_int_equal(h->nlog, N);
  for (size_t i = 0; i < N; i++) {
    timer *t = h->log[i];
    assert_int_equal(t->fires, 1);
    assert_true(t->last_fire_ns >= t->expire_ns);
    assert_true(t->last_fire_ns < t->expire_ns + MS);
    if (i > 0) assert_true(tick_up_ns(h->log[i - 1]->expire_ns) <= tick_up_ns(t->expire_ns));
  }
  free(ts);
  harness_free(h);
}

/* Random jumps, large and small: still never early and in expiry order. */
static void test_order_random_jumps(void **state) {
  (void)state;
  enum { N = 2000 };
  const uint64_t horizon = 12 * HOUR;
  harness *h = harness_new(7 * MS, N);
  timer *ts = calloc(N, sizeof *ts);
  assert_non_null(ts);
  rng_seed(0xfeed);
  for (size_t i = 0; i < N; i++) {
    /* Mostly near, some spread over hours (overflow included). */
    uint64_t span = rng_below(4) ? 70 * SEC : horizon;
    add(h, &ts[i], 7 * MS + rng_below(span));
  }
  uint64_t now = 7 * MS;
  for (size_t step = 0; now < horizon + 7 * MS && step < 100000; step++) {
    uint64_t jump = rng_below(8) ? rng_below(50 * MS) : rng_below(HOUR);
    now += jump;
    advance(h, now, 0);
    for (size_t i = 0; i < N; i++) {
      if (ts[i].expire_ns <= now) assert_int_equal(ts[i].fires, 1);
    }
  }
  assert_true(now >= horizon + 7 * MS);
  assert_int_equal(h->nlog, N);
  assert_int_equal(sh_wheel_count(&h->w), 0);
  for (size_t i = 1; i < N; i++)
    assert_true(tick_up_ns(h->log[i - 1]->expire_ns) <= tick_up_ns(h->log[i]->expire_ns));
  free(ts);
  harness_free(h);
}

static void test_periodic_readd(void **state) {
  (void)state;
  harness *h = harness_new(0, 0);
  timer p = {.period_ns = 10 * MS};
  add(h, &p, 10 * MS);
  for (uint64_t now = MS; now <= 1 * SEC; now += MS) {
    advance(h, now, 0);
    assert_int_equal(p.fires, now / (10 * MS));
    assert_int_equal(sh_wheel_count(&h->w), 1);
  }
  assert_int_equal(p.last_fire_ns, 1 * SEC);
  /* Catching up in one call fires every missed period, each at most once. */
  assert_int_equal(advance(h, 2 * SEC, 0), 100);
  assert_int_equal(p.fires, 200);
  assert_int_equal(p.expire_ns, 2 * SEC + 10 * MS);
  assert_int_equal(sh_wheel_count(&h->w), 1);
  harness_free(h);
}

/* A timer re-armed for "now" from fire must not spin one advance forever;
 * it fires once per advance even when that advance crosses many ticks. */
static void test_readd_at_now_is_bounded(void **state) {
  (void)state;
  harness *h = harness_new(0, 0);
  timer t = {0};
  h->readd_at_now = true;
  add(h, &t, 0);
  assert_int_equal(advance(h, 0, 0), 1);
  assert_int_equal(advance(h, 0, 0), 1);
  /* Re-armed for 1 h, which this advance reaches: once more at 1 h, then
   * re-armed at 1 h again, which only the next advance fires. */
  assert_int_equal(advance(h, 1 * HOUR, 0), 2);
  assert_int_equal(sh_wheel_count(&h->w), 1);
  assert_int_equal(sh_wheel_next_ns(&h->w), 0);
  h->readd_at_now = false;
  assert_int_equal(advance(h, 1 * HOUR, 0), 1);
  assert_int_equal(sh_wheel_count(&h->w), 0);
  harness_free(h);
}

/* fire removes a timer of its own batch and one further away. */
static void test_fire_removes_others(void **state) {
  (void)state;
  harness *h = harness_new(0, 8);
  timer a = {0}, b = {0}, c = {0};
  add(h, &a, 5 * MS);
  add(h, &b, 5 * MS);
  add(h, &c, 9 * HOUR);
  timer *first = NULL;
  /* Whichever of a and b fires first cancels the other. */
  a.victim = &b;
  b.victim = &a;
  assert_int_equal(advance(h, 5 * MS, 0), 1);
  first = h->log[0];
  assert_true(first == &a || first == &b);
  assert_int_equal(a.fires + b.fires, 1);
  assert_int_equal(sh_wheel_count(&h->w), 1);
  timer d = {.victim = &c};
  add(h, &d, 6 * MS);
  assert_int_equal(advance(h, 10 * HOUR, 0), 1);
  assert_int_equal(d.fires, 1);
  assert_int_equal(c.fires, 0);
  assert_int_equal(sh_wheel_count(&h->w), 0);
  harness_free(h);
}

static void test_max_limit(void **state) {
  (void)state;
  enum { N = 10 };
  harness *h = harness_new(0, 2 * N + 1);
  timer same[N] = {0}, later[N] = {0};
  for (size_t i = 0; i < N; i++) {
    add(h, &same[i], 3 * MS);
    add(h, &later[i], 4 * MS + i * MS);
  }
  uint64_t now = 20 * MS;
  assert_int_equal(advance(h, now, 3), 3);
  assert_int_equal(sh_wheel_count(&h->w), 2 * N - 3);
  assert_true(sh_wheel_next_ns(&h->w) <= now);
  assert_int_equal(advance(h, now, 3), 3);
  assert_int_equal(advance(h, now, 3), 3);
  /* Leftover stays due; something added meanwhile for the past comes after. */
  timer past = {0};
  add(h, &past, 1 * MS);
  assert_int_equal(advance(h, now, 5), 5);
  assert_int_equal(advance(h, now, 0), 2 * N + 1 - 14);
  assert_int_equal(sh_wheel_count(&h->w), 0);
  assert_true(sh_wheel_next_ns(&h->w) == UINT64_MAX);
  for (size_t i = 0; i < N; i++) {
    assert_int_equal(same[i].fires, 1);
    assert_int_equal(later[i].fires, 1);
  }
  assert_int_equal(past.fires, 1);
  /* The 3 ms batch went first; the rest kept expiry order across calls. */
  for (size_t i = 0; i < N; i++) assert_int_equal(h->log[i]->expire_ns, 3 * MS);
  assert_ptr_equal(h->log[N], &past);
  for (size_t i = N + 2; i < 2 * N + 1; i++)
    assert_true(h->log[i - 1]->expire_ns <= h->log[i]->expire_ns);
  harness_free(h);
}

/* Random adds, removes, re-adds from fire and jumps against a trivial model:
 * what is due fires, nothing fires early, next_ns bounds the earliest
 * expiry and count matches. */
static void test_random_model(void **state) {
  (void)state;
  enum { N = 500, ROUNDS = 3000 };
  harness *h = harness_new(3 * HOUR, 0);
  timer *ts = calloc(N, sizeof *ts);
  assert_non_null(ts);
  rng_seed(0x1234567);
  uint64_t now = 3 * HOUR;
  for (size_t round = 0; round < ROUNDS; round++) {
    for (size_t k = rng_below(8); k > 0; k--) {
      timer *t = &ts[rng_below(N)];
      if (sh_wheel_linked(&t->link)) {
        sh_wheel_remove(&h->w, &t->link);
        continue;
      }
      uint64_t r = rng_below(10);
      uint64_t delta = r < 6 ? rng_below(100 * MS) : r < 9 ? rng_below(2 * HOUR) : rng_below(30 * HOUR);
      t->period_ns = rng_below(8) == 0 ? 10 * SEC + rng_below(600 * SEC) : 0;
      /* Some in the past. */
      add(h, t, rng_below(16) == 0 && now > delta ? now - delta : now + delta);
    }
    uint64_t linked = 0;
    for (size_t i = 0; i < N; i++) linked += sh_wheel_linked(&ts[i].link);
    assert_int_equal(sh_wheel_count(&h->w), linked);
    uint64_t next = sh_wheel_next_ns(&h->w);
    assert_true(next <= earliest_linked_tick_ns(ts, N));
    assert_true(linked > 0 || next == UINT64_MAX);
    now += rng_below(32) ? rng_below(20 * MS) : rng_below(3 * HOUR);
    advance(h, now, 0);
    /* Only a periodic timer still catching up, re-armed in the past by
     * this very advance, may be left behind, and then it is due. */
    bool due = sh_wheel_next_ns(&h->w) == 0;
    for (size_t i = 0; i < N; i++) {
      const timer *t = &ts[i];
      if (!sh_wheel_linked(&t->link) || tick_up_ns(t->expire_ns) > now) continue;
      assert_true(due && t->period_ns && t->last_fire_ns == now);
    }
    if (!due) assert_true(sh_wheel_next_ns(&h->w) > now);
  }
  free(ts);
  harness_free(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_empty),
      cmocka_unit_test(test_single_not_before_expiry),
      cmocka_unit_test(test_past_expiry_fires_at_next_advance),
      cmocka_unit_test(test_remove_prevents_firing),
      cmocka_unit_test(test_order_tick_by_tick),
      cmocka_unit_test(test_order_random_jumps),
      cmocka_unit_test(test_periodic_readd),
      cmocka_unit_test(test_readd_at_now_is_bounded),
      cmocka_unit_test(test_fire_removes_others),
      cmocka_unit_test(test_max_limit),
      cmocka_unit_test(test_random_model),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
