/*
 * Unit tests of how stacks end (core/actor/stack.c), driven single-threaded
 * (stack_fixture.h).
 *
 * Covered: what an ask stack's ending tells the asker (reply, -ENODATA,
 * -EINVAL, -EPROTO, a thrown error, -EDEADLK for a suspend with nothing
 * pending, -ELOOP for a handler whose asks keep failing at once); a notice
 * stack suspending with nothing pending is ended, not leaked; a stack that
 * keeps being ready at once (puts with room) is deferred to its house's
 * next run after max_per_run invocations, never failed, and replies that
 * find it deferred do not run it; a put's outcome is exact when its own
 * actor stops.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <unistd.h>

#include "actor/house.h"
#include "actor/futtable.h"
#include "actor/future.h"
#include "actor/stack.h"
#include "support/manual.h"
#include "actor/addr.h"
#include "sched/loop.h"
#include "sched/system.h"
#include "sched/worker.h"

#include "stack_fixture.h"

/* ---- a client of the subject -------------------------------------------- */

/* Asks the subject once (go.mode is passed as req.v) and records the outcome. */
typedef struct client_locals { sh_future *f; } client_locals;
static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  client_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_ask(st, subject, &sh_msg_new(req, .v = sh_stack_msg_as(st, go)->mode)->hdr, SH_FOREVER);
    return sh_suspend(st, 1);
  }
  client_err = sh_future_error(l->f);
  if (client_err == 0) client_v = sh_future_reply(l->f, pong)->v;
  return sh_return(st, NULL);
}
static const sh_actor_class client_class = {.name = "client", .size = sizeof(sh_actor),
                                            .locals_size = sizeof(client_locals),
                                            .notice = client_notice};

/* Lets the subject run the ask of a client; returns what the client saw. */
static int client_run(int mode) {
  const sh_addr *c = th_spawn(&client_class, 1);
  th_drain(1);
  send_go(c, mode);
  th_drain(1);
  th_drain(0);
  th_drain(1);
  return client_err;
}

/* ---- how an ask stack ends ----------------------------------------------- */

enum { END_REPLY, END_NULL, END_NOT_REPLY, END_THROW_POS, END_THROW, END_DEADLOCK };

static sh_yield ending_fn(sh_actor *self, sh_stack *st) {
  (void)self;
  switch (sh_stack_msg_as(st, req)->v) {
  case END_REPLY: return sh_return(st, &sh_msg_new(pong, .v = 7)->hdr);
  case END_NULL: return sh_return(st, NULL);
  case END_NOT_REPLY: return sh_return(st, &sh_msg_new(go, .mode = 0)->hdr);
  case END_THROW_POS: return sh_throw(st, 5);
  case END_THROW: return sh_throw(st, -EPERM);
  default: return sh_suspend(st, S1); /* nothing to wait for */
  }
}

static void test_ask_stack_endings(void **state) {
  (void)state;
  subject_ask_fn = ending_fn;
  const struct { int mode, err; } cases[] = {
      {END_REPLY, 0},        {END_NULL, -ENODATA}, {END_NOT_REPLY, -EINVAL},
      {END_THROW_POS, -EPROTO}, {END_THROW, -EPERM}, {END_DEADLOCK, -EDEADLK},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    client_err = 1;
    assert_int_equal(client_run(cases[i].mode), cases[i].err);
    assert_true(sh_list_empty(&subject_house()->stacks));
  }
  assert_int_equal(client_v, 7);
}

/* A notice stack that suspends with nothing pending is ended, not leaked. */
static sh_yield suspend_nothing_fn(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_suspend(st, S1);
}

static void test_suspend_nothing_pending(void **state) {
  (void)state;
  subject_notice_fn = suspend_nothing_fn;
  poke_subject();
  assert_int_equal(calls, 1);
  assert_true(sh_list_empty(&subject_house()->stacks));
}

/* Every invocation asks the dead actor and suspends: each ask fails at once,
 * so the stack is ready again at once. The bound ends it with -ELOOP. */
static sh_yield reenter_fn(sh_actor *self, sh_stack *st) {
  (void)self;
  subject_locals *l = sh_stack_locals(st);
  l->f[0] = ask_v(st, dead, 0);
  return sh_suspend(st, sh_stack_state(st));
}

static void test_reentry_bound(void **state) {
  (void)state;
  subject_ask_fn = reenter_fn;
  uint64_t dropped = th_stats().dropped_stopped;
  uint64_t before = outstanding();
  assert_int_equal(client_run(0), -ELOOP);
  assert_true(calls > 1 && calls < 1000000);
  assert_int_equal(th_stats().dropped_stopped, dropped + (uint64_t)calls);
  assert_true(sh_list_empty(&subject_house()->stacks));
  /* Every failed future was recycled (the client actor's struct is small
   * enough to live in its house: no pool object of its own). */
  assert_int_equal(outstanding(), before);
}

/* Puts in a loop into a mailbox with room: every put is done during the
 * handler, so the stack is ready again at once, far more often than the
 * old re-entry bound (1024) allowed. It must neither fail (-ELOOP) nor hold
 * its worker: after max_per_run re-entries it is deferred to the house's
 * next run. */
#define LOOP_PUTS 3000
static sh_yield put_loop_fn(sh_actor *self, sh_stack *st) {
  (void)self;
  subject_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == S1 && sh_future_error(l->f[0]) != 0) fact[1]++;
  if (fact[0] == LOOP_PUTS) return sh_return(st, NULL);
  fact[0]++;
  l->f[0] = sh_put(st, resp[0], &sh_msg_new(go, .mode = 0)->hdr, SH_FOREVER);
  return sh_suspend(st, S1);
}

static void test_ready_stack_deferred(void **state) {
  (void)state;
  subject_notice_fn = put_loop_fn;
  send_go(subject, 0);
  step(0);
  /* One run: max_per_run invocations, then the stack waits its turn. */
  sh_house *h = subject_house();
  assert_int_equal(fact[0], (int)h->max_per_run);
  assert_false(sh_list_empty(&h->ready));
  assert_false(sh_list_empty(&h->stacks));
  assert_int_equal(atomic_load(&h->state), SH_READY);
  th_drain(0);
  assert_int_equal(fact[0], LOOP_PUTS);
  assert_int_equal(fact[1], 0);
  assert_int_equal(calls, LOOP_PUTS + 1);
  assert_true(sh_list_empty(&h->stacks));
  assert_true(sh_list_empty(&h->ready));
  th_drain(1);
  sh_stats st = th_stats();
  assert_int_equal(st.asks, st.asks_resolved);
}

/* A deferred stack that replies find waiting in the ready list: each is
 * only recorded, and the stack runs once, from the ready list (run by the
 * reply too, it would run twice; the runtime asserts it never is). Each
 * invocation asks the dead actor, which fails at once and so ends its wait
 * for any, and a responder, whose reply comes when worker 1 runs. */
static sh_yield deferred_any_fn(sh_actor *self, sh_stack *st) {
  (void)self;
  if (fact[1]) return sh_return(st, NULL);
  fact[0]++;
  ask_v(st, dead, 0);
  ask_v(st, resp[0], 0);
  return sh_suspend_any(st, S1);
}

static void test_deferred_stack_woken_by_reply(void **state) {
  (void)state;
  subject_notice_fn = deferred_any_fn;
  send_go(subject, 0);
  step(0);
  sh_house *h = subject_house();
  int per_run = (int)h->max_per_run;
  assert_int_equal(fact[0], per_run);
  assert_false(sh_list_empty(&h->ready));
  step(1); /* the responder: a reply for each invocation, the stack deferred */
  step(0); /* the replies, a run's budget of them: only recorded */
  assert_int_equal(fact[0], per_run);
  step(0); /* the ready list: more rounds of invocations */
  int ran = fact[0];
  assert_true(ran > per_run);
  assert_false(sh_list_empty(&h->ready));
  fact[1] = 1; /* its next invocation returns */
  th_drain(1);
  th_drain(0);
  assert_int_equal(fact[0], ran);
  assert_true(sh_list_empty(&h->stacks));
  assert_true(sh_list_empty(&h->ready));
  th_drain(1);
  sh_stats st = th_stats();
  assert_int_equal(st.asks, st.asks_resolved);
}

/* A put's outcome is exact even when its own actor stops: its notice is
 * either in the mailbox (0) or handed back (an error). PUTTER waits with
 * NPUTS puts at a full mailbox; the target stops (every waiter refused, each
 * waiter's return queued as an event to PUTTER), then PUTTER stops. With
 * max_per_run 1 its run takes only a share of those events before its stop
 * work: the puts whose return has not been handled yet must wait for it
 * (they failed without their notice before). */
#define NPUTS 24
typedef struct putter_locals { sh_future *f[NPUTS]; } putter_locals;
static int put_err[NPUTS], put_back[NPUTS];
static const sh_addr *put_target;

static sh_yield putter_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  putter_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == S0) {
    for (int i = 0; i < NPUTS; i++)
      l->f[i] = sh_put(st, put_target, &sh_msg_new(go, .mode = i)->hdr, SH_FOREVER);
    return sh_suspend(st, S1);
  }
  for (int i = 0; i < NPUTS; i++) {
    put_err[i] = sh_future_error(l->f[i]);
    sh_msg *m = sh_future_take(l->f[i]);
    put_back[i] = sh_msg_is(m, &go_type) && ((go *)m)->mode == i;
    sh_msg_free(m);
  }
  fact[0]++;
  return sh_return(st, NULL);
}
static const sh_actor_class putter_class = {.name = "putter", .size = sizeof(sh_actor),
                                            .locals_size = sizeof(putter_locals),
                                            .notice = putter_notice, .max_per_run = 1};

static sh_yield quiet_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, NULL);
}
static const sh_actor_class narrow_class = {.name = "narrow", .size = sizeof(sh_actor),
                                            .notice = quiet_notice, .notice_capacity = 1};

static void test_put_exact_when_sender_stops(void **state) {
  (void)state;
  put_target = th_spawn(&narrow_class, 1);
  const sh_addr *putter = th_spawn(&putter_class, 0);
  th_mount_all();
  send_go(put_target, 0); /* full: worker 1 is never run */
  send_go(putter, 0);
  th_drain(0);
  sh_mailbox_stats ms;
  assert_int_equal(sh_mailbox_stats_get(put_target, 0, SH_NOTICE, &ms), 0);
  assert_int_equal(ms.waiting, NPUTS);
  assert_int_equal(sh_stop(put_target), 0); /* refuses the waiters */
  assert_int_equal(sh_stop(putter), 0);
  step(0); /* a share of the returns, then the stop work */
  assert_int_equal(fact[0], 0);
  th_drain(0);
  assert_int_equal(fact[0], 1);
  for (int i = 0; i < NPUTS; i++) {
    assert_int_equal(put_err[i], -ESHUTDOWN);
    assert_true(put_back[i]);
  }
  uint32_t gen;
  assert_true(sh_list_empty(&sh_addr_member(putter, 0, &gen)->stacks));
  th_drain(1);
  sh_stats st = th_stats();
  assert_int_equal(st.asks, st.asks_resolved);
}

int main(void) {
  alarm(120);
#define T(f) cmocka_unit_test_setup_teardown(f, setup, th_sys_teardown)
  const struct CMUnitTest tests[] = {
      T(test_ask_stack_endings),
      T(test_suspend_nothing_pending),
      T(test_reentry_bound),
      T(test_ready_stack_deferred),
      T(test_deferred_stack_woken_by_reply),
      T(test_put_exact_when_sender_stops),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
