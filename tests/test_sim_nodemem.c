/*
 * Tests of the tracker of nodes' memory (backend-sim/nodemem.c), through
 * its API, in a program linked with the wraps (as every test_sim_* is):
 *   - blocks allocated under owner 3 (malloc, calloc, realloc, reallocarray,
 *     strdup, strndup, posix_memalign, aligned_alloc) are counted and
 *     released: each sees every block once, with its size, in the order of
 *     allocation, and the block is freed (ASan: poisoned; LSan: no leak);
 *   - owner 0 allocates untracked, and a release leaves those blocks alone;
 *   - realloc moves the tracking to the new block and keeps the block's
 *     owner whichever is set; realloc to 0 and free untrack;
 *   - a block allocated before tracking, or untracked, frees and reallocs
 *     straight through;
 *   - 100,000 blocks grow the table, and frees and a release shrink it back;
 *   - two owners are kept apart; bytes, count and peak; reset zeroes peaks
 *     and frees the table;
 *   - each may allocate and free other tracked memory;
 *   - another pthread neither tracks nor looks up: its blocks and its
 *     frees pass through; setting an owner there, or a reset with live
 *     blocks, is a failed assertion (in forked children).
 * Every test ends with the fixture's teardown: each owner released, owner
 * 0, reset (which asserts that nothing is left).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "nodemem.h"
#include "support/child.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
/* A freed block is poisoned (until ASan's quarantine recycles it, far later). */
#define ASSERT_FREED(p, n) assert_true(__asan_region_is_poisoned((p), (n)) != NULL)
#else
#define ASSERT_FREED(p, n) ((void)(p), (void)(n))
#endif

#define CHILD_WATCHDOG_S 30

/* The compiler may drop a malloc whose block is never used, with its free:
 * every block goes through here, and gets written. */
static void *volatile sink;
static void *use(void *p, size_t n) {
  if (p != NULL && n > 0) memset(p, 0xab, n);
  sink = p;
  return p;
}

static int teardown(void **state) {
  (void)state;
  sh_simnodemem_set_owner(0);
  for (uint32_t o = 1; o < SH_SIMNODEMEM_MAX_OWNERS; o++) sh_simnodemem_release(o, NULL, NULL);
  sh_simnodemem_reset();
  return 0;
}

/* What a release's each saw. */
#define SEEN_MAX 16
typedef struct seen {
  size_t n;
  void *ptr[SEEN_MAX];
  size_t size[SEEN_MAX];
} seen;

static void record(void *ptr, size_t size, void *ctx) {
  seen *s = ctx;
  assert_true(s->n < SEEN_MAX);
  s->ptr[s->n] = ptr;
  s->size[s->n++] = size;
}

/* ---- one owner --------------------------------------------------------------------- */

static void test_available(void **state) {
  (void)state;
  assert_true(sh_simnodemem_available());
  assert_int_equal(sh_simnodemem_owner(), 0);
  sh_simnodemem_set_owner(9);
  assert_int_equal(sh_simnodemem_owner(), 9);
}

static void test_counted_and_released(void **state) {
  (void)state;
  sh_simnodemem_set_owner(3);
  void *a = use(malloc(10), 10);
  void *b = use(calloc(4, 8), 32); /* one block, once: 32 bytes */
  void *c = use(malloc(100), 100);
  sh_simnodemem_set_owner(0);
  assert_int_equal(sh_simnodemem_count(3), 3);
  assert_int_equal(sh_simnodemem_bytes(3), 142);
  assert_int_equal(sh_simnodemem_peak(3), 142);
  assert_int_equal(sh_simnodemem_count(0), 0);
  seen s = {0};
  assert_int_equal(sh_simnodemem_release(3, record, &s), 3);
  assert_int_equal(s.n, 3); /* each block once, in the order of allocation */
  assert_ptr_equal(s.ptr[0], a);
  assert_int_equal(s.size[0], 10);
  assert_ptr_equal(s.ptr[1], b);
  assert_int_equal(s.size[1], 32);
  assert_ptr_equal(s.ptr[2], c);
  assert_int_equal(s.size[2], 100);
  ASSERT_FREED(a, 10);
  ASSERT_FREED(b, 32);
  ASSERT_FREED(c, 100);
  assert_int_equal(sh_simnodemem_count(3), 0);
  assert_int_equal(sh_simnodemem_bytes(3), 0);
  assert_int_equal(sh_simnodemem_peak(3), 142); /* until the reset */
  assert_int_equal(sh_simnodemem_release(3, record, &s), 0);
  assert_int_equal(s.n, 3);
}

static void test_owner0_untouched(void **state) {
  (void)state;
  char *mine = use(malloc(64), 64);
  sh_simnodemem_set_owner(3);
  use(malloc(16), 16);
  sh_simnodemem_set_owner(0);
  char *also = use(malloc(64), 64);
  assert_int_equal(sh_simnodemem_count(3), 1);
  assert_int_equal(sh_simnodemem_release(3, NULL, NULL), 1);
  use(mine, 64); /* still ours: ASan would see a use after free */
  use(also, 64);
  free(mine);
  free(also);
}

static void test_realloc_moves(void **state) {
  (void)state;
  sh_simnodemem_set_owner(3);
  char *p = use(malloc(16), 16);
  char *q = use(realloc(p, 1 << 20), 1 << 20); /* too big to grow in place */
  assert_ptr_not_equal(p, q);
  assert_int_equal(sh_simnodemem_count(3), 1);
  assert_int_equal(sh_simnodemem_bytes(3), 1 << 20);
  /* With owner 0 set, or another owner, the block stays owner 3's. */
  sh_simnodemem_set_owner(0);
  q = use(realloc(q, 50), 50);
  sh_simnodemem_set_owner(5);
  q = use(realloc(q, 60), 60);
  assert_int_equal(sh_simnodemem_count(3), 1);
  assert_int_equal(sh_simnodemem_bytes(3), 60);
  assert_int_equal(sh_simnodemem_count(5), 0);
  /* realloc(NULL) is a malloc; reallocarray is a realloc, or fails. */
  sh_simnodemem_set_owner(3);
  char *r = use(realloc(NULL, 8), 8);
  r = use(reallocarray(r, 4, 10), 40);
  volatile size_t huge = SIZE_MAX / 2; /* volatile: no warning of an object too big */
  errno = 0;
  assert_null(reallocarray(r, huge, 4));
  assert_int_equal(errno, ENOMEM);
  assert_int_equal(sh_simnodemem_count(3), 2);
  assert_int_equal(sh_simnodemem_bytes(3), 100);
  seen s = {0};
  sh_simnodemem_set_owner(0);
  assert_int_equal(sh_simnodemem_release(3, record, &s), 2);
  assert_ptr_equal(s.ptr[0], q); /* the new blocks, their new sizes */
  assert_int_equal(s.size[0], 60);
  assert_ptr_equal(s.ptr[1], r);
  assert_int_equal(s.size[1], 40);
}

/* glibc's realloc(p, 0) frees p and gives NULL (so does ASan's, by default). */
static void test_realloc_zero_untracks(void **state) {
  (void)state;
  sh_simnodemem_set_owner(3);
  void *p = use(malloc(16), 16);
  void *q = realloc(p, 0);
  if (q == NULL) {
    assert_int_equal(sh_simnodemem_count(3), 0);
    assert_int_equal(sh_simnodemem_bytes(3), 0);
  } else {
    assert_int_equal(sh_simnodemem_count(3), 1); /* a C library that keeps a block */
    assert_int_equal(sh_simnodemem_bytes(3), 0);
    free(q);
  }
}

static void test_free_untracks(void **state) {
  (void)state;
  sh_simnodemem_set_owner(3);
  void *p = use(malloc(24), 24);
  void *q = use(malloc(8), 8);
  free(p);
  assert_int_equal(sh_simnodemem_count(3), 1);
  assert_int_equal(sh_simnodemem_bytes(3), 8);
  free(q);
  free(NULL);
  assert_int_equal(sh_simnodemem_count(3), 0);
  assert_int_equal(sh_simnodemem_release(3, NULL, NULL), 0);
  assert_int_equal(sh_simnodemem_peak(3), 32);
}

static void test_strdup(void **state) {
  (void)state;
  sh_simnodemem_set_owner(3);
  char *a = strdup("hello");
  char *b = strndup("hello", 3);
  static const char hi[10] = "hi";
  char *c = strndup(hi, sizeof(hi)); /* a bound past the end of the string */
  sh_simnodemem_set_owner(0);
  assert_string_equal(a, "hello");
  assert_string_equal(b, "hel");
  assert_string_equal(c, "hi");
  assert_int_equal(sh_simnodemem_count(3), 3);
  assert_int_equal(sh_simnodemem_bytes(3), 6 + 4 + 3);
  free(b);
  seen s = {0};
  assert_int_equal(sh_simnodemem_release(3, record, &s), 2);
  assert_ptr_equal(s.ptr[0], a);
  assert_ptr_equal(s.ptr[1], c);
}

static void test_aligned(void **state) {
  (void)state;
  sh_simnodemem_set_owner(3);
  void *p = NULL;
  assert_int_equal(posix_memalign(&p, 64, 100), 0);
  assert_int_equal((uintptr_t)p % 64, 0);
  use(p, 100);
  void *q = use(aligned_alloc(128, 256), 256);
  assert_non_null(q);
  assert_int_equal((uintptr_t)q % 128, 0);
  assert_int_equal(sh_simnodemem_count(3), 2);
  assert_int_equal(sh_simnodemem_bytes(3), 356);
  seen s = {0};
  assert_int_equal(sh_simnodemem_release(3, record, &s), 2);
  assert_ptr_equal(s.ptr[0], p);
  assert_int_equal(s.size[0], 100);
  assert_ptr_equal(s.ptr[1], q);
  assert_int_equal(s.size[1], 256);
  ASSERT_FREED(p, 100);
  ASSERT_FREED(q, 256);
}

/* Blocks the table does not know pass through, with an owner set or not. */
static void test_untracked_pass_through(void **state) {
  (void)state;
  char *before = use(malloc(32), 32);
  char *grown = use(malloc(32), 32);
  sh_simnodemem_set_owner(3);
  use(malloc(8), 8); /* the table is not empty: frees look up */
  free(before);
  grown = use(realloc(grown, 4096), 4096); /* untracked stays untracked */
  assert_int_equal(sh_simnodemem_count(3), 1);
  assert_int_equal(sh_simnodemem_bytes(3), 8);
  sh_simnodemem_set_owner(0);
  free(grown);
  assert_int_equal(sh_simnodemem_count(3), 1);
}

/* ---- the table's size ---------------------------------------------------------------- */

#define MANY 100000

static void test_growth_and_shrink(void **state) {
  (void)state;
  void **p = malloc(MANY * sizeof(*p)); /* owner 0: untracked */
  assert_non_null(p);
  sh_simnodemem_set_owner(3);
  uint64_t bytes = 0;
  for (size_t i = 0; i < MANY; i++) {
    p[i] = use(malloc(1 + i % 32), 1 + i % 32);
    bytes += 1 + i % 32;
  }
  sh_simnodemem_set_owner(0);
  assert_int_equal(sh_simnodemem_count(3), MANY);
  assert_int_equal(sh_simnodemem_bytes(3), bytes);
  uint32_t big = sh_simnodemem_slots();
  assert_true(big >= 2 * MANY && big <= 8 * MANY); /* a power of two, load in (1/8, 1/2] */
  assert_int_equal(big & (big - 1), 0);
  /* Free all but every 100th: the table shrinks, keeping a load of 1/8 to 1/4. */
  for (size_t i = 0; i < MANY; i++)
    if (i % 100 != 0) free(p[i]);
  assert_int_equal(sh_simnodemem_count(3), MANY / 100);
  uint32_t small = sh_simnodemem_slots();
  assert_true(small < big && small >= 4 * (MANY / 100) && small <= 8 * (MANY / 100));
  /* The rest by release: every one seen once. */
  assert_int_equal(sh_simnodemem_release(3, NULL, NULL), MANY / 100);
  assert_int_equal(sh_simnodemem_count(3), 0);
  assert_int_equal(sh_simnodemem_slots(), 64); /* the least */
  sh_simnodemem_reset();
  assert_int_equal(sh_simnodemem_slots(), 0); /* its memory back */
  free(p);
}

/* ---- owners -------------------------------------------------------------------------- */

static void test_two_owners(void **state) {
  (void)state;
  char *a[4], *b[4];
  for (int i = 0; i < 4; i++) {
    sh_simnodemem_set_owner(3);
    a[i] = use(malloc(10), 10);
    sh_simnodemem_set_owner(7);
    b[i] = use(malloc(1000), 1000);
  }
  sh_simnodemem_set_owner(0);
  assert_int_equal(sh_simnodemem_count(3), 4);
  assert_int_equal(sh_simnodemem_bytes(3), 40);
  assert_int_equal(sh_simnodemem_count(7), 4);
  assert_int_equal(sh_simnodemem_bytes(7), 4000);
  seen s = {0};
  assert_int_equal(sh_simnodemem_release(3, record, &s), 4);
  assert_int_equal(s.n, 4);
  for (int i = 0; i < 4; i++) {
    assert_ptr_equal(s.ptr[i], a[i]);
    use(b[i], 1000); /* owner 7's are alive */
  }
  assert_int_equal(sh_simnodemem_count(7), 4);
  assert_int_equal(sh_simnodemem_release(7, NULL, NULL), 4);
  assert_int_equal(sh_simnodemem_count(7), 0);
}

static void test_peak_and_reset(void **state) {
  (void)state;
  sh_simnodemem_set_owner(4);
  void *a = use(malloc(100), 100);
  void *b = use(malloc(200), 200);
  free(b);
  use(malloc(50), 50);
  assert_int_equal(sh_simnodemem_bytes(4), 150);
  assert_int_equal(sh_simnodemem_count(4), 2);
  assert_int_equal(sh_simnodemem_peak(4), 300);
  assert_int_equal(sh_simnodemem_peak(5), 0);
  free(a);
  sh_simnodemem_set_owner(0);
  sh_simnodemem_release(4, NULL, NULL);
  assert_int_equal(sh_simnodemem_peak(4), 300);
  sh_simnodemem_reset();
  assert_int_equal(sh_simnodemem_peak(4), 0);
}

/* each allocates and frees owner 5's blocks while owner 3's are released. */
typedef struct churn {
  void *held;
  int calls;
} churn;

static void churn_each(void *ptr, size_t size, void *ctx) {
  churn *c = ctx;
  (void)ptr;
  (void)size;
  free(c->held);
  c->held = use(malloc(16), 16);
  c->calls++;
}

static void test_each_may_allocate(void **state) {
  (void)state;
  sh_simnodemem_set_owner(3);
  for (int i = 0; i < 200; i++) use(malloc(8), 8);
  sh_simnodemem_set_owner(5);
  churn c = {.held = use(malloc(16), 16)};
  assert_int_equal(sh_simnodemem_release(3, churn_each, &c), 200);
  assert_int_equal(c.calls, 200);
  assert_int_equal(sh_simnodemem_count(3), 0);
  assert_int_equal(sh_simnodemem_count(5), 1);
  free(c.held);
  assert_int_equal(sh_simnodemem_count(5), 0);
}

/* ---- other threads ------------------------------------------------------------------- */

typedef struct other {
  void *from_main; /* freed by the thread */
  void *made;      /* allocated by the thread, freed by main */
  uint32_t owner;  /* the thread's owner */
} other;

static void *other_main(void *arg) {
  other *o = arg;
  o->owner = sh_simnodemem_owner();
  free(o->from_main);
  for (int i = 0; i < 1000; i++) free(use(malloc(32), 32));
  o->made = use(malloc(64), 64);
  return NULL;
}

static void test_other_thread_passes_through(void **state) {
  (void)state;
  other o = {.from_main = use(malloc(48), 48)};
  sh_simnodemem_set_owner(3);
  void *mine = use(malloc(8), 8);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, other_main, &o), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(o.owner, 0);
  assert_int_equal(sh_simnodemem_count(3), 1); /* nothing of the thread's */
  assert_int_equal(sh_simnodemem_bytes(3), 8);
  free(o.made);
  free(mine);
  assert_int_equal(sh_simnodemem_count(3), 0);
}

/* In children: a failed assertion aborts. */
static void *set_owner_main(void *arg) {
  (void)arg;
  sh_simnodemem_set_owner(5);
  return NULL;
}

/* Takes the role, tracks a block, releases it and gives the role back. */
static void *take_role_main(void *arg) {
  sh_simnodemem_set_owner(6);
  use(malloc(8), 8);
  sh_simnodemem_set_owner(0);
  *(uint32_t *)arg = (uint32_t)sh_simnodemem_release(6, NULL, NULL);
  sh_simnodemem_reset();
  return NULL;
}

static void owner_on_other_thread(const void *arg) {
  (void)arg;
  sh_simnodemem_set_owner(3);
  pthread_t t;
  if (pthread_create(&t, NULL, set_owner_main, NULL) != 0) _exit(3);
  pthread_join(t, NULL);
  _exit(0);
}

static void reset_with_live_blocks(const void *arg) {
  (void)arg;
  sh_simnodemem_set_owner(3);
  use(malloc(8), 8);
  sh_simnodemem_set_owner(0);
  sh_simnodemem_reset();
  _exit(0);
}

static void test_misuse_asserts(void **state) {
  (void)state;
  char out[256];
  assert_int_equal(th_in_child(owner_on_other_thread, NULL, CHILD_WATCHDOG_S, out, sizeof(out)),
                   128 + SIGABRT);
  assert_int_equal(th_in_child(reset_with_live_blocks, NULL, CHILD_WATCHDOG_S, out, sizeof(out)),
                   128 + SIGABRT);
  /* After a reset, another thread may take the role (and give it back). */
  sh_simnodemem_set_owner(3);
  sh_simnodemem_set_owner(0);
  sh_simnodemem_reset();
  pthread_t t;
  uint32_t tracked = 0;
  assert_int_equal(pthread_create(&t, NULL, take_role_main, &tracked), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(tracked, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_available, teardown),
      cmocka_unit_test_teardown(test_counted_and_released, teardown),
      cmocka_unit_test_teardown(test_owner0_untouched, teardown),
      cmocka_unit_test_teardown(test_realloc_moves, teardown),
      cmocka_unit_test_teardown(test_realloc_zero_untracks, teardown),
      cmocka_unit_test_teardown(test_free_untracks, teardown),
      cmocka_unit_test_teardown(test_strdup, teardown),
      cmocka_unit_test_teardown(test_aligned, teardown),
      cmocka_unit_test_teardown(test_untracked_pass_through, teardown),
      cmocka_unit_test_teardown(test_growth_and_shrink, teardown),
      cmocka_unit_test_teardown(test_two_owners, teardown),
      cmocka_unit_test_teardown(test_peak_and_reset, teardown),
      cmocka_unit_test_teardown(test_each_may_allocate, teardown),
      cmocka_unit_test_teardown(test_other_thread_passes_through, teardown),
      cmocka_unit_test_teardown(test_misuse_asserts, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
