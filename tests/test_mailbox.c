/*
 * Tests for the MPSC mailbox (core/mailbox.c): FIFO order, an exact size,
 * take on an empty mailbox, put_head (including the regression for known
 * bug 4 of the original design: put_head on an EMPTY mailbox must leave the
 * mailbox whole, so later puts queue behind it and nothing is lost), a
 * randomized put/put_head/take run checked against a deque model, and
 * multi-producer stress runs (also built under TSan) that check every
 * message arrives exactly once and in per-producer order.
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

#include "mailbox.h"
#include "support/harness.h"

/* A test message: the header, then who sent it and its place in that
 * sender's sequence. */
typedef struct tmsg {
  sh_msg hdr;
  uint32_t producer;
  uint32_t seq;
} tmsg;

static const sh_msg_type tmsg_type = {"tmsg", sizeof(tmsg), SH_NOTICE, 0, NULL};

static tmsg *msg_new(uint32_t producer, uint32_t seq) {
  tmsg *m = calloc(1, sizeof(*m));
  if (m == NULL) abort(); /* threads cannot fail a cmocka test; nothing to test without memory */
  m->hdr.type = &tmsg_type;
  m->producer = producer;
  m->seq = seq;
  return m;
}

static void put_seq(sh_mailbox *mb, uint32_t seq) { sh_mailbox_push(mb, &msg_new(0, seq)->hdr); }

static void put_head_seq(sh_mailbox *mb, uint32_t seq) {
  sh_mailbox_push_head(mb, &msg_new(0, seq)->hdr);
}

/* Takes one message, checks it is `seq` and frees it. */
static void expect_take(sh_mailbox *mb, uint32_t seq) {
  sh_msg *m = sh_mailbox_take(mb);
  assert_non_null(m);
  assert_ptr_equal(m->type, &tmsg_type);
  assert_int_equal(((tmsg *)m)->seq, seq);
  free(m);
}

/* Takes n messages, checking they are first, first+1, ... */
static void expect_run(sh_mailbox *mb, uint32_t first, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) expect_take(mb, first + i);
}

static void expect_empty(sh_mailbox *mb) {
  assert_int_equal(sh_mailbox_size(mb), 0);
  assert_false(sh_mailbox_nonempty(mb));
  assert_null(sh_mailbox_take(mb));
  /* A second look must not invent anything either (the sentinel is not a message). */
  assert_null(sh_mailbox_take(mb));
  assert_int_equal(sh_mailbox_size(mb), 0);
}

/* ------------------------------------------------------ single thread --- */

static void test_take_empty_returns_null(void **state) {
  (void)state;
  sh_mailbox mb;
  sh_mailbox_init(&mb);
  expect_empty(&mb);
  /* Empty again after a round trip, when the sentinel has been re-linked. */
  put_seq(&mb, 1);
  assert_true(sh_mailbox_nonempty(&mb));
  expect_take(&mb, 1);
  expect_empty(&mb);
}

static void test_fifo_order(void **state) {
  (void)state;
  sh_mailbox mb;
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
  sh_mailbox mb;
  sh_mailbox_init(&mb);
  for (uint32_t i = 1; i <= 50; i++) {
    assert_int_equal(sh_mailbox_push(&mb, &msg_new(0, i)->hdr), i);
    assert_int_equal(sh_mailbox_size(&mb), i);
  }
  for (uint32_t i = 1; i <= 20; i++) {
    expect_take(&mb, i);
    assert_int_equal(sh_mailbox_size(&mb), 50 - i);
  }
  put_head_seq(&mb, 20);
  assert_int_equal(sh_mailbox_size(&mb), 31);
  /* put returns an estimate of the size after it that counts takes as of
   * the consumer's last publish: never below the true size (32 here)... */
  assert_true(sh_mailbox_push(&mb, &msg_new(0, 51)->hdr) >= 32);
  /* ...and exact once the consumer published (put_head included). */
  expect_take(&mb, 20);
  sh_mailbox_publish(&mb);
  assert_int_equal(sh_mailbox_push(&mb, &msg_new(0, 52)->hdr), 32);
  put_head_seq(&mb, 20);
  expect_run(&mb, 20, 33);
  expect_empty(&mb);
}

static void test_put_head_goes_first(void **state) {
  (void)state;
  sh_mailbox mb;
  sh_mailbox_init(&mb);
  for (uint32_t i = 1; i <= 3; i++) put_seq(&mb, i);
  put_head_seq(&mb, 0);
  assert_int_equal(sh_mailbox_size(&mb), 4);
  expect_run(&mb, 0, 4);
  expect_empty(&mb);
}

/* Known bug 4: put_head on an empty mailbox, then puts, then takes: the head
 * message first, then every put in order, nothing lost. `drained` runs it on
 * a mailbox that has already been used and emptied (the sentinel re-linked). */
static void check_put_head_on_empty(bool drained) {
  sh_mailbox mb;
  sh_mailbox_init(&mb);
  if (drained) {
    put_seq(&mb, 100);
    put_seq(&mb, 101);
    expect_run(&mb, 100, 2);
    expect_empty(&mb);
  }
  put_head_seq(&mb, 0);
  assert_int_equal(sh_mailbox_size(&mb), 1);
  assert_true(sh_mailbox_nonempty(&mb));
  sh_mailbox_publish(&mb);
  for (uint32_t i = 1; i <= 5; i++) assert_int_equal(sh_mailbox_push(&mb, &msg_new(0, i)->hdr), i + 1);
  expect_run(&mb, 0, 6);
  expect_empty(&mb);
  /* The mailbox is still sound afterwards. */
  put_seq(&mb, 7);
  put_seq(&mb, 8);
  expect_run(&mb, 7, 2);
  expect_empty(&mb);
}

static void test_put_head_on_empty_then_put(void **state) {
  (void)state;
  check_put_head_on_empty(false);
}

static void test_put_head_on_drained_then_put(void **state) {
  (void)state;
  check_put_head_on_empty(true);
}

/* Two put_heads on an empty mailbox stack up (last in, first out), and the
 * later puts still queue behind both. */
static void test_put_head_twice_on_empty(void **state) {
  (void)state;
  sh_mailbox mb;
  sh_mailbox_init(&mb);
  put_head_seq(&mb, 1);
  put_head_seq(&mb, 0);
  put_seq(&mb, 2);
  put_seq(&mb, 3);
  assert_int_equal(sh_mailbox_size(&mb), 4);
  expect_run(&mb, 0, 4);
  expect_empty(&mb);
}

/* A taken message put back after a partial drain is the next one out, both
 * in the middle of the queue and when only the last linked message is left. */
static void test_put_head_after_partial_drain(void **state) {
  (void)state;
  sh_mailbox mb;
  sh_mailbox_init(&mb);
  for (uint32_t i = 1; i <= 5; i++) put_seq(&mb, i);
  sh_msg *m = sh_mailbox_take(&mb);
  assert_non_null(m);
  assert_int_equal(((tmsg *)m)->seq, 1);
  sh_mailbox_push_head(&mb, m); /* the very message taken goes back */
  expect_run(&mb, 1, 4);       /* 1..4: only 5 (the last linked) is left */
  put_head_seq(&mb, 4);
  put_seq(&mb, 6);
  assert_int_equal(sh_mailbox_size(&mb), 3);
  expect_run(&mb, 4, 3);
  expect_empty(&mb);
}

/* Random puts, put_heads and takes against a deque model: order and size
 * must match after every step. */
#define MODEL_CAP 4096
typedef struct deque {
  uint32_t v[MODEL_CAP];
  uint32_t first, n; /* ring buffer */
} deque;

static void dq_push_back(deque *d, uint32_t x) {
  assert_true(d->n < MODEL_CAP);
  d->v[(d->first + d->n++) % MODEL_CAP] = x;
}
static void dq_push_front(deque *d, uint32_t x) {
  assert_true(d->n < MODEL_CAP);
  d->first = (d->first + MODEL_CAP - 1) % MODEL_CAP;
  d->v[d->first] = x;
  d->n++;
}
static uint32_t dq_pop_front(deque *d) {
  uint32_t x = d->v[d->first];
  d->first = (d->first + 1) % MODEL_CAP;
  d->n--;
  return x;
}

static void test_interleaving_matches_model(void **state) {
  (void)state;
  static deque model;
  model.first = model.n = 0;
  sh_mailbox mb;
  sh_mailbox_init(&mb);
  uint64_t rng = 0x5eed0001; /* fixed seed: every run checks the same interleavings */
  uint32_t next_seq = 0;
  for (int step = 0; step < 100000; step++) {
    uint64_t r = th_xorshift(&rng) % 8;
    if (r < 3 && model.n < MODEL_CAP) {
      dq_push_back(&model, next_seq);
      put_seq(&mb, next_seq++);
    } else if (r < 4 && model.n < MODEL_CAP) {
      dq_push_front(&model, next_seq);
      put_head_seq(&mb, next_seq++);
    } else if (model.n == 0) {
      assert_null(sh_mailbox_take(&mb));
    } else {
      expect_take(&mb, dq_pop_front(&model));
    }
    assert_int_equal(sh_mailbox_size(&mb), model.n);
  }
  while (model.n > 0) expect_take(&mb, dq_pop_front(&model));
  expect_empty(&mb);
}

/* ------------------------------------------------------ multi-thread --- */

#define PRODUCERS 4
#define PER_PRODUCER 50000u
#define TOTAL (PRODUCERS * PER_PRODUCER)
/* In the put_head run the consumer puts back one message in this many. */
#define PUT_BACK_EVERY 7

typedef struct stress {
  sh_mailbox mb;
  pthread_barrier_t start;
  bool put_back; /* the consumer also exercises put_head */
  /* Written by the consumer, read by main after the join. */
  uint32_t next_seq[PRODUCERS];
  uint64_t taken;
  uint64_t bad_order; /* a message out of its producer's order, or a duplicate */
  uint64_t bad_producer;
  uint64_t bad_put_back; /* the take after a put_head was not that message */
} stress;

typedef struct producer_arg {
  stress *s;
  uint32_t id;
} producer_arg;

static void *producer_main(void *arg) {
  producer_arg *a = arg;
  pthread_barrier_wait(&a->s->start);
  for (uint32_t i = 0; i < PER_PRODUCER; i++) sh_mailbox_push(&a->s->mb, &msg_new(a->id, i)->hdr);
  return NULL;
}

/* Takes, waiting out the window where a producer swapped the head but has
 * not linked yet (take returns NULL then). */
static sh_msg *take_wait(sh_mailbox *mb) {
  sh_msg *m;
  while ((m = sh_mailbox_take(mb)) == NULL) sched_yield();
  return m;
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
  while (s->taken < TOTAL) {
    sh_msg *m = take_wait(&s->mb);
    if (s->put_back && s->taken % PUT_BACK_EVERY == 0) {
      /* Producers keep putting meanwhile: the message put back must still be
       * the next one out. */
      sh_mailbox_push_head(&s->mb, m);
      sh_msg *again = take_wait(&s->mb);
      if (again != m) s->bad_put_back++;
      m = again;
    }
    check_message(s, (const tmsg *)m);
    free(m);
    s->taken++;
  }
  return NULL;
}

static void run_stress(bool put_back) {
  stress *s = calloc(1, sizeof(*s));
  assert_non_null(s);
  sh_mailbox_init(&s->mb);
  s->put_back = put_back;
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
  assert_int_equal(s->bad_put_back, 0);
  for (int p = 0; p < PRODUCERS; p++) assert_int_equal(s->next_seq[p], PER_PRODUCER);
  expect_empty(&s->mb);
  pthread_barrier_destroy(&s->start);
  free(s);
}

static void test_multi_producer_stress(void **state) {
  (void)state;
  run_stress(false);
}

static void test_multi_producer_stress_with_put_head(void **state) {
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
      cmocka_unit_test(test_put_head_goes_first),
      cmocka_unit_test(test_put_head_on_empty_then_put),
      cmocka_unit_test(test_put_head_on_drained_then_put),
      cmocka_unit_test(test_put_head_twice_on_empty),
      cmocka_unit_test(test_put_head_after_partial_drain),
      cmocka_unit_test(test_interleaving_matches_model),
      cmocka_unit_test(test_multi_producer_stress),
      cmocka_unit_test(test_multi_producer_stress_with_put_head),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
