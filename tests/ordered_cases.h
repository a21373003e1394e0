/*
 * Per-sender order (sh_actor_class.ordered), on the public API and written
 * once for both backends: tests/test_e2e_ordered.c (epoll, also under
 * TSan) and tests/test_sim_ordered.c (the simulator, several seeds and
 * strategies).
 *
 * The counting example: a sender sends a counter N increments (notices),
 * then asks it for the total. An ordered counter answers exactly N. A
 * default one takes the ask ahead of the notices queued before it and
 * answers exactly 0: the counter is kept from running until everything is
 * queued, so neither answer depends on the schedule. The senders:
 *   - an actor on another worker; the counter is held meanwhile by a
 *     notice (sent first, from the test thread) whose handler polls until
 *     the sender is done;
 *   - an actor on the counter's worker: the counter cannot run while the
 *     sender's handler sends;
 *   - the test's own thread: sh_notice, then a bridge ask (held as above).
 * And, for an ordered class: a bounded mailbox (ask_capacity bounds both
 * kinds, sh_put waits for room, order holds through the waits, the stats
 * of either kind are that mailbox's); batches (a change of kind ends the
 * batch being built); a barrier notice, which holds the notices and asks
 * behind it; and notice_capacity, which an ordered class may not set.
 *
 * The includer defines, before it includes this one:
 *   ORD_RUNS                                    runs of every case;
 *   static void ord_configure(unsigned run)     before each run's system;
 *   static const char *ord_name(unsigned run)   names a run, for a failure;
 * and lists the tests with ORDERED_CASES.
 *
 * Actors record into R and never call cmocka (CHECK counts); the test
 * thread reads R once the run ended.
 */
#ifndef TESTS_ORDERED_CASES_H
#define TESTS_ORDERED_CASES_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <stackhouse/probe.h>
#include <stackhouse/stackhouse.h>

#include "support/harness.h"

#define ORD_N 50       /* increments of the counting example */
#define ORD_SEGS 4     /* segments of a sender's plan */
#define ORD_ASKS 4     /* asks of a plan */
#define ORD_BATCHES 16 /* batch stacks recorded */
#define ORD_BARRIER_ADD 100

/* A sender's plan: segments of `count` messages of one op, in order. */
enum { OP_INCR = 1, OP_ASK, OP_BARRIER };
typedef struct ord_seg { int op, count; } ord_seg;

static struct {
  /* Configuration: written before the system starts. */
  const sh_addr *counter, *echo;
  ord_seg plan[ORD_SEGS];
  int nsegs;
  bool put;         /* notices by sh_put (asks only at the plan's end) */
  atomic_bool sent; /* everything is queued: the hold ends */
  /* Results. */
  long totals[ORD_ASKS];
  int ntotals;
  int batch_len[ORD_BATCHES], nbatch;
} R;

/* Notices to the counter: an increment, or the hold; to the sender: go. */
enum { W_INCR = 1, W_HOLD, W_GO };
typedef struct ord_note { sh_msg hdr; int what; } ord_note;
typedef struct ord_barrier { sh_msg hdr; } ord_barrier;
static SH_MSG_DEFINE(ord_note, SH_NOTICE, 0);
static SH_MSG_DEFINE(ord_barrier, SH_NOTICE, SH_MSG_BARRIER);

static sh_msg *ord_note_new(int what) { return &sh_msg_new(ord_note, .what = what)->hdr; }

/* ---- the counter ------------------------------------------------------------ */

typedef struct counter { sh_actor base; long n; } counter;
enum { C_ECHOED = 1 };

/* The barrier asks the echo and, once answered, changes the count in a way
 * that shows whether an increment slipped in while it waited. */
static sh_yield counter_barrier(counter *c, sh_stack *st) {
  if (sh_stack_state(st) == SH_START) {
    CHECK(sh_ask(st, R.echo, th_new_ask(0), SH_FOREVER) != NULL);
    return sh_suspend(st, C_ECHOED);
  }
  c->n = c->n * 10 + ORD_BARRIER_ADD;
  return sh_return(st, NULL);
}

static sh_yield counter_notice(sh_actor *self, sh_stack *st) {
  counter *c = (counter *)self;
  sh_msg *m = sh_stack_msg(st);
  if (sh_msg_is(m, &ord_barrier_type)) return counter_barrier(c, st);
  if (((ord_note *)m)->what == W_HOLD)
    while (!atomic_load(&R.sent)) sh_yield_cpu();
  else
    c->n++;
  return sh_return(st, NULL);
}

static sh_yield counter_ask(sh_actor *self, sh_stack *st) {
  return th_reply_with(st, ((counter *)self)->n);
}

static void batch_record(sh_stack *st) {
  CHECK(R.nbatch < ORD_BATCHES);
  if (R.nbatch < ORD_BATCHES) R.batch_len[R.nbatch++] = (int)sh_stack_batch_len(st);
}

static sh_yield counter_batch_notice(sh_actor *self, sh_stack *st) {
  batch_record(st);
  ((counter *)self)->n += (long)sh_stack_batch_len(st);
  return sh_return(st, NULL);
}

static sh_yield counter_batch_ask(sh_actor *self, sh_stack *st) {
  batch_record(st);
  return th_reply_with(st, ((counter *)self)->n); /* copied to every ask of the batch */
}

static bool incr_filter(sh_actor *self, const sh_msg *m) {
  (void)self;
  return ((const ord_note *)m)->what == W_INCR;
}

static bool any_filter(sh_actor *self, const sh_msg *m) {
  (void)self;
  (void)m;
  return true;
}

#define COUNTER_CLASS(nm, ...)                                                            \
  {.name = nm, .size = sizeof(counter), .notice = counter_notice, .ask = counter_ask,     \
   __VA_ARGS__}
static const sh_actor_class counter_default = COUNTER_CLASS("ord_counter_default");
static const sh_actor_class counter_ordered = COUNTER_CLASS("ord_counter", .ordered = true);
static const sh_actor_class counter_bounded =
    COUNTER_CLASS("ord_counter_bounded", .ordered = true, .ask_capacity = 2);
static const sh_actor_class counter_batch =
    COUNTER_CLASS("ord_counter_batch", .ordered = true, .batch_notice = counter_batch_notice,
                  .batch_notice_filter = incr_filter, .batch_ask = counter_batch_ask,
                  .batch_ask_filter = any_filter);

/* ---- the sender ------------------------------------------------------------- */

typedef struct s_locals {
  int seg, done; /* the plan's next message: segment, messages of it sent */
  sh_future *put, *f[ORD_ASKS];
  int nf;
} s_locals;
enum { S_PUT = 1, S_ANSWERS };

/* Sends one message of op; false when a put must wait for room. */
static bool send_one(sh_stack *st, s_locals *l, int op) {
  if (op == OP_ASK) {
    CHECK(l->nf < ORD_ASKS);
    l->f[l->nf++] = sh_ask(st, R.counter, th_new_ask(0), SH_FOREVER);
    return true;
  }
  sh_msg *m = op == OP_BARRIER ? &sh_msg_new(ord_barrier)->hdr : ord_note_new(W_INCR);
  if (!R.put) {
    CHECK(sh_notice(R.counter, m) == 0);
    return true;
  }
  l->put = sh_put(st, R.counter, m, SH_FOREVER);
  CHECK(l->put != NULL);
  return l->put == NULL || sh_future_done(l->put);
}

static sh_yield sender_answers(sh_actor *self, sh_stack *st, s_locals *l) {
  for (int i = 0; i < l->nf; i++) {
    CHECK(sh_future_error(l->f[i]) == 0);
    const num_reply *r = sh_future_reply(l->f[i], num_reply);
    if (r != NULL) R.totals[R.ntotals++] = r->v;
  }
  th_done(self);
  return sh_return(st, NULL);
}

/* The plan, in one go when nothing waits for room; a put that waits
 * suspends the handler, which goes on from where it was. */
static sh_yield sender_notice(sh_actor *self, sh_stack *st) {
  s_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == S_ANSWERS) return sender_answers(self, st, l);
  if (sh_stack_state(st) == S_PUT) CHECK(sh_future_error(l->put) == 0);
  while (l->seg < R.nsegs) {
    const ord_seg *s = &R.plan[l->seg];
    if (l->done == s->count) {
      l->seg++;
      l->done = 0;
      continue;
    }
    l->done++;
    if (!send_one(st, l, s->op)) return sh_suspend(st, S_PUT);
  }
  atomic_store(&R.sent, true);
  return sh_suspend(st, S_ANSWERS);
}

static const sh_actor_class sender_class = {.name = "ord_sender",
                                            .size = sizeof(sh_actor),
                                            .locals_size = sizeof(s_locals),
                                            .notice = sender_notice};

/* ---- runs ------------------------------------------------------------------- */

static unsigned ord_current;

static void ord_reset(void) {
  memset(&R, 0, sizeof(R));
  atomic_init(&R.sent, false);
}

static void plan_add(int op, int count) {
  assert_true(R.nsegs < ORD_SEGS);
  R.plan[R.nsegs++] = (ord_seg){op, count};
}

/* Where the sender is, and whether the counter is held meanwhile. */
typedef enum placement { CROSS, SAME } placement;

/* Runs the plan from a sender actor to a counter of class c on worker 0;
 * the system, still up, for the caller to look at and end. */
static sh_system *run_plan(const sh_actor_class *c, placement where, bool hold) {
  sh_system *sys = th_env(2, 1);
  R.counter = th_spawn_on(sys, c, NULL, 0);
  R.echo = th_spawn_on(sys, &counter_default, NULL, 1);
  const sh_addr *s = th_spawn_on(sys, &sender_class, NULL, where == CROSS ? 1 : 0);
  if (hold) assert_int_equal(sh_notice(R.counter, ord_note_new(W_HOLD)), 0);
  assert_int_equal(sh_notice(s, ord_note_new(W_GO)), 0);
  th_run(sys);
  return sys;
}

static void assert_totals(const long *want, int n) {
  bool same = R.ntotals == n && memcmp(R.totals, want, (size_t)n * sizeof(long)) == 0;
  if (!same) {
    fprintf(stderr, "run %u (%s): totals", ord_current, ord_name(ord_current));
    for (int i = 0; i < R.ntotals; i++) fprintf(stderr, " %ld", R.totals[i]);
    fprintf(stderr, " (want %d, first %ld)\n", n, want[0]);
  }
  assert_true(same);
}

/* N increments then an ask, from an actor: the total it gets. */
static void counting(const sh_actor_class *c, placement where, long want) {
  ord_reset();
  plan_add(OP_INCR, ORD_N);
  plan_add(OP_ASK, 1);
  /* Held only across workers: on the same one the sender holds it. */
  th_end_exact(run_plan(c, where, where == CROSS));
  assert_totals(&want, 1);
}

/* The same from the test's thread: sh_notice, then a bridge ask. */
static void counting_outside(const sh_actor_class *c, long want) {
  ord_reset();
  sh_system *sys = th_env(2, 0);
  R.counter = th_spawn_on(sys, c, NULL, 0);
  assert_int_equal(sh_system_start(sys), 0);
  sh_bridge *b = NULL;
  assert_int_equal(sh_bridge_new(sys, &b), 0);
  assert_int_equal(sh_notice(R.counter, ord_note_new(W_HOLD)), 0);
  for (int i = 0; i < ORD_N; i++) assert_int_equal(sh_notice(R.counter, ord_note_new(W_INCR)), 0);
  uint64_t ticket = 0;
  assert_int_equal(sh_bridge_ask(b, R.counter, th_new_ask(0), SH_FOREVER, &ticket), 0);
  atomic_store(&R.sent, true);
  sh_bridge_reply r;
  assert_int_equal(sh_bridge_recv(b, SH_FOREVER, &r), 0);
  assert_int_equal(r.ticket, ticket);
  assert_int_equal(r.error, 0);
  R.totals[R.ntotals++] = ((num_reply *)r.msg)->v;
  sh_msg_free(r.msg);
  sh_bridge_free(b);
  th_end_exact(sys);
  assert_totals(&want, 1);
}

static void case_count_cross_ordered(void) { counting(&counter_ordered, CROSS, ORD_N); }
static void case_count_cross_default(void) { counting(&counter_default, CROSS, 0); }
static void case_count_same_ordered(void) { counting(&counter_ordered, SAME, ORD_N); }
static void case_count_same_default(void) { counting(&counter_default, SAME, 0); }
static void case_count_outside_ordered(void) { counting_outside(&counter_ordered, ORD_N); }
static void case_count_outside_default(void) { counting_outside(&counter_default, 0); }

static sh_mailbox_stats box_stats(sh_msg_kind kind) {
  sh_mailbox_stats s;
  assert_int_equal(sh_mailbox_stats_get(R.counter, 0, kind, &s), 0);
  return s;
}

/* Bounded: sh_put waits for room in the one mailbox (capacity 2) as the
 * counter runs on; the total is still N. Either kind's stats are that
 * mailbox's. */
static void case_bounded_put(void) {
  ord_reset();
  R.put = true;
  plan_add(OP_INCR, ORD_N);
  plan_add(OP_ASK, 1);
  sh_system *sys = run_plan(&counter_bounded, CROSS, false);
  sh_mailbox_stats a = box_stats(SH_ASK), n = box_stats(SH_NOTICE);
  th_end_exact(sys);
  const long want = ORD_N;
  assert_totals(&want, 1);
  assert_int_equal(a.capacity, 2);
  assert_memory_equal(&a, &n, sizeof(a));
  assert_true(a.high_water <= 2);
}

/* Batches hold one kind: 3 increments, an ask, 2 increments, an ask, all
 * queued before the counter runs, make four batches in that order. */
static void case_batch(void) {
  ord_reset();
  plan_add(OP_INCR, 3);
  plan_add(OP_ASK, 1);
  plan_add(OP_INCR, 2);
  plan_add(OP_ASK, 1);
  th_end_exact(run_plan(&counter_batch, SAME, false));
  static const long want[] = {3, 5};
  assert_totals(want, 2);
  static const int lens[] = {3, 1, 2, 1};
  assert_int_equal(R.nbatch, 4);
  assert_memory_equal(R.batch_len, lens, sizeof(lens));
}

/* A barrier notice, then N increments and an ask: the increments wait
 * until the barrier's stack (which waits for an answer) is done. */
static void case_barrier(void) {
  ord_reset();
  plan_add(OP_BARRIER, 1);
  plan_add(OP_INCR, ORD_N);
  plan_add(OP_ASK, 1);
  th_end_exact(run_plan(&counter_ordered, SAME, false));
  const long want = ORD_BARRIER_ADD + ORD_N;
  assert_totals(&want, 1);
}

/* An ordered class's notices are bounded by ask_capacity alone. */
static void case_notice_capacity(void) {
  ord_reset();
  sh_system *sys = th_env(1, 0);
  sh_actor_class c = counter_ordered;
  c.notice_capacity = 1;
  const sh_addr *a = NULL;
  assert_int_equal(sh_spawn(sys, &c, NULL, 1, &a), -EINVAL);
  c.notice_capacity = 0;
  c.ask_capacity = 1;
  assert_int_equal(sh_spawn(sys, &c, NULL, 1, &a), 0);
  th_end_exact(sys);
}

#define ORD_TEST(name)                                   \
  static void test_##name(void **state) {                \
    (void)state;                                         \
    for (unsigned run = 0; run < ORD_RUNS; run++) {      \
      ord_current = run;                                 \
      ord_configure(run);                                \
      case_##name();                                     \
    }                                                    \
  }

ORD_TEST(count_cross_ordered)
ORD_TEST(count_cross_default)
ORD_TEST(count_same_ordered)
ORD_TEST(count_same_default)
ORD_TEST(count_outside_ordered)
ORD_TEST(count_outside_default)
ORD_TEST(bounded_put)
ORD_TEST(batch)
ORD_TEST(barrier)
ORD_TEST(notice_capacity)

#define ORDERED_CASES                                                                     \
  cmocka_unit_test(test_count_cross_ordered), cmocka_unit_test(test_count_cross_default), \
      cmocka_unit_test(test_count_same_ordered), cmocka_unit_test(test_count_same_default), \
      cmocka_unit_test(test_count_outside_ordered),                                       \
      cmocka_unit_test(test_count_outside_default), cmocka_unit_test(test_bounded_put),   \
      cmocka_unit_test(test_batch), cmocka_unit_test(test_barrier),                       \
      cmocka_unit_test(test_notice_capacity)

#endif
