/*
 * Tests for core/mem/pool.c within one pool's owner: reuse and malloc counts,
 * size classes and alignment, the plain-malloc paths, slab refills and
 * what goes back to malloc, idle trimming and destroy. Frees from other
 * threads and pools are test_pool_remote.c's.
 * Run it under ASan (leaks: destroy must free every free slab; a caller's
 * overflow inside a slab) and under TSan.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mem/pool.h"

#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif

#ifdef TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

#include "pool_counts.h"

static void test_reuse_same_pointer(void **state) {
  (void)state;
  sh_pool p;
  sh_pool_init(&p, 64, 4, 1000);
  void *a = sh_pool_alloc(&p, 100);
  assert_non_null(a);
  sh_pool_free(&p, a);
  void *b = sh_pool_alloc(&p, 100);
  assert_ptr_equal(a, b);
  /* Any size of the same class gets the same object back. */
  sh_pool_free(&p, b);
  void *c = sh_pool_alloc(&p, BODY(1));
  assert_ptr_equal(a, c);
  sh_pool_free(&p, c);
  assert_int_equal(p.mallocs, 1);
  assert_int_equal(p.allocs, 3);
  assert_int_equal(p.local_frees, 3);
  assert_int_equal(sh_pool_outstanding(&p), 0);
  sh_pool_destroy(&p);
}

static void test_steady_state_one_malloc_per_class(void **state) {
  (void)state;
  sh_pool p;
  sh_pool_init(&p, 64, 4, 1000);
  for (int i = 0; i < 10000; i++) {
    for (int cls = 0; cls < SH_POOL_CLASSES; cls++) {
      void *o = sh_pool_alloc(&p, BODY(cls));
      assert_non_null(o);
      memset(o, 0xab, BODY(cls)); /* ASan: the whole body is ours */
      sh_pool_free(&p, o);
    }
  }
  assert_int_equal(p.mallocs, SH_POOL_CLASSES);
  assert_int_equal(p.allocs, 10000 * SH_POOL_CLASSES);
  assert_int_equal(sh_pool_outstanding(&p), 0);
  for (int cls = 0; cls < SH_POOL_CLASSES; cls++) assert_int_equal(cached(&p, cls), per_slab(cls));
  sh_pool_destroy(&p);
}

/* Each size lands in the smallest class that holds it plus the header. */
static void test_class_boundaries(void **state) {
  (void)state;
  sh_pool p;
  sh_pool_init(&p, 64, 4, 1000);
  for (int cls = 0; cls < SH_POOL_CLASSES; cls++) {
    size_t sizes[2] = {BODY(cls), cls == 0 ? 0 : BODY(cls - 1) + 1};
    for (int k = 0; k < 2; k++) {
      void *o = sh_pool_alloc(&p, sizes[k]);
      assert_non_null(o);
      sh_pool_free(&p, o);
      assert_int_equal(cached(&p, cls), per_slab(cls));
    }
  }
  assert_int_equal(p.mallocs, SH_POOL_CLASSES);
  sh_pool_destroy(&p);
}

static void test_alignment(void **state) {
  (void)state;
  sh_pool p;
  sh_pool_init(&p, 64, 4, 1000);
  size_t sizes[] = {0, 1, 7, 16, 17, 48, 49, 100, 1000, 4000, BODY(7), BODY(7) + 1, 100000};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    void *a = sh_pool_alloc(&p, sizes[i]);
    void *b = sh_pool_alloc(NULL, sizes[i]);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal((uintptr_t)a % 16, 0);
    assert_int_equal((uintptr_t)b % 16, 0);
    memset(a, 1, sizes[i]);
    memset(b, 2, sizes[i]);
    sh_pool_free(&p, a);
    sh_pool_free(&p, b);
  }
  assert_int_equal(sh_pool_outstanding(&p), 0);
  sh_pool_destroy(&p);
}

/* A NULL pool is plain malloc: any caller frees it with free(), no counter moves. */
static void test_null_pool(void **state) {
  (void)state;
  sh_pool p;
  sh_pool_init(&p, 64, 4, 1000);
  void *a = sh_pool_alloc(NULL, 100);
  void *b = sh_pool_alloc(NULL, 100);
  void *c = sh_pool_alloc(NULL, 0);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(c);
  sh_pool_free(NULL, a);
  sh_pool_free(&p, b); /* a worker freeing a non-worker's object */
  sh_pool_free(NULL, c);
  sh_pool_free(NULL, NULL);
  sh_pool_free(&p, NULL);
  assert_int_equal(p.allocs, 0);
  assert_int_equal(p.mallocs, 0);
  assert_int_equal(p.local_frees, 0);
  assert_int_equal(atomic_load(&p.remote_frees), 0);
  for (int cls = 0; cls < SH_POOL_CLASSES; cls++) assert_int_equal(cached(&p, cls), 0);
  sh_pool_destroy(&p);
}

/* Objects over SH_POOL_MAX_SIZE (with header) bypass the pool entirely. */
static void test_large_object(void **state) {
  (void)state;
  sh_pool p, other;
  sh_pool_init(&p, 64, 4, 1000);
  sh_pool_init(&other, 64, 4, 1000);
  size_t sizes[] = {BODY(7) + 1, SH_POOL_MAX_SIZE, 1u << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    void *o = sh_pool_alloc(&p, sizes[i]);
    assert_non_null(o);
    memset(o, 0xcd, sizes[i]);
    sh_pool_free(i == 1 ? &other : &p, o);
  }
  assert_null(sh_pool_alloc(&p, SIZE_MAX - 8)); /* would overflow the header */
  assert_int_equal(p.allocs, 0);
  assert_int_equal(p.mallocs, 0);
  assert_int_equal(sh_pool_outstanding(&p), 0);
  assert_int_equal(sh_pool_outstanding(&other), 0);
  for (int cls = 0; cls < SH_POOL_CLASSES; cls++) assert_int_equal(cached(&p, cls), 0);
  sh_pool_destroy(&p);
  sh_pool_destroy(&other);
}

/*
 * Past the cache a class grows by whole slabs: N allocations cost N / slab
 * mallocs, not N. As they come back, a slab whose objects are all free goes
 * back to malloc once the class holds max_cached other free objects.
 */
static void test_slab_refill(void **state) {
  (void)state;
  enum { MAX = 8 };
  const int n = (int)(3 * per_slab(1) + 5);
  sh_pool p;
  sh_pool_init(&p, MAX, 2, 1000);
  void **objs = calloc((size_t)n, sizeof *objs);
  assert_non_null(objs);
  for (int i = 0; i < n; i++) assert_non_null(objs[i] = sh_pool_alloc(&p, 100));
  assert_int_equal(p.mallocs, 4);
  assert_int_equal(cached(&p, 1), 4 * per_slab(1) - (uint64_t)n);
  for (int i = 0; i < n; i++) sh_pool_free(&p, objs[i]);
  /* The first slab to empty stays (the class had no other free object), the
   * next ones go: one slab is left. */
  assert_int_equal(slabs(&p), 1);
  assert_int_equal(cached(&p, 1), per_slab(1));
  assert_int_equal(sh_pool_outstanding(&p), 0);
  /* Growing again costs slabs again, not objects. */
  for (int i = 0; i < n; i++) objs[i] = sh_pool_alloc(&p, 100);
  assert_int_equal(p.mallocs, 4 + 3);
  assert_int_equal(sh_pool_outstanding(&p), (uint64_t)n);
  for (int i = 0; i < n; i++) sh_pool_free(&p, objs[i]);
  sh_pool_destroy(&p);
  assert_int_equal(slabs(&p), 0);
  free(objs);
}

/* ---- trimming ---- */

static void fill(sh_pool *p, size_t size, int n) {
  void *objs[64];
  assert_true(n <= 64);
  for (int i = 0; i < n; i++) objs[i] = sh_pool_alloc(p, size);
  for (int i = 0; i < n; i++) sh_pool_free(p, objs[i]);
}

static void test_trim_idle_classes(void **state) {
  (void)state;
  sh_pool p;
  sh_pool_init(&p, 64, 2, 100);
  fill(&p, 40, 10);  /* class 0 */
  fill(&p, 100, 10); /* class 1 */
  assert_int_equal(cached(&p, 0), per_slab(0));
  assert_int_equal(cached(&p, 1), per_slab(1));

  /* Both were used since the last trim: their idle time starts now, and the
   * trim says when to come back (a sleeping owner wakes up for it). */
  assert_int_equal(sh_pool_trim(&p, 1000), 1100);
  assert_int_equal(sh_pool_trim(&p, 1099), 1100);
  assert_int_equal(slabs(&p), 2);

  /* Class 1 used again; class 0 has now been idle for idle_ns: its free
   * slab goes back to malloc. */
  sh_pool_free(&p, sh_pool_alloc(&p, 100));
  assert_int_equal(sh_pool_trim(&p, 1100), 1200);
  assert_int_equal(cached(&p, 0), 0);
  assert_int_equal(cached(&p, 1), per_slab(1));
  assert_int_equal(sh_pool_trim(&p, 1199), 1200);
  assert_int_equal(cached(&p, 1), per_slab(1));
  /* Everything trimmed: nothing left to wake up for. */
  assert_int_equal(sh_pool_trim(&p, 1200), UINT64_MAX);
  assert_int_equal(cached(&p, 1), 0);
  assert_int_equal(slabs(&p), 0);

  /* The slabs really went back to malloc. */
  uint64_t before = p.mallocs;
  fill(&p, 40, 10);
  assert_int_equal(p.mallocs, before + 1);
  assert_int_equal(sh_pool_outstanding(&p), 0);
  sh_pool_destroy(&p);
}

/* A slab that still holds a live object stays, and a trim that can give
 * nothing back does not ask its owner to wake up for it again. */
static void test_trim_keeps_live_slabs(void **state) {
  (void)state;
  sh_pool p;
  sh_pool_init(&p, 64, 2, 100);
  void *live = sh_pool_alloc(&p, 40);
  fill(&p, 40, 10);
  assert_int_equal(sh_pool_trim(&p, 1000), UINT64_MAX);
  assert_int_equal(sh_pool_trim(&p, 2000), UINT64_MAX);
  assert_int_equal(slabs(&p), 1);
  assert_int_equal(cached(&p, 0), per_slab(0) - 1);
  sh_pool_free(&p, live);
  /* Now free, but freed by the owner, which is use: idle time starts again. */
  assert_int_equal(sh_pool_trim(&p, 3000), 3100);
  assert_int_equal(sh_pool_trim(&p, 3100), UINT64_MAX);
  assert_int_equal(slabs(&p), 0);
  sh_pool_destroy(&p);
}

static void test_trim_drains_remote(void **state) {
  (void)state;
  sh_pool p;
  sh_pool_init(&p, 64, 2, 100);
  void *objs[10];
  for (int i = 0; i < 10; i++) objs[i] = sh_pool_alloc(&p, 40);
  for (int i = 0; i < 10; i++) sh_pool_free(NULL, objs[i]);
  assert_false(remote_empty(&p, 0));
  assert_int_equal(cached(&p, 0), per_slab(0) - 10);
  sh_pool_trim(&p, 1000); /* class used since the last trim: drained, not trimmed */
  assert_true(remote_empty(&p, 0));
  assert_int_equal(cached(&p, 0), per_slab(0));
  /* Returns from other threads are not use: the class goes idle. */
  for (int i = 0; i < 10; i++) objs[i] = sh_pool_alloc(&p, 40);
  sh_pool_trim(&p, 2000);
  for (int i = 0; i < 10; i++) sh_pool_free(NULL, objs[i]);
  sh_pool_trim(&p, 2100);
  assert_int_equal(cached(&p, 0), 0);
  assert_int_equal(slabs(&p), 0);
  assert_true(remote_empty(&p, 0));
  assert_int_equal(sh_pool_outstanding(&p), 0);
  sh_pool_destroy(&p);
}

/* Objects side by side in a slab: ASan still sees a caller's overflow past
 * the size it asked for and a use after free (skipped without ASan). */
static void test_asan_sees_into_slabs(void **state) {
  (void)state;
#ifdef TEST_ASAN
  sh_pool p;
  sh_pool_init(&p, 64, 2, 100);
  char *a = sh_pool_alloc(&p, 40); /* class 0: a 48-byte body */
  char *b = sh_pool_alloc(&p, 40);
  assert_null(__asan_region_is_poisoned(a, 40));
  assert_true(__asan_address_is_poisoned(a + 40));
  sh_pool_free(&p, a);
  assert_true(__asan_address_is_poisoned(a + 8)); /* past the free-list link */
  a = sh_pool_alloc(&p, BODY(0));                 /* the same object, all of it */
  assert_null(__asan_region_is_poisoned(a, BODY(0)));
  sh_pool_free(&p, a);
  sh_pool_free(&p, b);
  sh_pool_destroy(&p);
#else
  skip();
#endif
}

/* ---- destroy ---- */

static void test_destroy_frees_everything(void **state) {
  (void)state;
  sh_pool p;
  sh_pool_init(&p, 64, 2, 100);
  void *objs[SH_POOL_CLASSES][6];
  for (int cls = 0; cls < SH_POOL_CLASSES; cls++)
    for (int i = 0; i < 6; i++) objs[cls][i] = sh_pool_alloc(&p, BODY(cls));
  /* Half come back locally, half remotely; one stays outstanding. */
  for (int cls = 0; cls < SH_POOL_CLASSES; cls++)
    for (int i = 0; i < 6; i++)
      if (cls != 3 || i != 0) sh_pool_free(i % 2 ? NULL : &p, objs[cls][i]);
  assert_int_equal(sh_pool_outstanding(&p), 1);
  sh_pool_destroy(&p);
  /* Only the slab of the outstanding object is left. */
  assert_int_equal(slabs(&p), 1);
  for (int cls = 0; cls < SH_POOL_CLASSES; cls++) {
    assert_int_equal(cached(&p, cls), cls == 3 ? per_slab(3) - 1 : 0);
    if (cls != 3) assert_null(p.cls[cls].partial);
    assert_true(remote_empty(&p, cls));
  }
  /* Outstanding objects survive destroy and are still counted... */
  assert_int_equal(sh_pool_outstanding(&p), 1);
  memset(objs[3][0], 0, BODY(3));
  /* ...and a late free followed by another destroy leaves nothing (ASan). */
  sh_pool_free(&p, objs[3][0]);
  assert_int_equal(sh_pool_outstanding(&p), 0);
  sh_pool_destroy(&p);
  assert_int_equal(cached(&p, 3), 0);
  assert_int_equal(slabs(&p), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reuse_same_pointer),
      cmocka_unit_test(test_steady_state_one_malloc_per_class),
      cmocka_unit_test(test_class_boundaries),
      cmocka_unit_test(test_alignment),
      cmocka_unit_test(test_null_pool),
      cmocka_unit_test(test_large_object),
      cmocka_unit_test(test_slab_refill),
      cmocka_unit_test(test_trim_idle_classes),
      cmocka_unit_test(test_trim_keeps_live_slabs),
      cmocka_unit_test(test_trim_drains_remote),
      cmocka_unit_test(test_asan_sees_into_slabs),
      cmocka_unit_test(test_destroy_frees_everything),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
