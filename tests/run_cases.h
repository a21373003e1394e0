/*
 * Two guarantees of a house run, checked on the public API only and written
 * once for both backends: tests/test_e2e_run.c (epoll, also under TSan) and
 * tests/test_sim_run.c (the simulator, several seeds and strategies).
 *
 *   - Mailbox order holds for every message a run takes: replies, then
 *     exceptions, asks, notices. Messages that arrive while the actor is
 *     busy in a handler are taken in that order after it, as they are when
 *     they queue while it is idle (order_*). An ordered class takes one
 *     sender's notice and ask in the order sent (ordered_*).
 *   - sh_stop while the actor is busy in a handler: that handler finishes,
 *     but nothing queued starts after the stop. Queued asks are answered
 *     -ESHUTDOWN and queued notices dropped (counted), on an unbounded or a
 *     bounded mailbox, and a batch that was being built when the stop came
 *     never starts (stop_*), for an ordered class too (stop_ordered_*).
 *
 * The rig. X, on worker 0, is the actor under test; Y, on worker 1, its
 * peer. X's busy handler (for a notice, or for an ask from Y) sends Y a go
 * and then holds its worker, polling with sh_yield_cpu, until Y reports
 * that everything the case needs is in X's mailboxes: Y's answers to X's
 * asks (a reply, an exception), Y's notices and asks to X, and, in the stop
 * cases, sh_stop(X). Each step is caused by the step before, so what X
 * sees is exact on any schedule. A batch case's stop comes from X's batch
 * filter, the actor's own code that runs while a batch is being built.
 *
 * The including file defines, before it includes this one:
 *   RUN_RUNS                          runs of every case;
 *   static void run_configure(unsigned run)     before each run's system;
 *   static const char *run_name(unsigned run)   names a run, for a failure;
 * and lists the tests with RUN_CASES.
 *
 * Actors record into the rig and never call cmocka (CHECK counts); main
 * reads the rig once the run ended and the system is shut down.
 */
#ifndef TESTS_RUN_CASES_H
#define TESTS_RUN_CASES_H

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

#define RUN_LOG_MAX 16
#define RUN_NOTES 3 /* notices Y sends in a notice-batch case */
#define RUN_ASKS 2  /* asks Y sends in an ask-batch case */

/* What X's handlers log. */
enum { L_REPLY = 1, L_EXCEPTION, L_ASK, L_NOTICE, L_BATCH };

/* num_ask values: who asks what. */
enum { V_BUSY = 1, V_PLAIN, V_REPLY, V_THROW };

/* A command notice: to X (busy, a plain notice), to Y (kick, go). */
enum { W_BUSY = 1, W_NOTE, W_KICK, W_GO };
typedef struct run_cmd { sh_msg hdr; int what; } run_cmd;
static SH_MSG_DEFINE(run_cmd, SH_NOTICE, 0);

static sh_msg *run_cmd_new(int what) { return &sh_msg_new(run_cmd, .what = what)->hdr; }

typedef enum run_case {
  CASE_ORDER,
  CASE_STOP,
  CASE_BATCH_NOTES,
  CASE_BATCH_ASKS,
  RUN_CASE_KINDS
} run_case;

/* ---- the rig: one run's configuration and results -------------------------- */

typedef struct run_rig {
  /* Configuration: written by main before the system starts. */
  run_case kind;
  bool busy_ask; /* X is busy in an ask handler (Y's), else in a notice handler */
  const sh_addr *x, *y;
  /* Y's progress, polled by X's busy handler (seq_cst, the default). */
  atomic_int progress;
  /* Results: each written by one actor, read by main after the run. */
  int log[RUN_LOG_MAX], nlog; /* X */
  int stops;                  /* X's stop hook */
  int busy_err;               /* Y: its busy ask to X ended so */
  int plain_err[RUN_ASKS];    /* Y: its plain asks to X ended so */
  int nplain;
} run_rig;
static run_rig R;

/* ---- X --------------------------------------------------------------------- */

typedef struct x_actor { sh_actor base; int filtered; } x_actor;
typedef struct x_locals { sh_future *f[2]; bool seen[2]; } x_locals;
enum { X_WAIT = 1 };

static void x_log(sh_actor *self, int e) {
  CHECK(R.nlog < RUN_LOG_MAX);
  if (R.nlog < RUN_LOG_MAX) R.log[R.nlog++] = e;
  if (R.kind == CASE_ORDER) th_done(self); /* elsewhere a log is a failure: it counts nothing */
}

/* What Y reports before X's busy handler may return. */
static int progress_wanted(void) { return R.kind == CASE_ORDER ? 3 : 1; }

static sh_yield x_busy_end(sh_stack *st) {
  return R.busy_ask ? th_reply_with(st, 0) : sh_return(st, NULL);
}

/* The answers to X's two asks to Y, logged as each comes. */
static sh_yield x_busy_answers(sh_actor *self, sh_stack *st, x_locals *l) {
  static const int entry[2] = {L_REPLY, L_EXCEPTION};
  for (int i = 0; i < 2; i++) {
    if (l->seen[i] || !sh_future_done(l->f[i])) continue;
    l->seen[i] = true;
    x_log(self, entry[i]);
  }
  if (!l->seen[0] || !l->seen[1]) return sh_suspend_any(st, X_WAIT);
  CHECK(!sh_future_failed(l->f[0]) && sh_future_error(l->f[1]) == -EPROTO);
  return x_busy_end(st);
}

/* X's busy handler, for W_BUSY or a V_BUSY ask. */
static sh_yield x_busy(sh_actor *self, sh_stack *st) {
  x_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) != SH_START) return x_busy_answers(self, st, l);
  if (R.kind == CASE_ORDER) {
    l->f[0] = sh_ask(st, R.y, th_new_ask(V_REPLY), SH_FOREVER);
    l->f[1] = sh_ask(st, R.y, th_new_ask(V_THROW), SH_FOREVER);
    CHECK(l->f[0] != NULL && l->f[1] != NULL);
  }
  CHECK(sh_notice(R.y, run_cmd_new(W_GO)) == 0);
  /* Held: what Y sends now queues behind this handler. */
  while (atomic_load(&R.progress) < progress_wanted()) sh_yield_cpu();
  return R.kind == CASE_ORDER ? sh_suspend_any(st, X_WAIT) : x_busy_end(st);
}

static sh_yield x_notice(sh_actor *self, sh_stack *st) {
  if (sh_stack_msg_as(st, run_cmd)->what == W_BUSY) return x_busy(self, st);
  x_log(self, L_NOTICE);
  return sh_return(st, NULL);
}

static sh_yield x_ask(sh_actor *self, sh_stack *st) {
  if (sh_stack_msg_as(st, num_ask)->v == V_BUSY) return x_busy(self, st);
  x_log(self, L_ASK);
  return th_reply_with(st, 0);
}

static sh_yield x_batch(sh_actor *self, sh_stack *st) {
  x_log(self, L_BATCH);
  return sh_stack_batch_msg(st, 0)->type->kind == SH_ASK ? th_reply_with(st, 0)
                                                          : sh_return(st, NULL);
}

/* The filters take Y's messages into a batch; the second one taken stops
 * X, with the batch half built. */
static bool x_filter_stop(sh_actor *self) {
  if (++((x_actor *)self)->filtered == 2) CHECK(sh_stop(sh_self(self)) == 0);
  return true;
}
static bool x_note_filter(sh_actor *self, const sh_msg *m) {
  return ((const run_cmd *)m)->what == W_NOTE && x_filter_stop(self);
}
static bool x_ask_filter(sh_actor *self, const sh_msg *m) {
  return ((const num_ask *)m)->v == V_PLAIN && x_filter_stop(self);
}

static void x_stop(sh_actor *self) {
  R.stops++;
  if (R.kind != CASE_ORDER) th_done(self);
}

#define X_CLASS(nm, ...)                                                                 \
  {.name = nm, .size = sizeof(x_actor), .locals_size = sizeof(x_locals),                 \
   .notice = x_notice, .ask = x_ask, .stop = x_stop, __VA_ARGS__}
static const sh_actor_class x_class = X_CLASS("run_x");
static const sh_actor_class x_bounded_class =
    X_CLASS("run_x_bounded", .notice_capacity = 4, .ask_capacity = 2);
#define X_BATCH_CLASS(nm, ...)                                                             \
  X_CLASS(nm, .batch_notice = x_batch, .batch_notice_filter = x_note_filter,               \
          .batch_ask = x_batch, .batch_ask_filter = x_ask_filter, __VA_ARGS__)
static const sh_actor_class x_batch_class = X_BATCH_CLASS("run_x_batch");
/* Ordered (per-sender order): Y's notices and asks share one mailbox. */
static const sh_actor_class x_ordered_class = X_CLASS("run_x_ordered", .ordered = true);
static const sh_actor_class x_ordered_bounded_class =
    X_CLASS("run_x_ordered_bounded", .ordered = true, .ask_capacity = 4);
static const sh_actor_class x_ordered_batch_class =
    X_BATCH_CLASS("run_x_ordered_batch", .ordered = true);

/* ---- Y --------------------------------------------------------------------- */

typedef struct y_locals { sh_future *f[RUN_ASKS]; int nf; } y_locals;
enum { Y_ANSWERED = 1 };

static sh_yield y_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  long v = sh_stack_msg_as(st, num_ask)->v;
  CHECK(v == V_REPLY || v == V_THROW);
  sh_yield y = v == V_REPLY ? th_reply_with(st, 0) : sh_throw(st, -EPROTO);
  atomic_fetch_add(&R.progress, 1); /* the answer is in X's mailbox */
  return y;
}

static void y_ask_x(sh_stack *st, y_locals *l, long v) {
  l->f[l->nf] = sh_ask(st, R.x, th_new_ask(v), SH_FOREVER);
  CHECK(l->f[l->nf] != NULL);
  l->nf++;
}

/* What each case puts into X's mailboxes while X is held. */
static const int y_notes[RUN_CASE_KINDS] = {[CASE_ORDER] = 1, [CASE_STOP] = 2,
                                             [CASE_BATCH_NOTES] = RUN_NOTES};
static const int y_asks[RUN_CASE_KINDS] = {[CASE_ORDER] = 1, [CASE_STOP] = 1,
                                           [CASE_BATCH_ASKS] = RUN_ASKS};

static void y_go(sh_stack *st, y_locals *l) {
  for (int i = 0; i < y_notes[R.kind]; i++) CHECK(sh_notice(R.x, run_cmd_new(W_NOTE)) == 0);
  for (int i = 0; i < y_asks[R.kind]; i++) y_ask_x(st, l, V_PLAIN);
  if (R.kind == CASE_STOP) CHECK(sh_stop(R.x) == 0);
}

static sh_yield y_notice(sh_actor *self, sh_stack *st) {
  y_locals *l = sh_stack_locals(st);
  int what = sh_stack_msg_as(st, run_cmd)->what;
  if (sh_stack_state(st) == SH_START) {
    if (what == W_KICK)
      y_ask_x(st, l, V_BUSY);
    else
      y_go(st, l);
    if (what == W_GO) atomic_fetch_add(&R.progress, 1);
    if (l->nf > 0) return sh_suspend(st, Y_ANSWERED);
  }
  for (int i = 0; i < l->nf; i++) {
    int err = sh_future_error(l->f[i]);
    if (what == W_KICK)
      R.busy_err = err;
    else
      R.plain_err[R.nplain++] = err;
  }
  th_done(self);
  return sh_return(st, NULL);
}

static const sh_actor_class y_class = {.name = "run_y",
                                       .size = sizeof(sh_actor),
                                       .locals_size = sizeof(y_locals),
                                       .notice = y_notice,
                                       .ask = y_ask};

/* ---- a run ----------------------------------------------------------------- */

static unsigned run_current;

/* th_done calls a run waits for: X's logs or stop hook, Y's stacks. */
static int run_goal(void) {
  int y = R.busy_ask ? 2 : 1;
  return R.kind == CASE_ORDER ? 4 + y : 1 + y;
}

/* Runs one case to its end and shuts the system down: its statistics. */
static sh_stats run_case_once(run_case kind, bool busy_ask, const sh_actor_class *xc) {
  memset(&R, 0, sizeof(R));
  R.kind = kind;
  R.busy_ask = busy_ask;
  sh_system *sys = th_env(2, 0);
  th_set_goal(run_goal());
  R.x = th_spawn_on(sys, xc, NULL, 0);
  R.y = th_spawn_on(sys, &y_class, NULL, 1);
  assert_int_equal(sh_notice(busy_ask ? R.y : R.x, run_cmd_new(busy_ask ? W_KICK : W_BUSY)), 0);
  th_run(sys);
  return th_end_exact(sys);
}

static void run_failed(const char *what) {
  fprintf(stderr, "run %u (%s): %s\n", run_current, run_name(run_current), what);
}

static void assert_log(const int *want, int n) {
  bool same = R.nlog == n && (n == 0 || memcmp(R.log, want, (size_t)n * sizeof(int)) == 0);
  if (!same) {
    fprintf(stderr, "X handled:");
    for (int i = 0; i < R.nlog; i++) fprintf(stderr, " %d", R.log[i]);
    fprintf(stderr, " (want %d entries)\n", n);
    run_failed("wrong handlers, or wrong order");
  }
  assert_true(same);
}

/* Busy while a notice, an ask, an exception and a reply arrive: then
 * reply, exception, ask, notice; for an ordered class Y's notice and ask
 * in the order Y sent them, notice first. */
static void case_order(bool busy_ask, const sh_actor_class *xc) {
  sh_stats st = run_case_once(CASE_ORDER, busy_ask, xc);
  static const int want[] = {L_REPLY, L_EXCEPTION, L_ASK, L_NOTICE};
  static const int want_ordered[] = {L_REPLY, L_EXCEPTION, L_NOTICE, L_ASK};
  assert_log(xc->ordered ? want_ordered : want, 4);
  assert_int_equal(R.nplain, 1);
  assert_int_equal(R.plain_err[0], 0);
  assert_int_equal(R.busy_err, 0);
  assert_int_equal(st.dropped_stopped, 0);
}

/* Stopped while busy, or while a batch was being built: nothing queued
 * starts; `dropped` asks and notices were refused. */
static void case_stopped(run_case kind, bool busy_ask, const sh_actor_class *xc, int dropped) {
  sh_stats st = run_case_once(kind, busy_ask, xc);
  assert_log(NULL, 0);
  assert_int_equal(R.stops, 1);
  assert_int_equal(R.busy_err, 0); /* the handler that was running finished */
  for (int i = 0; i < R.nplain; i++) assert_int_equal(R.plain_err[i], -ESHUTDOWN);
  assert_int_equal(st.dropped_stopped, dropped);
}

static void case_order_busy_notice(void) { case_order(false, &x_class); }
static void case_order_busy_ask(void) { case_order(true, &x_class); }
static void case_ordered_busy_notice(void) { case_order(false, &x_ordered_class); }
static void case_ordered_busy_ask(void) { case_order(true, &x_ordered_class); }
static void case_stop_busy_notice(void) { case_stopped(CASE_STOP, false, &x_class, 3); }
static void case_stop_busy_ask(void) { case_stopped(CASE_STOP, true, &x_class, 3); }
static void case_stop_bounded(void) { case_stopped(CASE_STOP, false, &x_bounded_class, 3); }
static void case_stop_batch_notices(void) {
  case_stopped(CASE_BATCH_NOTES, false, &x_batch_class, RUN_NOTES);
}
static void case_stop_batch_asks(void) {
  case_stopped(CASE_BATCH_ASKS, false, &x_batch_class, RUN_ASKS);
}
static void case_stop_ordered(void) { case_stopped(CASE_STOP, true, &x_ordered_class, 3); }
static void case_stop_ordered_bounded(void) {
  case_stopped(CASE_STOP, false, &x_ordered_bounded_class, 3);
}
static void case_stop_ordered_batch_notices(void) {
  case_stopped(CASE_BATCH_NOTES, false, &x_ordered_batch_class, RUN_NOTES);
}
static void case_stop_ordered_batch_asks(void) {
  case_stopped(CASE_BATCH_ASKS, false, &x_ordered_batch_class, RUN_ASKS);
}

#define RUN_TEST(name)                                  \
  static void test_##name(void **state) {               \
    (void)state;                                        \
    for (unsigned run = 0; run < RUN_RUNS; run++) {     \
      run_current = run;                                \
      run_configure(run);                               \
      case_##name();                                    \
    }                                                   \
  }

RUN_TEST(order_busy_notice)
RUN_TEST(order_busy_ask)
RUN_TEST(stop_busy_notice)
RUN_TEST(stop_busy_ask)
RUN_TEST(stop_bounded)
RUN_TEST(stop_batch_notices)
RUN_TEST(stop_batch_asks)
RUN_TEST(ordered_busy_notice)
RUN_TEST(ordered_busy_ask)
RUN_TEST(stop_ordered)
RUN_TEST(stop_ordered_bounded)
RUN_TEST(stop_ordered_batch_notices)
RUN_TEST(stop_ordered_batch_asks)

#define RUN_CASES                                                                   \
  cmocka_unit_test(test_order_busy_notice), cmocka_unit_test(test_order_busy_ask),  \
      cmocka_unit_test(test_stop_busy_notice), cmocka_unit_test(test_stop_busy_ask), \
      cmocka_unit_test(test_stop_bounded), cmocka_unit_test(test_stop_batch_notices), \
      cmocka_unit_test(test_stop_batch_asks), cmocka_unit_test(test_ordered_busy_notice),    \
      cmocka_unit_test(test_ordered_busy_ask), cmocka_unit_test(test_stop_ordered),           \
      cmocka_unit_test(test_stop_ordered_bounded),                                            \
      cmocka_unit_test(test_stop_ordered_batch_notices),                                      \
      cmocka_unit_test(test_stop_ordered_batch_asks)

#endif
