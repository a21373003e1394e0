/*
 * Tests for the run queues of houses (core/sched/housequeue.c): FIFO order within
 * each sub-queue, the high sub-queue always popped before the normal one, an
 * exact count (also against a randomized model), trypop giving up on a held
 * lock while the other sub-queue still pops, and concurrent pushers with an
 * owner popper and a thief (built under TSan too) that get every house
 * exactly once and in each pusher's order. The checks of the test builds
 * (core/base/check.h, SH_INVARIANT) fire: a lock taken while held or given back
 * by another thread than its holder, a pop finding more houses linked than
 * counted.
 *
 * Houses come from zeroed memory: the queue only uses their link. A house is
 * named by its index in the test's array.
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
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/check.h"
#include "actor/house.h"
#include "sched/housequeue.h"
#include "support/child.h"
#include "support/harness.h"

enum { NORMAL = 0, HIGH = 1 };

/* Zeroed memory with the 64-byte alignment queues and houses declare
 * (calloc only guarantees 16). */
static void *zalloc64(size_t size) {
  void *p = aligned_alloc(64, (size + 63) & ~(size_t)63);
  assert_non_null(p);
  memset(p, 0, size);
  return p;
}

static sh_hq_link *houses_new(size_t n) { return zalloc64(n * sizeof(sh_hq_link)); }

static size_t index_of(const sh_hq_link *base, const sh_hq_link *h) { return (size_t)(h - base); }

static void push(sh_house_queue *q, sh_hq_link *base, size_t i, bool high) {
  uint32_t before = sh_hq_count(q);
  assert_int_equal(sh_hq_push(q, &base[i], high), before + 1);
  assert_int_equal(sh_hq_count(q), before + 1);
}

/* Pops (owner or thief) and checks it is house i; the count drops by one. */
static void expect_pop_with(sh_house_queue *q, sh_hq_link *base, size_t i, bool thief) {
  uint32_t before = sh_hq_count(q);
  sh_hq_link *h = thief ? sh_hq_trypop(q) : sh_hq_pop(q);
  assert_non_null(h);
  assert_int_equal(index_of(base, h), i);
  assert_null(h->next); /* a popped house is in no queue */
  assert_int_equal(sh_hq_count(q), before - 1);
}

static void expect_pop(sh_house_queue *q, sh_hq_link *base, size_t i) { expect_pop_with(q, base, i, false); }

static void expect_empty(sh_house_queue *q) {
  assert_int_equal(sh_hq_count(q), 0);
  assert_null(sh_hq_pop(q));
  assert_null(sh_hq_trypop(q));
  assert_int_equal(sh_hq_count(q), 0);
}

/* ------------------------------------------------------ single thread --- */

static void test_empty(void **state) {
  (void)state;
  sh_house_queue q;
  sh_hq_init(&q);
  expect_empty(&q);
}

/* Each sub-queue alone is first in, first out, through both pop and trypop. */
static void check_fifo(bool high, bool thief) {
  sh_house_queue q;
  sh_hq_init(&q);
  sh_hq_link *hs = houses_new(20);
  for (size_t i = 0; i < 20; i++) push(&q, hs, i, high);
  for (size_t i = 0; i < 10; i++) expect_pop_with(&q, hs, i, thief);
  /* Reused after a partial drain: new houses queue behind the rest. */
  for (size_t i = 0; i < 10; i++) push(&q, hs, i, high);
  for (size_t i = 10; i < 20; i++) expect_pop_with(&q, hs, i, thief);
  for (size_t i = 0; i < 10; i++) expect_pop_with(&q, hs, i, thief);
  expect_empty(&q);
  free(hs);
}

static void test_fifo_normal(void **state) {
  (void)state;
  check_fifo(false, false);
  check_fifo(false, true);
}

static void test_fifo_high(void **state) {
  (void)state;
  check_fifo(true, false);
  check_fifo(true, true);
}

static void test_high_before_normal(void **state) {
  (void)state;
  sh_house_queue q;
  sh_hq_init(&q);
  sh_hq_link *hs = houses_new(10);
  /* Normal first: arrival order must not matter, only the sub-queue. */
  for (size_t i = 0; i < 8; i++) push(&q, hs, i, i % 2 == 1);
  for (size_t i = 1; i < 8; i += 2) expect_pop(&q, hs, i);
  expect_pop(&q, hs, 0);
  /* A high house pushed while normals wait jumps ahead of them. */
  push(&q, hs, 8, true);
  expect_pop_with(&q, hs, 8, true);
  push(&q, hs, 9, true);
  expect_pop(&q, hs, 9);
  for (size_t i = 2; i < 8; i += 2) expect_pop(&q, hs, i);
  expect_empty(&q);
  free(hs);
}

/* Random pushes and pops against a model of two FIFOs: the order and the
 * count must match after every step. */
#define MODEL_HOUSES 4096
typedef struct fifo {
  size_t v[MODEL_HOUSES];
  size_t first, n; /* ring buffer */
} fifo;

static void fifo_push(fifo *f, size_t x) { f->v[(f->first + f->n++) % MODEL_HOUSES] = x; }
static size_t fifo_pop(fifo *f) {
  size_t x = f->v[f->first];
  f->first = (f->first + 1) % MODEL_HOUSES;
  f->n--;
  return x;
}

static void test_count_and_order_match_model(void **state) {
  (void)state;
  static fifo model[2];
  model[0].first = model[0].n = model[1].first = model[1].n = 0;
  /* free_list: houses in no queue; a house is pushed only when free. */
  static size_t free_list[MODEL_HOUSES];
  size_t nfree = MODEL_HOUSES;
  for (size_t i = 0; i < MODEL_HOUSES; i++) free_list[i] = i;
  sh_house_queue q;
  sh_hq_init(&q);
  sh_hq_link *hs = houses_new(MODEL_HOUSES);
  uint64_t seed = 0x5eed0002;
  for (int step = 0; step < 100000; step++) {
    uint64_t r = th_xorshift(&seed);
    if (r % 2 == 0 && nfree > 0) {
      size_t pick = (size_t)(r >> 8) % nfree;
      size_t i = free_list[pick];
      free_list[pick] = free_list[--nfree];
      bool high = (r >> 1) % 4 == 0;
      fifo_push(&model[high], i);
      push(&q, hs, i, high);
    } else if (model[HIGH].n + model[NORMAL].n == 0) {
      expect_empty(&q);
    } else {
      size_t i = fifo_pop(&model[model[HIGH].n > 0 ? HIGH : NORMAL]);
      expect_pop_with(&q, hs, i, (r >> 1) % 2 == 0);
      free_list[nfree++] = i;
    }
    assert_int_equal(sh_hq_count(&q), model[HIGH].n + model[NORMAL].n);
  }
  while (model[HIGH].n > 0) expect_pop(&q, hs, fifo_pop(&model[HIGH]));
  while (model[NORMAL].n > 0) expect_pop(&q, hs, fifo_pop(&model[NORMAL]));
  expect_empty(&q);
  free(hs);
}

/* A thief gives up on a held lock and never waits; the sub-queue whose lock
 * is free still pops, for the thief and for the owner. */
static void test_trypop_gives_up_on_held_lock(void **state) {
  (void)state;
  sh_house_queue q;
  sh_hq_init(&q);
  sh_hq_link *hs = houses_new(4);

  push(&q, hs, 0, true);
  push(&q, hs, 1, false);
  sh_spin_lock(&q.sub[HIGH].lock);
  expect_pop_with(&q, hs, 1, true); /* high is held: the normal one comes out */
  assert_null(sh_hq_trypop(&q));   /* only the held sub-queue has a house */
  assert_int_equal(sh_hq_count(&q), 1);
  sh_spin_unlock(&q.sub[HIGH].lock);
  expect_pop_with(&q, hs, 0, true);

  push(&q, hs, 2, false);
  sh_spin_lock(&q.sub[NORMAL].lock);
  assert_null(sh_hq_trypop(&q));
  assert_int_equal(sh_hq_count(&q), 1);
  /* Pushing to and popping from the free sub-queue still works, owner too. */
  push(&q, hs, 3, true);
  expect_pop(&q, hs, 3);
  assert_null(sh_hq_trypop(&q));
  sh_spin_unlock(&q.sub[NORMAL].lock);

  /* An owner pop does not wait for the lock of an empty sub-queue. */
  sh_spin_lock(&q.sub[HIGH].lock);
  expect_pop(&q, hs, 2);
  sh_spin_unlock(&q.sub[HIGH].lock);
  expect_empty(&q);
  free(hs);
}

/* ------------------------------------------------------ multi-thread --- */

#define PUSHERS 4
#define PER_PUSHER 10000u
#define TOTAL (PUSHERS * PER_PUSHER)

typedef struct stress {
  sh_house_queue q;
  sh_hq_link *hs;                /* pusher p owns [p * PER_PUSHER, (p + 1) * PER_PUSHER) */
  bool high[TOTAL];            /* which sub-queue each house goes to; fixed before start */
  _Atomic uint8_t seen[TOTAL]; /* times each house was popped */
  atomic_uint popped;
  pthread_barrier_t start;
} stress;

/* What one consumer saw; read by main after the join. */
typedef struct consumer {
  stress *s;
  bool thief;
  size_t last[PUSHERS][2]; /* last index + 1 seen per pusher and sub-queue */
  uint64_t got, bad_order, bad_index;
} consumer;

typedef struct pusher_arg {
  stress *s;
  size_t first;
} pusher_arg;

static void *pusher_main(void *arg) {
  pusher_arg *a = arg;
  pthread_barrier_wait(&a->s->start);
  for (size_t i = a->first; i < a->first + PER_PUSHER; i++) sh_hq_push(&a->s->q, &a->s->hs[i], a->s->high[i]);
  return NULL;
}

static void record(consumer *c, const sh_hq_link *h) {
  stress *s = c->s;
  size_t i = index_of(s->hs, h);
  if (i >= TOTAL) {
    c->bad_index++;
    return;
  }
  /* Each consumer sees a subsequence of every FIFO, so within one pusher
   * and one sub-queue the indices it sees only grow. */
  size_t *last = &c->last[i / PER_PUSHER][s->high[i]];
  if (i + 1 <= *last) c->bad_order++;
  *last = i + 1;
  /* relaxed: a counter checked after the join. */
  atomic_fetch_add_explicit(&s->seen[i], 1, memory_order_relaxed);
  c->got++;
}

static void *consumer_main(void *arg) {
  consumer *c = arg;
  stress *s = c->s;
  pthread_barrier_wait(&s->start);
  /* relaxed: only a stop condition; the join orders everything for main. */
  while (atomic_load_explicit(&s->popped, memory_order_relaxed) < TOTAL) {
    sh_hq_link *h = c->thief ? sh_hq_trypop(&s->q) : sh_hq_pop(&s->q);
    if (h == NULL) {
      sched_yield();
      continue;
    }
    record(c, h);
    atomic_fetch_add_explicit(&s->popped, 1, memory_order_relaxed);
  }
  return NULL;
}

static void test_concurrent_pushers_owner_and_thief(void **state) {
  (void)state;
  stress *s = zalloc64(sizeof(*s));
  sh_hq_init(&s->q);
  s->hs = houses_new(TOTAL);
  uint64_t seed = 0x5eed0003;
  for (size_t i = 0; i < TOTAL; i++) s->high[i] = th_xorshift(&seed) % 3 == 0;
  assert_int_equal(pthread_barrier_init(&s->start, NULL, PUSHERS + 2), 0);

  consumer cons[2] = {{.s = s, .thief = false}, {.s = s, .thief = true}};
  pthread_t ct[2], pt[PUSHERS];
  pusher_arg pa[PUSHERS];
  for (int k = 0; k < 2; k++) assert_int_equal(pthread_create(&ct[k], NULL, consumer_main, &cons[k]), 0);
  for (int p = 0; p < PUSHERS; p++) {
    pa[p] = (pusher_arg){s, (size_t)p * PER_PUSHER};
    assert_int_equal(pthread_create(&pt[p], NULL, pusher_main, &pa[p]), 0);
  }
  for (int p = 0; p < PUSHERS; p++) assert_int_equal(pthread_join(pt[p], NULL), 0);
  for (int k = 0; k < 2; k++) assert_int_equal(pthread_join(ct[k], NULL), 0);

  for (int k = 0; k < 2; k++) {
    assert_int_equal(cons[k].bad_index, 0);
    assert_int_equal(cons[k].bad_order, 0);
  }
  assert_int_equal(cons[0].got + cons[1].got, TOTAL);
  for (size_t i = 0; i < TOTAL; i++) assert_int_equal(atomic_load(&s->seen[i]), 1);
  expect_empty(&s->q);
  pthread_barrier_destroy(&s->start);
  free(s->hs);
  free(s);
}

/* -------------------------------------------------- the checks fire --- */

#ifdef SH_CHECKED
/* A failed check aborts the child, after its message on stderr. */
static void expect_check_fails(void (*body)(const void *arg)) {
  char out[8];
  assert_int_equal(th_in_child(body, NULL, 10, out, sizeof(out)), 128 + SIGABRT);
}

/* A test-and-set that lets a second taker in (the flag cleared under the
 * holder, as a load then a store can do): the second take fails its check. */
static void taken_twice_body(const void *arg) {
  (void)arg;
  sh_spin l;
  sh_spin_init(&l);
  sh_spin_lock(&l);
  atomic_store(&l.held, false);
  sh_spin_lock(&l);
  _exit(0);
}

static void *unlock_main(void *arg) {
  sh_spin_unlock(arg);
  return NULL;
}

static void unlocked_by_other_body(const void *arg) {
  (void)arg;
  sh_spin l;
  sh_spin_init(&l);
  sh_spin_lock(&l);
  pthread_t t;
  if (pthread_create(&t, NULL, unlock_main, &l) == 0) pthread_join(t, NULL);
  _exit(0);
}

/* A pusher that links before it counts (the count lags one house behind):
 * the next pop takes with more houses linked than counted. */
static void count_behind_body(const void *arg) {
  (void)arg;
  sh_house_queue *q = zalloc64(sizeof(*q));
  sh_hq_init(q);
  sh_hq_link *hs = houses_new(2);
  sh_hq_push(q, &hs[0], false);
  sh_hq_push(q, &hs[1], false);
  atomic_fetch_sub(&q->count, 1);
  sh_hq_pop(q);
  _exit(0);
}

static void test_checks_fire(void **state) {
  (void)state;
  expect_check_fails(taken_twice_body);
  expect_check_fails(unlocked_by_other_body);
  expect_check_fails(count_behind_body);
}
#else
static void test_checks_fire(void **state) { skip(); (void)state; }
#endif

int main(void) {
  /* A lost house makes the consumers spin forever: turn a hang into a failure. */
  alarm(120);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_empty),
      cmocka_unit_test(test_fifo_normal),
      cmocka_unit_test(test_fifo_high),
      cmocka_unit_test(test_high_before_normal),
      cmocka_unit_test(test_count_and_order_match_model),
      cmocka_unit_test(test_trypop_gives_up_on_held_lock),
      cmocka_unit_test(test_concurrent_pushers_owner_and_thief),
      cmocka_unit_test(test_checks_fire),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
