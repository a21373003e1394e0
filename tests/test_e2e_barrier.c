/*
 * End-to-end tests of barriers on the production backend (epoll, pthreads),
 * through the public API only. A barrier message (its type flagged
 * SH_MSG_BARRIER, or accepted by the class's barrier predicate) runs a stack
 * during which its actor takes no further asks or notices; replies still
 * flow, so the barrier stack can wait on asks of its own; when it returns or
 * throws, the held messages are handled in arrival order (asks before
 * notices: the mailboxes' dispatch order).
 *
 * The scenario, with no timing in it: a driver D (worker 1) sends to the
 * barrier actor B (worker 0), from one stack invocation: the barrier ask X,
 * ask a1, notice n1, ask a2, notice n2. X's stack asks D for help and
 * suspends. D can only answer after that invocation ended, so a1..n2 are in
 * B's mailboxes before X resumes; D's help stack also sends notice n3, which
 * certainly arrives while X is suspended. B logs what it handles; the log
 * must be exactly X started, X resumed, a1, a2, n1, n2, n3.
 *
 * Actors record (CHECK() counts failures, cmocka is never called on a
 * worker); main asserts after sh_system_shutdown.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <unistd.h>

#include <stackhouse/stackhouse.h>

#include "support/harness.h"

#define WATCHDOG_S 120

/* ---- messages -------------------------------------------------------------- */

/* main -> driver: the scenario's target. */
typedef struct kick_msg { sh_msg hdr; const sh_addr *target; } kick_msg;
/* An ask; `exclusive` is what the predicate class's barrier looks at. */
typedef struct excl_ask { sh_msg hdr; long v; int exclusive; } excl_ask;
typedef excl_ask barrier_ask; /* the same, its type flagged */
typedef struct num_notice { sh_msg hdr; long v; } num_notice;
typedef num_notice barrier_notice;
SH_MSG_DEFINE(kick_msg, SH_NOTICE, 0);
SH_MSG_DEFINE(excl_ask, SH_ASK, 0);
SH_MSG_DEFINE(barrier_ask, SH_ASK, SH_MSG_BARRIER);
SH_MSG_DEFINE(num_notice, SH_NOTICE, 0);
SH_MSG_DEFINE(barrier_notice, SH_NOTICE, SH_MSG_BARRIER);
/* Replies: num_reply (support/harness.h). */

/* The barrier message carries v = X; the others their number. */
#define X 1000L
#define HELP 2000L
/* Log entries of B. */
enum { L_X_START = 1, L_X_RESUME = 2 };
#define L_ASK(v) (100 + (int)(v))
#define L_NOTICE(v) (200 + (int)(v))

static sh_msg *ask_msg(const sh_msg_type *t, long v, int exclusive) {
  excl_ask *a = (excl_ask *)sh_msg_alloc(t);
  if (a != NULL) {
    a->v = v;
    a->exclusive = exclusive;
  }
  return &a->hdr;
}

static sh_msg *notice_msg(const sh_msg_type *t, long v) {
  num_notice *n = (num_notice *)sh_msg_alloc(t);
  if (n != NULL) n->v = v;
  return &n->hdr;
}

/* ---- the barrier actor B ----------------------------------------------------- */

typedef enum x_mode {
  X_WAIT_REPLY, /* X asks the driver for help, resumes, replies */
  X_WAIT_THROW, /* the same, then throws */
  X_AT_ONCE,    /* X replies at once */
} x_mode;

#define X_ERROR (-EXDEV)
#define LOG_MAX 16

typedef struct b_result {
  int log[LOG_MAX];
  int nlog;
  int log_at_resume; /* entries when X resumed: only X's start */
} b_result;

typedef struct b_cfg {
  x_mode mode;
  const sh_addr *helper; /* the driver */
  int notices;           /* notices to expect; the last one ends B's part */
  b_result *res;
} b_cfg;

typedef struct barrier_actor { sh_actor base; b_cfg cfg; int noticed; } barrier_actor;
typedef struct b_locals { sh_future *f; } b_locals;
enum { B_RESUMED = 1 };

TH_CFG_INIT(b_init, barrier_actor, b_cfg);

static void b_log(barrier_actor *b, int what) {
  b_result *r = b->cfg.res;
  if (r->nlog < LOG_MAX) r->log[r->nlog++] = what;
}

/* X's stack: the barrier. */
static sh_yield x_stack(barrier_actor *b, sh_stack *st) {
  b_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    b_log(b, L_X_START);
    if (b->cfg.mode == X_AT_ONCE) return th_reply_with(st, X + 1);
    l->f = sh_ask(st, b->cfg.helper, ask_msg(&excl_ask_type, HELP, 0), SH_FOREVER);
    CHECK(l->f != NULL);
    return sh_suspend(st, B_RESUMED);
  }
  /* The help reply got through the barrier. */
  b->cfg.res->log_at_resume = b->cfg.res->nlog;
  b_log(b, L_X_RESUME);
  CHECK(sh_future_error(l->f) == 0);
  if (b->cfg.mode == X_WAIT_THROW) return sh_throw(st, X_ERROR);
  return th_reply_with(st, X + 1);
}

static sh_yield b_ask(sh_actor *self, sh_stack *st) {
  barrier_actor *b = (barrier_actor *)self;
  long v = sh_stack_msg_as(st, excl_ask)->v;
  if (v == X) return x_stack(b, st);
  b_log(b, L_ASK(v));
  return th_reply_with(st, v + 1);
}

static sh_yield b_notice(sh_actor *self, sh_stack *st) {
  barrier_actor *b = (barrier_actor *)self;
  long v = sh_stack_msg_as(st, num_notice)->v;
  if (v == X) return x_stack(b, st);
  b_log(b, L_NOTICE(v));
  if (++b->noticed == b->cfg.notices) th_done(self);
  return sh_return(st, NULL);
}

/* The predicate class: asks marked exclusive are barriers. */
static bool b_is_barrier(sh_actor *self, const sh_msg *m) {
  (void)self;
  return sh_msg_is(m, &excl_ask_type) && ((const excl_ask *)m)->exclusive;
}

static const sh_actor_class b_flag_class = {
    .name = "barrier_by_flag", .size = sizeof(barrier_actor), .locals_size = sizeof(b_locals),
    .init = b_init, .ask = b_ask, .notice = b_notice};
static const sh_actor_class b_pred_class = {
    .name = "barrier_by_predicate", .size = sizeof(barrier_actor),
    .locals_size = sizeof(b_locals), .init = b_init, .ask = b_ask, .notice = b_notice,
    .barrier = b_is_barrier};

/* ---- the driver D ------------------------------------------------------------- */

typedef enum d_send {
  D_FLAGGED_ASK,    /* X is a barrier_ask */
  D_EXCLUSIVE_ASK,  /* X is an excl_ask with exclusive = 1 (predicate) */
  D_FLAGGED_NOTICE, /* X is a barrier_notice; no asks */
} d_send;

typedef struct d_result {
  int x_error;
  long x_value;
  int a_error[2];
  long a_value[2];
  int invocations;
} d_result;

typedef struct d_cfg {
  d_send send;
  bool help_sends_n3; /* the help stack sends notice 3 to B */
  d_result *res;
} d_cfg;

typedef struct driver { sh_actor base; d_cfg cfg; const sh_addr *b; } driver;
typedef struct d_locals { sh_future *x, *a[2]; } d_locals;
enum { D_GOT = 1 };

TH_CFG_INIT(d_init, driver, d_cfg);

static void outcome(const sh_future *f, int *err, long *v) {
  *err = sh_future_error(f);
  const num_reply *r = sh_future_reply(f, num_reply);
  *v = r != NULL ? r->v : -1;
}

/* One invocation sends everything, so the help ask (answered by another
 * stack of this actor, hence after this invocation) finds it all sent. */
static sh_yield d_notice(sh_actor *self, sh_stack *st) {
  driver *d = (driver *)self;
  d_locals *l = sh_stack_locals(st);
  d_result *r = d->cfg.res;
  r->invocations++;
  if (sh_stack_state(st) == SH_START) {
    d->b = sh_stack_msg_as(st, kick_msg)->target;
    if (d->cfg.send == D_FLAGGED_NOTICE) {
      CHECK(sh_notice(d->b, notice_msg(&barrier_notice_type, X)) == 0);
      CHECK(sh_notice(d->b, notice_msg(&num_notice_type, 1)) == 0);
      CHECK(sh_notice(d->b, notice_msg(&num_notice_type, 2)) == 0);
      return sh_return(st, NULL);
    }
    bool flagged = d->cfg.send == D_FLAGGED_ASK;
    l->x = sh_ask(st, d->b, ask_msg(flagged ? &barrier_ask_type : &excl_ask_type, X, !flagged), SH_FOREVER);
    l->a[0] = sh_ask(st, d->b, ask_msg(&excl_ask_type, 1, 0), SH_FOREVER);
    CHECK(sh_notice(d->b, notice_msg(&num_notice_type, 1)) == 0);
    l->a[1] = sh_ask(st, d->b, ask_msg(&excl_ask_type, 2, 0), SH_FOREVER);
    CHECK(sh_notice(d->b, notice_msg(&num_notice_type, 2)) == 0);
    CHECK(l->x != NULL && l->a[0] != NULL && l->a[1] != NULL);
    return sh_suspend(st, D_GOT);
  }
  outcome(l->x, &r->x_error, &r->x_value);
  for (int i = 0; i < 2; i++) outcome(l->a[i], &r->a_error[i], &r->a_value[i]);
  th_done(self);
  return sh_return(st, NULL);
}

/* X's help: runs while X is suspended. */
static sh_yield d_ask(sh_actor *self, sh_stack *st) {
  driver *d = (driver *)self;
  CHECK(sh_stack_msg_as(st, excl_ask)->v == HELP);
  if (d->cfg.help_sends_n3) CHECK(sh_notice(d->b, notice_msg(&num_notice_type, 3)) == 0);
  return th_reply_with(st, HELP + 1);
}

static const sh_actor_class driver_class = {
    .name = "driver", .size = sizeof(driver), .locals_size = sizeof(d_locals),
    .init = d_init, .notice = d_notice, .ask = d_ask};

/* ---- scenarios -------------------------------------------------------------- */

typedef struct scenario {
  const sh_actor_class *b_class;
  x_mode mode;
  d_send send;
  uint32_t b_worker, d_worker;
} scenario;

/* Runs one scenario; B expects `notices` notices. */
static void run_scenario(const scenario *sc, int notices, b_result *br, d_result *dr) {
  bool asks = sc->send != D_FLAGGED_NOTICE;
  bool helped = sc->mode != X_AT_ONCE;
  /* B's last notice, and the driver's stack when it waits for replies. */
  sh_system *sys = th_env(2, asks ? 2 : 1);
  d_cfg dc = {.send = sc->send, .help_sends_n3 = helped, .res = dr};
  const sh_addr *d = th_spawn_on(sys, &driver_class, &dc, sc->d_worker);
  b_cfg bc = {.mode = sc->mode, .helper = d, .notices = notices, .res = br};
  const sh_addr *b = th_spawn_on(sys, sc->b_class, &bc, sc->b_worker);
  assert_int_equal(sh_notice(d, &sh_msg_new(kick_msg, .target = b)->hdr), 0);
  th_run(sys);
  sh_stats st = th_end(sys);
  assert_int_equal(st.replies_unknown, 0);
  assert_int_equal(st.dropped_stopped, 0);
}

static void assert_log(const b_result *r, const int *want, int n) {
  for (int i = 0; i < r->nlog && i < n; i++)
    if (r->log[i] != want[i]) fprintf(stderr, "log[%d] = %d, want %d\n", i, r->log[i], want[i]);
  assert_int_equal(r->nlog, n);
  for (int i = 0; i < n; i++) assert_int_equal(r->log[i], want[i]);
}

static void assert_held_asks_answered(const d_result *dr) {
  for (int i = 0; i < 2; i++) {
    assert_int_equal(dr->a_error[i], 0);
    assert_int_equal(dr->a_value[i], i + 2);
  }
  assert_int_equal(dr->invocations, 2);
}

/* X suspended on the help ask, everything else held, then arrival order. */
static const int held_order[] = {L_X_START, L_X_RESUME, L_ASK(1), L_ASK(2),
                                 L_NOTICE(1), L_NOTICE(2), L_NOTICE(3)};

static void held_while_suspended(const sh_actor_class *c, d_send send) {
  scenario sc = {.b_class = c, .mode = X_WAIT_REPLY, .send = send, .b_worker = 0, .d_worker = 1};
  b_result br = {0};
  d_result dr = {0};
  run_scenario(&sc, 3, &br, &dr);
  assert_log(&br, held_order, 7);
  assert_int_equal(br.log_at_resume, 1); /* nothing but X ran before it resumed */
  assert_int_equal(dr.x_error, 0);
  assert_int_equal(dr.x_value, X + 1);
  assert_held_asks_answered(&dr);
}

static void test_flagged_barrier_holds_asks_and_notices(void **state) {
  (void)state;
  held_while_suspended(&b_flag_class, D_FLAGGED_ASK);
}

static void test_predicate_barrier_holds_asks_and_notices(void **state) {
  (void)state;
  held_while_suspended(&b_pred_class, D_EXCLUSIVE_ASK);
}

/* A control: the same exclusive ask to the same placement (one worker, so
 * B first runs with everything queued), once to the predicate class and
 * once to a class without it. Only the predicate makes the difference. */
static void exclusive_on_one_worker(const sh_actor_class *c, const int *want) {
  scenario sc = {.b_class = c, .mode = X_WAIT_REPLY, .send = D_EXCLUSIVE_ASK,
                 .b_worker = 0, .d_worker = 0};
  b_result br = {0};
  d_result dr = {0};
  run_scenario(&sc, 3, &br, &dr);
  assert_log(&br, want, 7);
  assert_held_asks_answered(&dr);
}

static void test_predicate_is_what_holds(void **state) {
  (void)state;
  exclusive_on_one_worker(&b_pred_class, held_order);
  const int unheld[] = {L_X_START, L_ASK(1), L_ASK(2), L_NOTICE(1), L_NOTICE(2),
                        L_X_RESUME, L_NOTICE(3)};
  exclusive_on_one_worker(&b_flag_class, unheld);
}

static void test_barrier_released_when_its_stack_throws(void **state) {
  (void)state;
  scenario sc = {.b_class = &b_flag_class, .mode = X_WAIT_THROW, .send = D_FLAGGED_ASK,
                 .b_worker = 0, .d_worker = 1};
  b_result br = {0};
  d_result dr = {0};
  run_scenario(&sc, 3, &br, &dr);
  assert_log(&br, held_order, 7);
  assert_int_equal(dr.x_error, X_ERROR);
  assert_held_asks_answered(&dr);
}

static void test_barrier_notice_holds_notices(void **state) {
  (void)state;
  scenario sc = {.b_class = &b_flag_class, .mode = X_WAIT_REPLY, .send = D_FLAGGED_NOTICE,
                 .b_worker = 0, .d_worker = 1};
  b_result br = {0};
  d_result dr = {0};
  run_scenario(&sc, 3, &br, &dr);
  const int want[] = {L_X_START, L_X_RESUME, L_NOTICE(1), L_NOTICE(2), L_NOTICE(3)};
  assert_log(&br, want, 5);
  assert_int_equal(br.log_at_resume, 1);
}

/* A barrier whose stack completes at once holds nothing. Same worker: the
 * driver's invocation puts everything before B first runs, so B sees it all
 * in one run and the order is exact; a barrier left set would hold a1..n2
 * forever (the watchdog). */
static void test_barrier_completing_at_once_holds_nothing(void **state) {
  (void)state;
  scenario sc = {.b_class = &b_flag_class, .mode = X_AT_ONCE, .send = D_FLAGGED_ASK,
                 .b_worker = 0, .d_worker = 0};
  b_result br = {0};
  d_result dr = {0};
  run_scenario(&sc, 2, &br, &dr);
  const int want[] = {L_X_START, L_ASK(1), L_ASK(2), L_NOTICE(1), L_NOTICE(2)};
  assert_log(&br, want, 5);
  assert_int_equal(dr.x_error, 0);
  assert_int_equal(dr.x_value, X + 1);
  assert_held_asks_answered(&dr);
}

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_flagged_barrier_holds_asks_and_notices),
      cmocka_unit_test(test_predicate_barrier_holds_asks_and_notices),
      cmocka_unit_test(test_predicate_is_what_holds),
      cmocka_unit_test(test_barrier_released_when_its_stack_throws),
      cmocka_unit_test(test_barrier_notice_holds_notices),
      cmocka_unit_test(test_barrier_completing_at_once_holds_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
