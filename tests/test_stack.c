/*
 * Unit tests of stacks and futures (core/stack.c), driven single-threaded:
 * a 2-worker system that is never started; the test thread acts as a worker
 * and runs the queues by hand. The subject actor lives on worker 0, the
 * responders it asks on worker 1, so the test decides when each reply comes.
 *
 * Covered: state transitions and locals (zeroed on a new stack, kept across
 * suspends); sh_suspend resumes only when every future completed,
 * sh_suspend_any on the first and, in the same state, keeps the completed
 * ones; futures made by the current invocation survive a state change while
 * seen ones are recycled (their untaken replies freed, taken ones kept);
 * what an ask stack's ending tells the asker (reply, -ENODATA, -EINVAL,
 * -EPROTO, a thrown error, -EDEADLK for a suspend with nothing pending,
 * -ELOOP for a handler whose asks keep failing at once); a stack that keeps
 * being ready at once (puts with room) is deferred to its house's next run
 * after max_per_run invocations, never failed, and replies that find it
 * deferred do not run it; a notice stack returning a
 * reply frees it; replies to asks of a stack that already returned are
 * counted as unknown.
 *
 * Handlers never call cmocka (a failed assert would longjmp out of the
 * runtime): they record into globals, the test asserts afterwards.
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

/* ---- messages ------------------------------------------------------------ */

typedef struct go { sh_msg hdr; int mode; } go;
typedef struct req { sh_msg hdr; int v; } req;
typedef struct pong { sh_msg hdr; int v; } pong;
static int drops; /* pongs freed by the runtime or the test */
static void pong_drop(sh_msg *m) {
  (void)m;
  drops++;
}
SH_MSG_DEFINE(go, SH_NOTICE, 0);
SH_MSG_DEFINE(req, SH_ASK, 0);
SH_MSG_DEFINE_DROP(pong, SH_REPLY, 0, pong_drop);

/* ---- recorded by the handlers -------------------------------------------- */

#define MAX_CALLS 16
static const sh_addr *resp[3]; /* responders, worker 1; reply v = ask v + 1 */
static const sh_addr *dead;    /* a stopped actor: asks to it fail at once */
static const sh_addr *subject; /* worker 0 */
static sh_stack_fn subject_notice_fn, subject_ask_fn;
static int calls;              /* subject handler invocations */
static int states[MAX_CALLS];  /* the stack state at each invocation */
static int client_err, client_v;

/* Facts a handler reports; each test names its own. */
static int fact[8];
static sh_future *futs[4];
static sh_msg *taken;

static void record_call(sh_stack *st) {
  if (calls < MAX_CALLS) states[calls] = sh_stack_state(st);
  calls++;
}

/* ---- actors -------------------------------------------------------------- */

static sh_yield responder_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, &sh_msg_new(pong, .v = sh_stack_msg_as(st, req)->v + 1)->hdr);
}
static const sh_actor_class responder_class = {.name = "responder", .size = sizeof(sh_actor),
                                               .ask = responder_ask};

typedef struct subject_locals {
  sh_future *f[3];
  uint32_t pattern[8];
} subject_locals;

static sh_yield subject_notice(sh_actor *self, sh_stack *st) {
  record_call(st);
  return subject_notice_fn(self, st);
}
static sh_yield subject_ask(sh_actor *self, sh_stack *st) {
  record_call(st);
  return subject_ask_fn(self, st);
}
static const sh_actor_class subject_class = {.name = "subject", .size = sizeof(sh_actor),
                                             .locals_size = sizeof(subject_locals),
                                             .notice = subject_notice, .ask = subject_ask};

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

static sh_future *ask_v(sh_stack *st, const sh_addr *to, int v) {
  return sh_ask(st, to, &sh_msg_new(req, .v = v)->hdr, SH_FOREVER);
}

/* ---- harness ------------------------------------------------------------- */

/* Runs exactly one queued house of worker i, as worker i: there must be one. */
static void step(uint32_t i) { assert_non_null(th_step(i)); }

static uint64_t outstanding(void) { return th_stats().pool_outstanding; }

static void send_go(const sh_addr *to, int mode) {
  assert_int_equal(sh_notice(to, &sh_msg_new(go, .mode = mode)->hdr), 0);
}

/* Sends the subject a notice and runs it. */
static void poke_subject(void) {
  send_go(subject, 0);
  th_drain(0);
}

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

static sh_house *subject_house(void) {
  uint32_t gen;
  return sh_addr_member(subject, 0, &gen);
}

static int setup(void **state) {
  (void)state;
  drops = calls = client_err = client_v = 0;
  memset(states, 0xff, sizeof(states));
  memset(fact, 0, sizeof(fact));
  memset(futs, 0, sizeof(futs));
  taken = NULL;
  th_sys = th_system(2);
  th_act_as(0);
  for (int i = 0; i < 3; i++) resp[i] = th_spawn(&responder_class, 1);
  dead = th_spawn(&responder_class, 1);
  subject = th_spawn(&subject_class, 0);
  sh_stop(dead);
  th_mount_all();
  return 0;
}

/* ---- states and locals --------------------------------------------------- */

enum { S0 = SH_START, S1, S2, S3, S4 };

static bool all_zero(const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != 0) return false;
  return true;
}

static void fill(subject_locals *l, uint32_t seed) {
  for (uint32_t i = 0; i < 8; i++) l->pattern[i] = seed * 0x01000193u + i;
}

static bool filled(const subject_locals *l, uint32_t seed) {
  for (uint32_t i = 0; i < 8; i++)
    if (l->pattern[i] != seed * 0x01000193u + i) return false;
  return true;
}

/* fact[0]: stacks that started with zeroed locals; fact[1]: resumes that
 * found the locals as left. */
static sh_yield locals_fn(sh_actor *self, sh_stack *st) {
  (void)self;
  subject_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case S0:
    fact[0] += all_zero(l, sizeof(*l));
    fill(l, 1);
    l->f[0] = ask_v(st, resp[0], 0);
    return sh_suspend(st, S1);
  case S1:
    fact[1] += filled(l, 1);
    fill(l, 2);
    l->f[0] = ask_v(st, resp[0], 0);
    return sh_suspend(st, S2);
  default:
    fact[1] += filled(l, 2);
    return sh_return(st, NULL);
  }
}

static void test_states_and_locals(void **state) {
  (void)state;
  subject_notice_fn = locals_fn;
  /* Two stacks one after the other: the second gets the first's memory
   * back from the pool, so its locals are zero only if they were cleared. */
  for (int round = 1; round <= 2; round++) {
    poke_subject();
    th_drain(1);
    th_drain(0);
    th_drain(1);
    th_drain(0);
    assert_int_equal(calls, 3 * round);
  }
  assert_int_equal(fact[0], 2);
  assert_int_equal(fact[1], 4);
  const int want[] = {S0, S1, S2, S0, S1, S2};
  assert_memory_equal(states, want, sizeof(want));
  assert_true(sh_list_empty(&subject_house()->stacks));
}

/* ---- suspend: all, any --------------------------------------------------- */

/* Asks resp[0] and resp[1]; fact[0..1]: whether each future was done when
 * the stack resumed in S1. */
static sh_yield all_fn(sh_actor *self, sh_stack *st) {
  (void)self;
  subject_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == S0) {
    for (int i = 0; i < 2; i++) futs[i] = l->f[i] = ask_v(st, resp[i], 10 * i);
    return sh_suspend(st, S1);
  }
  fact[0] = sh_future_done(l->f[0]);
  fact[1] = sh_future_done(l->f[1]);
  fact[2] = sh_future_reply(l->f[0], pong)->v + sh_future_reply(l->f[1], pong)->v;
  return sh_return(st, NULL);
}

static void test_suspend_waits_for_all(void **state) {
  (void)state;
  subject_notice_fn = all_fn;
  poke_subject();
  assert_int_equal(calls, 1);
  step(1); /* resp[0] answers */
  th_drain(0);
  assert_int_equal(calls, 1); /* one of two: still waiting */
  assert_true(sh_future_done(futs[0]));
  assert_false(sh_future_done(futs[1]));
  assert_int_equal(sh_stack_state(SH_LIST_ENTRY(sh_list_first(&subject_house()->stacks), sh_stack, link)), S1);
  step(1); /* resp[1] answers */
  th_drain(0);
  assert_int_equal(calls, 2);
  assert_true(fact[0] && fact[1]);
  assert_int_equal(fact[2], 1 + 11);
  assert_true(sh_list_empty(&subject_house()->stacks));
}

/* Asks three responders and waits for any; counts completions in S1 (same
 * state: the completed futures must stay valid), then returns when all three
 * are in. fact[0]: completions seen at the last resume; fact[1]: sum of the
 * reply values then; fact[2]: pongs freed before that resume. */
static sh_yield any_fn(sh_actor *self, sh_stack *st) {
  (void)self;
  subject_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == S0) {
    for (int i = 0; i < 3; i++) l->f[i] = ask_v(st, resp[i], 10 * i);
    return sh_suspend_any(st, S1);
  }
  int done = 0, sum = 0;
  for (int i = 0; i < 3; i++)
    if (sh_future_done(l->f[i])) {
      done++;
      sum += sh_future_reply(l->f[i], pong)->v;
    }
  fact[0] = done;
  fact[1] = sum;
  fact[2] = drops;
  if (done < 3) return sh_suspend_any(st, S1);
  return sh_return(st, NULL);
}

static void test_suspend_any_resumes_on_each(void **state) {
  (void)state;
  subject_notice_fn = any_fn;
  poke_subject();
  for (int i = 1; i <= 3; i++) {
    step(1);
    th_drain(0);
    assert_int_equal(calls, 1 + i);
    assert_int_equal(fact[0], i);
  }
  assert_int_equal(fact[1], 1 + 11 + 21);
  assert_int_equal(fact[2], 0); /* nothing recycled while it stayed in S1 */
  assert_int_equal(drops, 3);   /* all freed when it returned */
}

/* sh_suspend_any, then sh_suspend in another state on the rest. */
static sh_yield any_then_all_fn(sh_actor *self, sh_stack *st) {
  (void)self;
  subject_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case S0:
    for (int i = 0; i < 2; i++) l->f[i] = ask_v(st, resp[i], 0);
    return sh_suspend_any(st, S1);
  case S1:
    fact[0] = sh_future_done(l->f[0]) + 2 * sh_future_done(l->f[1]);
    return sh_suspend(st, S2);
  default:
    fact[1] = sh_future_done(l->f[1]);
    return sh_return(st, NULL);
  }
}

static void test_suspend_any_then_all(void **state) {
  (void)state;
  subject_notice_fn = any_then_all_fn;
  poke_subject();
  step(1);
  th_drain(0);
  assert_int_equal(calls, 2);
  assert_int_equal(fact[0], 1); /* only the first */
  assert_int_equal(drops, 1);   /* S1 -> S2 recycled the seen future and its reply */
  step(1);
  th_drain(0);
  assert_int_equal(calls, 3);
  assert_int_equal(fact[1], 1);
  assert_true(sh_list_empty(&subject_house()->stacks));
}

/* ---- future lifetime ----------------------------------------------------- */

/* S0: ask resp[0]. S1: leave its reply; ask the dead actor (fails at once)
 * and move on: the seen future goes (its reply freed), the new one stays.
 * S2: the new one is readable; ask resp[0] again. S3: take the reply, ask
 * the dead one, move on. S4: the taken reply is intact. */
static sh_yield lifetime_fn(sh_actor *self, sh_stack *st) {
  (void)self;
  subject_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case S0:
    l->f[0] = ask_v(st, resp[0], 1);
    return sh_suspend(st, S1);
  case S1:
    fact[0] = drops;
    l->f[1] = ask_v(st, dead, 0);
    fact[6] = (int)outstanding();
    return sh_suspend(st, S2);
  case S2:
    fact[1] = drops;
    fact[7] = fact[6] - (int)outstanding();
    fact[2] = sh_future_done(l->f[1]) && sh_future_error(l->f[1]) == -ESHUTDOWN;
    l->f[0] = ask_v(st, resp[0], 5);
    return sh_suspend(st, S3);
  case S3:
    taken = sh_future_take(l->f[0]);
    fact[3] = sh_future_msg(l->f[0]) == NULL;
    l->f[1] = ask_v(st, dead, 0);
    return sh_suspend(st, S4);
  default:
    fact[4] = drops;
    fact[5] = sh_msg_is(taken, &pong_type) && ((pong *)taken)->v == 6;
    return sh_return(st, NULL);
  }
}

static void test_future_lifetime(void **state) {
  (void)state;
  subject_notice_fn = lifetime_fn;
  uint64_t before = outstanding();
  poke_subject();
  th_drain(1);
  th_drain(0); /* S1, then S2 at once */
  assert_int_equal(calls, 3);
  assert_int_equal(fact[0], 0);
  assert_int_equal(fact[1], 1); /* the untaken reply of S0's future was freed */
  assert_true(fact[2]);         /* S1's future outlived the move to S2... */
  assert_int_equal(fact[7], 2); /* ...only S0's future and its reply were freed */
  th_drain(1);
  th_drain(0); /* S3, then S4 at once */
  assert_int_equal(calls, 5);
  assert_true(fact[3]);
  assert_int_equal(fact[4], 1); /* the taken reply was not freed with its future */
  assert_true(fact[5]);
  assert_true(sh_list_empty(&subject_house()->stacks));
  assert_non_null(taken);
  sh_msg_free(taken);
  assert_int_equal(drops, 2);
  assert_int_equal(outstanding(), before);
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

/* ---- what is freed ------------------------------------------------------- */

static sh_yield notice_returns_reply_fn(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, &sh_msg_new(pong, .v = 0)->hdr);
}

static void test_notice_return_frees_reply(void **state) {
  (void)state;
  subject_notice_fn = notice_returns_reply_fn;
  uint64_t before = outstanding();
  poke_subject();
  assert_int_equal(drops, 1);
  assert_int_equal(outstanding(), before);
}

/* Returns at once with an ask still out. */
static sh_yield return_pending_fn(sh_actor *self, sh_stack *st) {
  (void)self;
  ask_v(st, resp[0], 0);
  return sh_return(st, NULL);
}

static void test_late_reply_is_unknown(void **state) {
  (void)state;
  subject_notice_fn = return_pending_fn;
  uint64_t unknown = th_stats().replies_unknown;
  poke_subject();
  assert_true(sh_list_empty(&subject_house()->stacks));
  assert_int_equal(sh_futtable_count(&subject_house()->futures), 0);
  th_drain(1);
  assert_int_equal(drops, 0);
  th_drain(0);
  assert_int_equal(th_stats().replies_unknown, unknown + 1);
  assert_int_equal(drops, 1); /* the late reply was freed */
  /* Given up with its stack, the ask still counts as resolved, once. */
  sh_stats st = th_stats();
  assert_int_equal(st.asks, st.asks_resolved);
}

int main(void) {
  alarm(120);
#define T(f) cmocka_unit_test_setup_teardown(f, setup, th_sys_teardown)
  const struct CMUnitTest tests[] = {
      T(test_states_and_locals),
      T(test_suspend_waits_for_all),
      T(test_suspend_any_resumes_on_each),
      T(test_suspend_any_then_all),
      T(test_future_lifetime),
      T(test_ask_stack_endings),
      T(test_suspend_nothing_pending),
      T(test_reentry_bound),
      T(test_ready_stack_deferred),
      T(test_deferred_stack_woken_by_reply),
      T(test_put_exact_when_sender_stops),
      T(test_notice_return_frees_reply),
      T(test_late_reply_is_unknown),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
