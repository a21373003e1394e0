/*
 * Tests for the futures table (core/actor/futtable.c), the per-actor table
 * ask id -> future: push and pop by id, unknown ids, an exact count and
 * growth (the regression for known bug 1 of the original design: its count
 * never went up, so the table never grew and "no pending future" was
 * wrong), every future still found after growing, shrinking after mass
 * removal (never below the initial size, with hysteresis: a count hovering
 * at a size boundary does not resize back and forth), and pop_any draining
 * in an order that depends on the ids only, never on future addresses.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>

#include "actor/futtable.h"
#include "actor/future.h"
#include "support/harness.h"

/* n zeroed futures with ids first, first + 1, ... */
static sh_future *futures_new(size_t n, uint64_t first) {
  sh_future *fs = calloc(n, sizeof(*fs));
  assert_non_null(fs);
  for (size_t i = 0; i < n; i++) fs[i].node.id = first + i;
  return fs;
}

static void table_init(sh_futtable *d, uint32_t initial) {
  sh_futtable_init(d, initial);
  assert_int_equal(sh_futtable_count(d), 0);
  assert_int_equal(sh_futtable_capacity(d), initial);
  /* Nothing allocated yet, and nothing found; then the buckets. */
  assert_null(d->buckets);
  assert_null(sh_futtable_find(d, 1));
  assert_null(sh_futtable_pop(d, 1));
  assert_null(sh_futtable_pop_any(d));
  assert_int_equal(sh_futtable_reserve(d), 0);
  assert_non_null(d->buckets);
  assert_int_equal(sh_futtable_capacity(d), initial);
}

/* Push that checks the count goes up by exactly one and the load stays
 * bounded, which holds only if the table grows. */
static void push(sh_futtable *d, sh_future *f) {
  uint32_t before = sh_futtable_count(d);
  sh_futtable_push(d, &f->node);
  assert_int_equal(sh_futtable_count(d), before + 1);
  assert_true(sh_futtable_count(d) < sh_futtable_capacity(d) * SH_FUTTABLE_LOAD);
}

/* Pop by id that checks it is f and the count goes down by exactly one. */
static void expect_pop(sh_futtable *d, sh_future *f) {
  uint32_t before = sh_futtable_count(d);
  assert_ptr_equal(sh_futtable_pop(d, f->node.id), &f->node);
  assert_null(f->node.hnext); /* unlinked */
  assert_int_equal(sh_futtable_count(d), before - 1);
  assert_true(sh_futtable_capacity(d) >= d->initial);
}

static void expect_unknown(sh_futtable *d, uint64_t id) {
  uint32_t count = sh_futtable_count(d), cap = sh_futtable_capacity(d);
  assert_null(sh_futtable_pop(d, id));
  assert_int_equal(sh_futtable_count(d), count);
  assert_int_equal(sh_futtable_capacity(d), cap);
}

static void test_push_pop_by_id(void **state) {
  (void)state;
  sh_futtable d;
  table_init(&d, SH_FUTTABLE_INITIAL);
  sh_future *fs = futures_new(5, 1);
  for (size_t i = 0; i < 5; i++) push(&d, &fs[i]);
  /* Out of push order: the key decides, not the position. */
  size_t order[] = {2, 0, 4, 1, 3};
  for (size_t k = 0; k < 5; k++) {
    expect_pop(&d, &fs[order[k]]);
    expect_unknown(&d, fs[order[k]].node.id); /* gone once popped */
  }
  assert_int_equal(sh_futtable_count(&d), 0);
  /* A popped future can be pushed again (a new ask reusing pooled memory). */
  fs[0].node.id = 77;
  push(&d, &fs[0]);
  expect_pop(&d, &fs[0]);
  sh_futtable_destroy(&d);
  free(fs);
}

static void test_pop_unknown_id(void **state) {
  (void)state;
  sh_futtable d;
  table_init(&d, SH_FUTTABLE_INITIAL);
  expect_unknown(&d, 0);
  expect_unknown(&d, 1);
  sh_future *fs = futures_new(3, 5);
  for (size_t i = 0; i < 3; i++) push(&d, &fs[i]);
  /* Ids sharing a bucket with a pending one walk a chain and still miss. */
  uint64_t cap = sh_futtable_capacity(&d);
  uint64_t misses[] = {4, 8, 5 + cap, 6 + 3 * cap, UINT64_MAX, 5 + ((uint64_t)1 << 40)};
  for (size_t k = 0; k < sizeof(misses) / sizeof(misses[0]); k++) expect_unknown(&d, misses[k]);
  for (size_t i = 0; i < 3; i++) expect_pop(&d, &fs[i]);
  sh_futtable_destroy(&d);
  free(fs);
}

/* Known bug 1: the count must follow every push and pop, and the table must
 * grow past its initial size when many futures are pending. */
static void test_count_exact_and_table_grows(void **state) {
  (void)state;
  enum { N = 1000 };
  sh_futtable d;
  table_init(&d, SH_FUTTABLE_INITIAL);
  sh_future *fs = futures_new(N, 1);
  for (uint32_t i = 0; i < N; i++) {
    push(&d, &fs[i]);
    assert_int_equal(sh_futtable_count(&d), i + 1);
  }
  assert_true(sh_futtable_capacity(&d) > SH_FUTTABLE_INITIAL);
  assert_true(sh_futtable_capacity(&d) * SH_FUTTABLE_LOAD > N);
  for (uint32_t i = 0; i < N; i += 2) expect_pop(&d, &fs[i]);
  assert_int_equal(sh_futtable_count(&d), N / 2);
  for (uint32_t i = 1; i < N; i += 2) expect_pop(&d, &fs[i]);
  assert_int_equal(sh_futtable_count(&d), 0);
  sh_futtable_destroy(&d);
  free(fs);
}

/* Ids that are sequential, strided by powers of two (all in one bucket of
 * every small table) and random 64-bit: every one found after many grows. */
static void fill_mixed_ids(sh_future *fs, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    switch (i % 3) {
    case 0: fs[i].node.id = i; break;
    case 1: fs[i].node.id = ((uint64_t)i << 20) | 1; break;
    default: /* the top bit set: disjoint from the others */
      fs[i].node.id = th_xorshift(&seed) | ((uint64_t)1 << 63);
      break;
    }
  }
}

static void shuffle(size_t *v, size_t n, uint64_t seed) {
  for (size_t i = n - 1; i > 0; i--) {
    size_t j = (size_t)(th_xorshift(&seed) % (i + 1));
    size_t t = v[i];
    v[i] = v[j];
    v[j] = t;
  }
}

static void test_growth_keeps_every_future(void **state) {
  (void)state;
  enum { N = 6000 };
  sh_futtable d;
  table_init(&d, SH_FUTTABLE_INITIAL);
  sh_future *fs = futures_new(N, 0);
  fill_mixed_ids(fs, N, 0x5eed0004);
  for (size_t i = 0; i < N; i++) {
    push(&d, &fs[i]);
    /* Every grow so far kept the earlier futures: spot-check a few. */
    if ((i & (i + 1)) == 0) {
      for (size_t k = 0; k <= i; k += 1 + i / 8) {
        expect_pop(&d, &fs[k]);
        push(&d, &fs[k]);
      }
    }
  }
  size_t *order = malloc(N * sizeof(*order));
  assert_non_null(order);
  for (size_t i = 0; i < N; i++) order[i] = i;
  shuffle(order, N, 0x5eed0005);
  for (size_t k = 0; k < N; k++) expect_pop(&d, &fs[order[k]]);
  assert_int_equal(sh_futtable_count(&d), 0);
  sh_futtable_destroy(&d);
  free(order);
  free(fs);
}

/* Pops and re-pushes f (or pushes and re-pops it) many times: a count moving
 * by one around a size boundary must not resize the table either way. */
static void expect_stable_around(sh_futtable *d, sh_future *f, bool pushed) {
  uint32_t cap = sh_futtable_capacity(d);
  for (int k = 0; k < 100; k++) {
    if (pushed) {
      expect_pop(d, f);
      assert_int_equal(sh_futtable_capacity(d), cap);
      push(d, f);
    } else {
      push(d, f);
      assert_int_equal(sh_futtable_capacity(d), cap);
      expect_pop(d, f);
    }
    assert_int_equal(sh_futtable_capacity(d), cap);
  }
}

/* Grows to N, then removes everything: the capacity comes back down to at
 * most twice the initial size, never below it; every resize, up or down,
 * is followed by a stable one-future oscillation. */
static void check_shrink(uint32_t initial, uint32_t n, bool by_pop_any) {
  sh_futtable d;
  table_init(&d, initial);
  sh_future *fs = futures_new(n, 1000);
  uint32_t grows = 0, shrinks = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t cap = sh_futtable_capacity(&d);
    push(&d, &fs[i]);
    if (sh_futtable_capacity(&d) != cap) {
      assert_true(sh_futtable_capacity(&d) > cap);
      grows++;
      expect_stable_around(&d, &fs[i], true);
    }
  }
  assert_true(grows > 0);
  uint32_t peak = sh_futtable_capacity(&d);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t cap = sh_futtable_capacity(&d);
    sh_future *f = &fs[i];
    if (by_pop_any) {
      f = sh_future_of_node(sh_futtable_pop_any(&d));
      assert_non_null(f);
    } else {
      expect_pop(&d, f);
    }
    assert_int_equal(sh_futtable_count(&d), n - i - 1);
    assert_true(sh_futtable_capacity(&d) >= initial);
    if (sh_futtable_capacity(&d) != cap) {
      assert_true(sh_futtable_capacity(&d) < cap);
      shrinks++;
      expect_stable_around(&d, f, false);
    }
  }
  assert_null(sh_futtable_pop_any(&d));
  assert_true(shrinks > 0);
  assert_true(sh_futtable_capacity(&d) < peak);
  assert_true(sh_futtable_capacity(&d) >= initial);
  assert_true(sh_futtable_capacity(&d) <= 2 * initial);
  sh_futtable_destroy(&d);
  free(fs);
}

static void test_shrink_after_mass_removal(void **state) {
  (void)state;
  check_shrink(SH_FUTTABLE_INITIAL, 5000, false);
  check_shrink(1, 300, false);
  check_shrink(64, 3000, false);
}

static void test_shrink_while_draining_with_pop_any(void **state) {
  (void)state;
  check_shrink(SH_FUTTABLE_INITIAL, 5000, true);
}

/* Moves the count randomly within [lo, hi] (pushing fs[n], popping
 * fs[n - 1]) and checks the capacity never changes. */
static void wander(sh_futtable *d, sh_future *fs, uint32_t *n, uint32_t lo, uint32_t hi, uint64_t seed) {
  uint32_t cap = sh_futtable_capacity(d);
  for (int step = 0; step < 2000; step++) {
    if (th_xorshift(&seed) % 2 == 0 ? *n < hi : *n <= lo) {
      push(d, &fs[(*n)++]);
    } else {
      expect_pop(d, &fs[--*n]);
    }
    assert_int_equal(sh_futtable_capacity(d), cap);
    assert_int_equal(sh_futtable_count(d), *n);
  }
}

/* A count hovering a few futures either side of a grow point, and of a
 * shrink point, keeps one capacity: a longer, mixed walk than a single
 * push/pop. */
static void test_hysteresis_random_walk_at_boundaries(void **state) {
  (void)state;
  enum { N = 4096 };
  sh_futtable d;
  table_init(&d, SH_FUTTABLE_INITIAL);
  sh_future *fs = futures_new(N, 0);
  uint32_t n = 0;
  /* Just grown to 256 buckets: the count sits at the grow point. */
  while (sh_futtable_capacity(&d) < 256) push(&d, &fs[n++]);
  wander(&d, fs, &n, n - 3, n + 3, 0x5eed0006);
  /* Just shrunk, on the way down from a large table. */
  while (n < N) push(&d, &fs[n++]);
  uint32_t cap = sh_futtable_capacity(&d);
  while (n > 0 && sh_futtable_capacity(&d) == cap) expect_pop(&d, &fs[--n]);
  assert_true(sh_futtable_capacity(&d) < cap);
  wander(&d, fs, &n, n - 3, n + 3, 0x5eed0007);
  while (n > 0) expect_pop(&d, &fs[--n]);
  sh_futtable_destroy(&d);
  free(fs);
}

/* ------------------------------------------------------------ pop_any --- */

#define ANY_N 700

/* The same operations on futures at different addresses. `scattered`
 * allocates each future on its own, in reverse order, with allocations of
 * varying sizes in between, so the addresses relate to the ids differently
 * from one contiguous array. Writes the pop_any order of the ids to out. */
static void run_pop_any(bool scattered, uint64_t *out) {
  static sh_future *fs[ANY_N];
  static void *pad[ANY_N];
  sh_future *block = NULL;
  if (scattered) {
    for (size_t i = ANY_N; i-- > 0;) {
      pad[i] = malloc(16 + (i * 37) % 500);
      fs[i] = calloc(1, sizeof(sh_future));
      assert_non_null(pad[i]);
      assert_non_null(fs[i]);
    }
  } else {
    block = calloc(ANY_N, sizeof(*block));
    assert_non_null(block);
    for (size_t i = 0; i < ANY_N; i++) fs[i] = &block[i];
  }
  /* Collisions, sequential and random ids, pushed in one fixed order, with
   * some popped along the way so the table both grows and shrinks first. */
  uint64_t seed = 0x5eed0008;
  for (size_t i = 0; i < ANY_N; i++) {
    fs[i]->node.id = i % 2 ? i * 64 : th_xorshift(&seed);
  }
  sh_futtable d;
  table_init(&d, SH_FUTTABLE_INITIAL);
  for (size_t i = 0; i < ANY_N; i++) push(&d, fs[i]);
  for (size_t i = 0; i < ANY_N; i += 3) expect_pop(&d, fs[i]);
  for (size_t i = 0; i < ANY_N; i += 3) push(&d, fs[i]);

  for (size_t k = 0; k < ANY_N; k++) {
    sh_ftnode *n = sh_futtable_pop_any(&d);
    assert_non_null(n);
    sh_future *f = sh_future_of_node(n);
    assert_int_equal(sh_futtable_count(&d), ANY_N - k - 1);
    out[k] = f->node.id;
  }
  assert_null(sh_futtable_pop_any(&d));
  sh_futtable_destroy(&d);
  if (scattered) {
    for (size_t i = 0; i < ANY_N; i++) {
      free(fs[i]);
      free(pad[i]);
    }
  }
  free(block);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static void test_pop_any_order_independent_of_addresses(void **state) {
  (void)state;
  static uint64_t a[ANY_N], b[ANY_N];
  run_pop_any(false, a);
  run_pop_any(true, b);
  for (size_t k = 0; k < ANY_N; k++) assert_int_equal(a[k], b[k]);
  /* And it drained every future exactly once. */
  qsort(a, ANY_N, sizeof(a[0]), cmp_u64);
  for (size_t k = 1; k < ANY_N; k++) assert_true(a[k - 1] < a[k]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_push_pop_by_id),
      cmocka_unit_test(test_pop_unknown_id),
      cmocka_unit_test(test_count_exact_and_table_grows),
      cmocka_unit_test(test_growth_keeps_every_future),
      cmocka_unit_test(test_shrink_after_mass_removal),
      cmocka_unit_test(test_shrink_while_draining_with_pop_any),
      cmocka_unit_test(test_hysteresis_random_walk_at_boundaries),
      cmocka_unit_test(test_pop_any_order_independent_of_addresses),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
