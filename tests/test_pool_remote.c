/*
 * Tests for core/mem/pool.c across pools and threads: frees by another pool or
 * a plain thread go back to the owner's remote stack (in batches from a
 * worker's outbox) and are reused without malloc; a flood's memory comes
 * back; the cross-worker steady state mallocs nothing; real threads free
 * into an owner's pool while it allocates. Run it under ASan and under
 * TSan (the concurrent tests).
 *
 * Threads never call cmocka asserts (they longjmp): they record what they saw
 * and the main thread checks it after the join.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mem/pool.h"

#include "pool_counts.h"

/*
 * Frees by a foreign pool or a non-worker (self NULL) go to the owner's remote
 * stack, never into the freeing pool, and the owner takes them back when its
 * slabs run out, without malloc.
 */
static void test_remote_frees_come_back(void **state) {
  (void)state;
  const int n = (int)per_slab(1);
  sh_pool p, other;
  sh_pool_init(&p, 8, 2, 1000);
  sh_pool_init(&other, 8, 2, 1000);
  void **objs = calloc((size_t)n, sizeof *objs);
  assert_non_null(objs);
  for (int i = 0; i < n; i++) objs[i] = sh_pool_alloc(&p, 100);
  assert_int_equal(cached(&p, 1), 0);
  for (int i = 0; i < n; i++) sh_pool_free(i % 2 ? &other : NULL, objs[i]);
  /* A worker's frees wait in its outbox until a batch is full or flushed. */
  assert_int_equal(sh_pool_in_outboxes(&other), (n / 2) % SH_POOL_OUTBOX);
  sh_pool_flush(&other);
  assert_int_equal(sh_pool_in_outboxes(&other), 0);
  assert_false(remote_empty(&p, 1));
  assert_int_equal(cached(&p, 1), 0);
  assert_int_equal(atomic_load(&p.remote_frees), n);
  assert_int_equal(p.local_frees, 0);
  assert_int_equal(sh_pool_outstanding(&p), 0);
  assert_int_equal(other.allocs + other.mallocs + other.local_frees, 0);
  assert_int_equal(atomic_load(&other.remote_frees), 0);
  for (int cls = 0; cls < SH_POOL_CLASSES; cls++) assert_int_equal(cached(&other, cls), 0);

  /* The owner takes the whole stack when its slab is used up. */
  for (int i = 0; i < n; i++) objs[i] = sh_pool_alloc(&p, 100);
  assert_int_equal(p.mallocs, 1);
  assert_true(remote_empty(&p, 1));
  for (int i = 0; i < n; i++) sh_pool_free(&p, objs[i]);
  assert_int_equal(sh_pool_outstanding(&p), 0);
  sh_pool_destroy(&p);
  sh_pool_destroy(&other);
  free(objs);
}

/* A worker's foreign frees go back in batches: a full outbox or a change of
 * owner sends them, nothing sits in a foreign pool. */
static void test_outbox_batches(void **state) {
  (void)state;
  enum { N = SH_POOL_OUTBOX + 5 };
  sh_pool a, b, w;
  sh_pool_init(&a, 4096, 2, 1000);
  sh_pool_init(&b, 4096, 2, 1000);
  sh_pool_init(&w, 4096, 2, 1000);
  void *fa[N], *fb[2];
  for (int i = 0; i < N; i++) fa[i] = sh_pool_alloc(&a, 100);
  for (int i = 0; i < 2; i++) fb[i] = sh_pool_alloc(&b, 100);
  for (int i = 0; i < SH_POOL_OUTBOX - 1; i++) sh_pool_free(&w, fa[i]);
  assert_true(remote_empty(&a, 1)); /* held back */
  sh_pool_free(&w, fa[SH_POOL_OUTBOX - 1]);
  assert_int_equal(atomic_load(&a.remote_frees), SH_POOL_OUTBOX); /* a full batch went */
  assert_int_equal(sh_pool_in_outboxes(&w), 0);
  for (int i = SH_POOL_OUTBOX; i < N; i++) sh_pool_free(&w, fa[i]);
  sh_pool_free(&w, fb[0]); /* another owner: a's partial batch goes first */
  assert_int_equal(atomic_load(&a.remote_frees), N);
  assert_int_equal(sh_pool_in_outboxes(&w), 1);
  sh_pool_free(&w, fb[1]);
  assert_true(remote_empty(&b, 1));
  sh_pool_trim(&w, 0); /* trimming (an idle worker) flushes */
  assert_int_equal(atomic_load(&b.remote_frees), 2);
  assert_int_equal(sh_pool_outstanding(&a), 0);
  assert_int_equal(sh_pool_outstanding(&b), 0);
  /* Nothing entered the freeing pool, and the owners reuse without malloc. */
  assert_int_equal(w.allocs + w.mallocs + w.local_frees, 0);
  uint64_t before = a.mallocs;
  for (int i = 0; i < N; i++) fa[i] = sh_pool_alloc(&a, 100);
  assert_int_equal(a.mallocs, before);
  for (int i = 0; i < N; i++) sh_pool_free(&a, fa[i]);
  sh_pool_destroy(&w);
  sh_pool_destroy(&a);
  sh_pool_destroy(&b);
}

/*
 * A flood's objects coming back through the remote stack give their slabs
 * back as the owner takes them, down to max_cached free objects (plus the
 * slab that reached it); an idle trim then gives back the rest.
 */
static void test_flood_memory_bounded(void **state) {
  (void)state;
  enum { MAX = 64, SLABS = 20 };
  const int n = (int)(SLABS * per_slab(0));
  sh_pool p, w;
  sh_pool_init(&p, MAX, 2, 100);
  sh_pool_init(&w, MAX, 2, 100);
  void **objs = calloc((size_t)n, sizeof *objs);
  assert_non_null(objs);
  for (int i = 0; i < n; i++) assert_non_null(objs[i] = sh_pool_alloc(&p, 40));
  assert_int_equal(p.mallocs, SLABS);
  for (int i = 0; i < n; i++) sh_pool_free(&w, objs[i]); /* another worker */
  sh_pool_flush(&w);
  sh_pool_trim(&p, 1000); /* the class was used: taken back, not trimmed */
  assert_int_equal(sh_pool_outstanding(&p), 0);
  assert_true(remote_empty(&p, 0));
  assert_int_equal(slabs(&p), 1);
  /* Idle for idle_ns: the last free slab goes too, and nothing is left to
   * wake up for. */
  assert_int_equal(sh_pool_trim(&p, 1100), UINT64_MAX);
  assert_int_equal(slabs(&p), 0);
  assert_int_equal(cached(&p, 0), 0);
  sh_pool_destroy(&p);
  sh_pool_destroy(&w);
  free(objs);
}

/*
 * Steady state between two workers. A allocates every message, B frees it
 * (into its outbox, back to A by 32). A pool that grows by one object finds
 * itself one short each time B's outbox is full while one more message than
 * ever before is in flight: a coincidence that keeps coming, rarely, long
 * after warm-up (cross-worker ping-pong mallocked 0-2 times per million
 * messages so). Slabs give A far more than a peer's outbox and the messages
 * in flight can hold: after warm-up, no malloc at all.
 */
static void test_cross_worker_steady_state(void **state) {
  (void)state;
  enum { WARM = 10000, ROUNDS = 1000000, MAX_FLIGHT = 4 };
  sh_pool a, b;
  sh_pool_init(&a, 4096, 16, 1000);
  sh_pool_init(&b, 4096, 16, 1000);
  void *flight[MAX_FLIGHT];
  uint32_t rng = 1, warm_mallocs = 0;
  for (int r = 0; r < WARM + ROUNDS; r++) {
    if (r == WARM) warm_mallocs = (uint32_t)a.mallocs;
    /* Mostly one message in flight, now and then a few at once. */
    rng = rng * 1103515245u + 12345u;
    int k = (rng >> 16) % 1024 == 0 ? 1 + (int)((rng >> 8) % MAX_FLIGHT) : 1;
    for (int i = 0; i < k; i++) assert_non_null(flight[i] = sh_pool_alloc(&a, 40));
    for (int i = 0; i < k; i++) sh_pool_free(&b, flight[i]);
  }
  assert_true(warm_mallocs > 0);
  assert_int_equal(a.mallocs, warm_mallocs);
  sh_pool_flush(&b);
  assert_int_equal(sh_pool_outstanding(&a), 0);
  sh_pool_destroy(&a);
  sh_pool_destroy(&b);
}

/* ---- cross-thread: A allocates, B frees with its own pool, A reuses ---- */

enum { XN = 1000 };

typedef struct xfer {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stage; /* 0: A allocating, 1: objects handed to B, 2: B freed them */
  void *objs[XN];
  sh_pool pa, pb;
  uint64_t mallocs_first, mallocs_again;
  int alloc_failures, bad_contents;
} xfer;

static void xfer_wait(xfer *x, int stage) {
  pthread_mutex_lock(&x->mu);
  while (x->stage != stage) pthread_cond_wait(&x->cv, &x->mu);
  pthread_mutex_unlock(&x->mu);
}

static void xfer_set(xfer *x, int stage) {
  pthread_mutex_lock(&x->mu);
  x->stage = stage;
  pthread_cond_broadcast(&x->cv);
  pthread_mutex_unlock(&x->mu);
}

static void *xfer_a(void *arg) {
  xfer *x = arg;
  for (int i = 0; i < XN; i++) {
    uint32_t *o = sh_pool_alloc(&x->pa, 200);
    if (!o) {
      x->alloc_failures++;
      continue;
    }
    o[0] = (uint32_t)i;
    o[49] = ~(uint32_t)i;
    x->objs[i] = o;
  }
  x->mallocs_first = x->pa.mallocs;
  xfer_set(x, 1);
  xfer_wait(x, 2);
  /* Everything B returned is on our remote stack: no malloc now. */
  for (int i = 0; i < XN; i++) {
    x->objs[i] = sh_pool_alloc(&x->pa, 200);
    if (!x->objs[i]) x->alloc_failures++;
  }
  x->mallocs_again = x->pa.mallocs;
  for (int i = 0; i < XN; i++) sh_pool_free(&x->pa, x->objs[i]);
  return NULL;
}

static void *xfer_b(void *arg) {
  xfer *x = arg;
  xfer_wait(x, 1);
  for (int i = 0; i < XN; i++) {
    uint32_t *o = x->objs[i];
    if (!o) continue;
    if (o[0] != (uint32_t)i || o[49] != ~(uint32_t)i) x->bad_contents++;
    sh_pool_free(&x->pb, o);
  }
  sh_pool_flush(&x->pb); /* what a worker does when it idles */
  xfer_set(x, 2);
  return NULL;
}

static void test_cross_thread_reuse(void **state) {
  (void)state;
  xfer *x = calloc(1, sizeof *x);
  assert_non_null(x);
  pthread_mutex_init(&x->mu, NULL);
  pthread_cond_init(&x->cv, NULL);
  sh_pool_init(&x->pa, 4096, 16, 1000);
  sh_pool_init(&x->pb, 4096, 16, 1000);
  pthread_t a, b;
  assert_int_equal(pthread_create(&a, NULL, xfer_a, x), 0);
  assert_int_equal(pthread_create(&b, NULL, xfer_b, x), 0);
  pthread_join(a, NULL);
  pthread_join(b, NULL);

  assert_int_equal(x->alloc_failures, 0);
  assert_int_equal(x->bad_contents, 0);
  /* Slabs: XN objects cost XN / slab mallocs, and coming back none. */
  uint64_t xslabs = (XN + per_slab(2) - 1) / per_slab(2);
  assert_int_equal(x->mallocs_first, xslabs);
  assert_int_equal(x->mallocs_again, xslabs);
  assert_int_equal(x->pa.allocs, 2 * XN);
  assert_int_equal(x->pa.local_frees, XN);
  assert_int_equal(atomic_load(&x->pa.remote_frees), XN);
  assert_int_equal(sh_pool_outstanding(&x->pa), 0);
  assert_int_equal(cached(&x->pa, 2), xslabs * per_slab(2));
  assert_true(remote_empty(&x->pa, 2));
  /* Nothing entered B's pool. */
  assert_int_equal(x->pb.allocs + x->pb.mallocs + x->pb.local_frees, 0);
  assert_int_equal(atomic_load(&x->pb.remote_frees), 0);
  for (int cls = 0; cls < SH_POOL_CLASSES; cls++) {
    assert_int_equal(cached(&x->pb, cls), 0);
    assert_null(atomic_load(&x->pb.cls[cls].remote));
  }
  sh_pool_destroy(&x->pa);
  sh_pool_destroy(&x->pb);
  pthread_cond_destroy(&x->cv);
  pthread_mutex_destroy(&x->mu);
  free(x);
}

/* ---- stress: two threads free into a third's pool while it allocates ---- */

enum { SQ = 64, STOTAL = 100000, SFREERS = 2 };

typedef struct stress {
  pthread_mutex_t mu;
  pthread_cond_t not_empty, not_full;
  void *ring[SQ];
  uint32_t head, count;
  bool done;
  sh_pool owner;
  sh_pool freer_pool[SFREERS];
  uint64_t alloc_failures;
  uint64_t bad[SFREERS];
} stress;

typedef struct stress_arg {
  stress *s;
  int id;
} stress_arg;

static size_t stress_size(uint32_t i) { return i % 3 ? 40 : 300; }

static void *stress_owner(void *arg) {
  stress *s = arg;
  for (uint32_t i = 0; i < STOTAL; i++) {
    size_t size = stress_size(i);
    uint32_t *o = sh_pool_alloc(&s->owner, size);
    if (!o) {
      s->alloc_failures++;
      continue;
    }
    /* Plain writes the freer reads and the next owner of the object overwrites:
     * TSan sees a race here unless the pool orders them. */
    o[0] = (uint32_t)size;
    o[size / 4 - 1] = ~(uint32_t)size;
    pthread_mutex_lock(&s->mu);
    while (s->count == SQ) pthread_cond_wait(&s->not_full, &s->mu);
    s->ring[(s->head + s->count) % SQ] = o;
    s->count++;
    pthread_cond_signal(&s->not_empty);
    pthread_mutex_unlock(&s->mu);
  }
  pthread_mutex_lock(&s->mu);
  s->done = true;
  pthread_cond_broadcast(&s->not_empty);
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static void *stress_freer(void *arg) {
  stress_arg *a = arg;
  stress *s = a->s;
  void *batch[SQ];
  for (;;) {
    /* Take everything queued, then free outside the lock, so frees overlap
     * the owner's allocations as much as possible. */
    pthread_mutex_lock(&s->mu);
    while (s->count == 0 && !s->done) pthread_cond_wait(&s->not_empty, &s->mu);
    uint32_t n = s->count;
    for (uint32_t i = 0; i < n; i++) batch[i] = s->ring[(s->head + i) % SQ];
    s->head = (s->head + n) % SQ;
    s->count = 0;
    pthread_cond_signal(&s->not_full);
    pthread_mutex_unlock(&s->mu);
    if (n == 0) {
      sh_pool_flush(&s->freer_pool[a->id]); /* done and drained: send the last batches */
      break;
    }
    for (uint32_t i = 0; i < n; i++) {
      uint32_t *o = batch[i];
      size_t size = o[0];
      if ((size != 40 && size != 300) || o[size / 4 - 1] != ~(uint32_t)size) a->s->bad[a->id]++;
      o[1] = 0xdead; /* a write the owner's next user must be ordered after */
      sh_pool_free(&s->freer_pool[a->id], o);
    }
  }
  return NULL;
}

static void test_stress_remote_frees(void **state) {
  (void)state;
  stress *s = calloc(1, sizeof *s);
  assert_non_null(s);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->not_empty, NULL);
  pthread_cond_init(&s->not_full, NULL);
  sh_pool_init(&s->owner, 4096, 16, 1000);
  for (int k = 0; k < SFREERS; k++) sh_pool_init(&s->freer_pool[k], 4096, 16, 1000);

  pthread_t owner, freers[SFREERS];
  stress_arg args[SFREERS];
  assert_int_equal(pthread_create(&owner, NULL, stress_owner, s), 0);
  for (int k = 0; k < SFREERS; k++) {
    args[k] = (stress_arg){s, k};
    assert_int_equal(pthread_create(&freers[k], NULL, stress_freer, &args[k]), 0);
  }
  pthread_join(owner, NULL);
  for (int k = 0; k < SFREERS; k++) pthread_join(freers[k], NULL);

  assert_int_equal(s->alloc_failures, 0);
  for (int k = 0; k < SFREERS; k++) assert_int_equal(s->bad[k], 0);
  assert_int_equal(s->owner.allocs, STOTAL);
  assert_int_equal(s->owner.local_frees, 0);
  assert_int_equal(atomic_load(&s->owner.remote_frees), STOTAL);
  assert_int_equal(sh_pool_outstanding(&s->owner), 0);
  /*
   * Reuse under concurrency: the owner mallocs only when its slabs and its
   * remote stack are empty, i.e. when every object of the class is in the
   * ring, in a freer's batch (at most SQ each) or in a freer's outbox (at
   * most SH_POOL_OUTBOX each), so a class never needs more than 3 * SQ + 1
   * plus the outboxes, in slabs.
   */
  const uint64_t need = 3 * SQ + 1 + SFREERS * SH_POOL_OUTBOX;
  const int c40 = 0, c300 = 3; /* the classes of 40 and 300 bytes */
  assert_true(s->owner.mallocs <= (need + per_slab(c40) - 1) / per_slab(c40) +
                                      (need + per_slab(c300) - 1) / per_slab(c300));
  /* No object was lost or went to a freer's pool: all are free again (and
   * max_cached is high enough that no slab went back). */
  sh_pool_trim(&s->owner, 0);
  uint64_t all = 0;
  for (int cls = 0; cls < SH_POOL_CLASSES; cls++) {
    all += cached(&s->owner, cls) / per_slab(cls);
    assert_int_equal(cached(&s->owner, cls) % per_slab(cls), 0);
    assert_true(remote_empty(&s->owner, cls));
  }
  assert_int_equal(all, s->owner.mallocs);
  for (int k = 0; k < SFREERS; k++) {
    sh_pool *f = &s->freer_pool[k];
    assert_int_equal(f->allocs + f->mallocs + f->local_frees, 0);
    for (int cls = 0; cls < SH_POOL_CLASSES; cls++) assert_int_equal(cached(f, cls), 0);
    sh_pool_destroy(f);
  }
  sh_pool_destroy(&s->owner);
  pthread_cond_destroy(&s->not_full);
  pthread_cond_destroy(&s->not_empty);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_remote_frees_come_back),
      cmocka_unit_test(test_outbox_batches),
      cmocka_unit_test(test_flood_memory_bounded),
      cmocka_unit_test(test_cross_worker_steady_state),
      cmocka_unit_test(test_cross_thread_reuse),
      cmocka_unit_test(test_stress_remote_frees),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
