/*
 * Tests for the MPSC mailbox (core/actor/mailbox.c): FIFO order, an exact size,
 * take on an empty mailbox, a randomized put/take run checked against a
 * FIFO model, and multi-producer stress runs (also built under TSan) that
 * check every message arrives exactly once and in per-producer order, into
 * one queue and into neighbouring queues of one set. The queues of a set are
 * independent, and the sentinel is re-linked whenever a queue runs empty.
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
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "actor/mailbox.h"
#include "support/harness.h"

/* A test message: the header, then who sent it and its place in that
 * sender's sequence. */
typedef struct tmsg {
  sh_msg hdr;
  uint32_t producer;
  uint32_t seq;
} tmsg;

static const sh_msg_type tmsg_type = {"tmsg", sizeof(tmsg), SH_NOTICE, 0, NULL, NULL};

static tmsg *msg_new(uint32_t producer, uint32_t seq) {
  tmsg *m = calloc(1, sizeof(*m));
  if (m == NULL) abort(); /* threads cannot fail a cmocka test; nothing to test without memory */
  m->hdr.type = &tmsg_type;
  m->producer = producer;
  m->seq = seq;
  return m;
}

/* The queue of the set that the single-queue tests use: one in the middle,
 * with neighbours on each side in every line of the set. */
#define Q 2u

static void put_seq(sh_mailboxes *mb, uint32_t seq) {
  sh_mailbox_push(mb, Q, &msg_new(0, seq)->hdr);
}

/* Takes one message, checks it is `seq` and frees it. */
static void expect_take(sh_mailboxes *mb, uint32_t seq) {
  sh_msg *m = sh_mailbox_take(mb, Q);
  assert_non_null(m);
  assert_ptr_equal(m->type, &tmsg_type);
  assert_int_equal(((tmsg *)m)->seq, seq);
  free(m);
}

/* Takes n messages, checking they are first, first+1, ... */
static void expect_run(sh_mailboxes *mb, uint32_t first, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) expect_take(mb, first + i);
}

static void expect_empty(sh_mailboxes *mb) {
  assert_int_equal(sh_mailbox_size(mb, Q), 0);
  assert_false(sh_mailbox_nonempty(mb, Q));
  assert_null(sh_mailbox_take(mb, Q));
  /* A second look must not invent anything either (the sentinel is not a message). */
  assert_null(sh_mailbox_take(mb, Q));
  assert_int_equal(sh_mailbox_size(mb, Q), 0);
}

/* ------------------------------------------------------ single thread --- */

static void test_take_empty_returns_null(void **state) {
  (void)state;
  sh_mailboxes mb;
  sh_mailbox_init(&mb);
  expect_empty(&mb);
  /* Empty again after a round trip, when the sentinel has been re-linked. */
  put_seq(&mb, 1);
  assert_true(sh_mailbox_nonempty(&mb, Q));
  expect_take(&mb, 1);
  expect_empty(&mb);
}

static void test_fifo_order(void **state) {
  (void)state;
  sh_mailboxes mb;
  sh_mailbox_init(&mb);
  for (uint32_t i = 0; i < 100; i++) put_seq(&mb, i);
  expect_run(&mb, 0, 100);
  expect_empty(&mb);
  /* And again on the same mailbox: a drained mailbox behaves like a new one. */
  for (uint32_t i = 100; i < 110; i++) put_seq(&mb, i);
  expect_run(&mb, 100, 10);
  expect_empty(&mb);
}

static void test_size_exact(void **state) {
  (void)state;
  sh_mailboxes mb;
  sh_mailbox_init(&mb);
  for (uint32_t i = 1; i <= 50; i++) {
    assert_int_equal(sh_mailbox_push(&mb, Q, &msg_new(0, i)->hdr), i);
    assert_int_equal(sh_mailbox_size(&mb, Q), i);
  }
  for (uint32_t i = 1; i <= 20; i++) {
    expect_take(&mb, i);
    assert_int_equal(sh_mailbox_size(&mb, Q), 50 - i);
  }
  /* put returns an estimate of the size after it that counts takes as of
   * the consumer's last publish: never below the true size (31 here)... */
  assert_true(sh_mailbox_push(&mb, Q, &msg_new(0, 51)->hdr) >= 31);
  /* ...and exact once the consumer published. */
  expect_take(&mb, 21);
  sh_mailbox_publish(&mb, Q);
  assert_int_equal(sh_mailbox_push(&mb, Q, &msg_new(0, 52)->hdr), 31);
  expect_run(&mb, 22, 31);
  expect_empty(&mb);
}

/* The sentinel path, link by link: a new or drained queue holds only its
 * sentinel; a push links behind it; taking the last message links it back. */
static void test_sentinel_relinked_when_drained(void **state) {
  (void)state;
  sh_mailboxes mb;
  sh_mailbox_init(&mb);
  for (int round = 0; round < 3; round++) {
    assert_ptr_equal(mb.tail[Q], &mb.sentinel[Q]);
    assert_ptr_equal(atomic_load(&mb.head[Q]), &mb.sentinel[Q]);
    assert_null(atomic_load(&mb.sentinel[Q]));
    tmsg *m = msg_new(0, (uint32_t)round);
    sh_mailbox_push(&mb, Q, &m->hdr);
    assert_ptr_equal(atomic_load(&mb.head[Q]), &m->hdr.next);
    assert_non_null(atomic_load(&mb.sentinel[Q]));
    /* The last message is handed out whole; the sentinel goes behind it. */
    assert_ptr_equal(sh_mailbox_take(&mb, Q), &m->hdr);
    assert_ptr_equal(atomic_load(&mb.head[Q]), &mb.sentinel[Q]);
    assert_ptr_equal(mb.tail[Q], &mb.sentinel[Q]);
    free(m);
    expect_empty(&mb);
  }
}

/* The queues of one set share lines but nothing else: interleaved pushes
 * and takes, each queue running empty (its sentinel re-linked)
 * while its neighbours are busy. */
static void test_queues_independent(void **state) {
  (void)state;
  sh_mailboxes mb;
  sh_mailbox_init(&mb);
  uint32_t next[SH_MAILBOXES] = {0}, want[SH_MAILBOXES] = {0};
  for (uint32_t step = 0; step < 2000; step++) {
    unsigned i = step * 7 % SH_MAILBOXES;
    unsigned burst = step % 4; /* 0: this look drains queue i */
    for (unsigned k = 0; k < burst; k++) sh_mailbox_push(&mb, i, &msg_new(i, next[i]++)->hdr);
    if (burst == 0) {
      sh_msg *m;
      while ((m = sh_mailbox_take(&mb, i)) != NULL) {
        assert_int_equal(((tmsg *)m)->producer, i);
        assert_int_equal(((tmsg *)m)->seq, want[i]++);
        free(m);
      }
      assert_ptr_equal(mb.tail[i], &mb.sentinel[i]);
      sh_mailbox_publish(&mb, i);
    }
    for (unsigned j = 0; j < SH_MAILBOXES; j++)
      assert_int_equal(sh_mailbox_size(&mb, j), next[j] - want[j]);
  }
  for (unsigned j = 0; j < SH_MAILBOXES; j++) {
    while (want[j] < next[j]) {
      sh_msg *m = sh_mailbox_take(&mb, j);
      assert_non_null(m);
      assert_int_equal(((tmsg *)m)->seq, want[j]++);
      free(m);
    }
    assert_null(sh_mailbox_take(&mb, j));
  }
}

/* Random puts and takes against a FIFO model: order and size must match
 * after every step. */
#define MODEL_CAP 4096
typedef struct fifo {
  uint32_t v[MODEL_CAP];
  uint32_t first, n; /* ring buffer */
} fifo;

static void fifo_push(fifo *d, uint32_t x) {
  assert_true(d->n < MODEL_CAP);
  d->v[(d->first + d->n++) % MODEL_CAP] = x;
}
static uint32_t fifo_pop(fifo *d) {
  uint32_t x = d->v[d->first];
  d->first = (d->first + 1) % MODEL_CAP;
  d->n--;
  return x;
}

static void test_interleaving_matches_model(void **state) {
  (void)state;
  static fifo model;
  model.first = model.n = 0;
  sh_mailboxes mb;
  sh_mailbox_init(&mb);
  uint64_t rng = 0x5eed0001; /* fixed seed: every run checks the same interleavings */
  uint32_t next_seq = 0;
  for (int step = 0; step < 100000; step++) {
    bool put = th_xorshift(&rng) % 2 == 0; /* as many puts as takes: often empty */
    if (put && model.n < MODEL_CAP) {
      fifo_push(&model, next_seq);
      put_seq(&mb, next_seq++);
    } else if (model.n == 0) {
      assert_null(sh_mailbox_take(&mb, Q));
    } else {
      expect_take(&mb, fifo_pop(&model));
    }
    assert_int_equal(sh_mailbox_size(&mb, Q), model.n);
  }
  while (model.n > 0) expect_take(&mb, fifo_pop(&model));
  expect_empty(&mb);
}

/* ------------------------------------------------------ multi-thread --- */

#define PRODUCERS 4
#define PER_PRODUCER 50000u
#define TOTAL (PRODUCERS * PER_PRODUCER)

typedef struct stress {
  sh_mailboxes mb;
  pthread_barrier_t start;
  bool spread; /* producers two by two into neighbouring queues, not all into Q */
  /* Written by the consumer, read by main after the join. */
  uint32_t next_seq[PRODUCERS];
  uint64_t taken;
  uint64_t bad_order; /* a message out of its producer's order, or a duplicate */
  uint64_t bad_producer;
} stress;

typedef struct producer_arg {
  stress *s;
  uint32_t id;
} producer_arg;

/* The queue producer p pushes into. Spread, the producers of different
 * queues write one cache line (mailbox.h): still every message exactly once. */
static unsigned queue_of(const stress *s, uint32_t producer) {
  return s->spread ? Q - 1 + producer % 2 : Q;
}

static void *producer_main(void *arg) {
  producer_arg *a = arg;
  unsigned q = queue_of(a->s, a->id);
  pthread_barrier_wait(&a->s->start);
  for (uint32_t i = 0; i < PER_PRODUCER; i++)
    sh_mailbox_push(&a->s->mb, q, &msg_new(a->id, i)->hdr);
  return NULL;
}

/* Takes from queue q, waiting out the window where a producer swapped the
 * head but has not linked yet (take returns NULL then). */
static sh_msg *take_wait(sh_mailboxes *mb, unsigned q) {
  sh_msg *m;
  while ((m = sh_mailbox_take(mb, q)) == NULL) sched_yield();
  return m;
}

/* Takes from the producers' queues in turn, from *q on, waiting when all
 * are empty; *q becomes the queue it took from. */
static sh_msg *take_any(stress *s, unsigned *q) {
  if (!s->spread) return take_wait(&s->mb, *q);
  for (;;) {
    for (unsigned k = 0; k < 2; k++) {
      unsigned at = Q - 1 + (*q + 1 + k) % 2;
      sh_msg *m = sh_mailbox_take(&s->mb, at);
      if (m != NULL) {
        *q = at;
        return m;
      }
    }
    sched_yield();
  }
}

static void check_message(stress *s, const tmsg *t) {
  if (t->producer >= PRODUCERS) {
    s->bad_producer++;
    return;
  }
  /* In order and exactly once per producer: each seq is the next expected. */
  if (t->seq != s->next_seq[t->producer]) s->bad_order++;
  s->next_seq[t->producer] = t->seq + 1;
}

static void *consumer_main(void *arg) {
  stress *s = arg;
  pthread_barrier_wait(&s->start);
  unsigned q = Q;
  while (s->taken < TOTAL) {
    sh_msg *m = take_any(s, &q);
    check_message(s, (const tmsg *)m);
    free(m);
    s->taken++;
  }
  return NULL;
}

static void run_stress(bool spread) {
  stress *s = calloc(1, sizeof(*s));
  assert_non_null(s);
  sh_mailbox_init(&s->mb);
  s->spread = spread;
  assert_int_equal(pthread_barrier_init(&s->start, NULL, PRODUCERS + 1), 0);
  pthread_t prod[PRODUCERS], cons;
  producer_arg args[PRODUCERS];
  assert_int_equal(pthread_create(&cons, NULL, consumer_main, s), 0);
  for (uint32_t p = 0; p < PRODUCERS; p++) {
    args[p] = (producer_arg){s, p};
    assert_int_equal(pthread_create(&prod[p], NULL, producer_main, &args[p]), 0);
  }
  for (int p = 0; p < PRODUCERS; p++) assert_int_equal(pthread_join(prod[p], NULL), 0);
  assert_int_equal(pthread_join(cons, NULL), 0);

  assert_int_equal(s->taken, TOTAL);
  assert_int_equal(s->bad_producer, 0);
  assert_int_equal(s->bad_order, 0);
  for (int p = 0; p < PRODUCERS; p++) assert_int_equal(s->next_seq[p], PER_PRODUCER);
  for (unsigned q = 0; q < SH_MAILBOXES; q++) assert_null(sh_mailbox_take(&s->mb, q));
  expect_empty(&s->mb);
  pthread_barrier_destroy(&s->start);
  free(s);
}

static void test_multi_producer_stress(void **state) {
  (void)state;
  run_stress(false);
}

static void test_neighbour_queues_stress(void **state) {
  (void)state;
  run_stress(true);
}

int main(void) {
  /* A lost message makes the consumer spin forever: turn a hang into a failure. */
  alarm(120);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_take_empty_returns_null),
      cmocka_unit_test(test_fifo_order),
      cmocka_unit_test(test_size_exact),
      cmocka_unit_test(test_sentinel_relinked_when_drained),
      cmocka_unit_test(test_queues_independent),
      cmocka_unit_test(test_interleaving_matches_model),
      cmocka_unit_test(test_multi_producer_stress),
      cmocka_unit_test(test_neighbour_queues_stress),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
