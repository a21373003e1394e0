/*
 * End-to-end tests of time on the production backend (epoll, pthreads),
 * through the public API only:
 *   - ask timeouts: an ask not answered in time fails with -ETIMEDOUT
 *     (stats.asks_timed_out), and its late reply is dropped
 *     (stats.replies_unknown); an ask answered in time is not failed;
 *   - actor timers: a one-shot fires once with its argument; a periodic
 *     fires until sh_timer_cancel and never after; cancelling an unknown or
 *     fired timer is -ENOENT; sh_timer_start off an actor or on a class
 *     without a timeout handler is -EINVAL; live timers at shutdown are freed.
 *
 * No duration is asserted: a timer test only checks what fired and how
 * often, and a "further wait" is another timer whose firing ends the run.
 * Actors record what they saw (CHECK() counts failures, cmocka is never
 * called on a worker); main asserts after sh_system_shutdown.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <unistd.h>

#include <stackhouse/stackhouse.h>

#include "support/harness.h"

#define WATCHDOG_S 120
/* Asks that must not time out use this; far beyond any plausible stall. */
#define NO_EXPIRY_MS 60000u

/* ---- messages -------------------------------------------------------------- */

/* main -> asker: ask `target` with v. */
typedef struct kick_msg { sh_msg hdr; long v; const sh_addr *target; } kick_msg;
/* The same, but its stack is a barrier: the asker takes no asks until it ends. */
typedef kick_msg hold_kick;
typedef struct late_sent { sh_msg hdr; } late_sent;
SH_MSG_DEFINE(kick_msg, SH_NOTICE, 0);
SH_MSG_DEFINE(hold_kick, SH_NOTICE, SH_MSG_BARRIER);
SH_MSG_DEFINE(late_sent, SH_NOTICE, 0);
/* Asks and replies: num_ask, num_reply (support/harness.h). */

/* ---- ask timeouts ---------------------------------------------------------- */

/*
 * The late-reply chain, with no timing in it:
 *   asker (w0, a barrier stack) --ask, 20 ms--> slow (w1) --ask--> relay (w0)
 *   --ask--> asker.
 * The last ask is held by the asker's barrier, and the barrier stack waits
 * on the first ask: only the timeout ends it. Then the asker answers the
 * held ask, the relay and slow answer in turn, and slow's reply reaches an
 * asker that no longer waits for it. Slow then tells the asker (late_sent),
 * which ends the run.
 */
enum { LOG_TIMED_OUT = 1, LOG_ANSWERED_HELD = 2, LOG_LATE_SENT = 3 };

typedef struct asker_result {
  int invocations;
  int error;
  bool reply_null;
  long value;
  int log[8]; /* the asker's handlers, in order */
  int nlog;
} asker_result;

typedef struct asker_cfg {
  uint32_t timeout_ms;
  asker_result *res;
} asker_cfg;

typedef struct asker { sh_actor base; asker_cfg cfg; } asker;
typedef struct asker_locals { sh_future *f; } asker_locals;
enum { A_GOT = 1 };

TH_CFG_INIT(asker_init, asker, asker_cfg);

static void asker_log(asker *a, int what) {
  asker_result *r = a->cfg.res;
  if (r->nlog < 8) r->log[r->nlog++] = what;
}

/* The kick (plain or barrier): one ask with the configured timeout. Ends
 * the run itself only when it is not waiting for a late_sent. */
static sh_yield asker_notice(sh_actor *self, sh_stack *st) {
  asker *a = (asker *)self;
  asker_result *r = a->cfg.res;
  if (sh_msg_is(sh_stack_msg(st), &late_sent_type)) {
    asker_log(a, LOG_LATE_SENT);
    th_done(self);
    return sh_return(st, NULL);
  }
  asker_locals *l = sh_stack_locals(st);
  r->invocations++;
  if (sh_stack_state(st) == SH_START) {
    const kick_msg *k = sh_stack_msg_as(st, kick_msg);
    l->f = sh_ask(st, k->target, th_new_ask(k->v), a->cfg.timeout_ms);
    CHECK(l->f != NULL && !sh_future_done(l->f));
    return sh_suspend(st, A_GOT);
  }
  r->error = sh_future_error(l->f);
  const num_reply *rep = sh_future_reply(l->f, num_reply);
  r->reply_null = rep == NULL;
  r->value = rep != NULL ? rep->v : 0;
  if (r->error == -ETIMEDOUT) asker_log(a, LOG_TIMED_OUT);
  if (!sh_msg_is(sh_stack_msg(st), &hold_kick_type)) th_done(self);
  return sh_return(st, NULL);
}

/* Answers at once: in the late-reply chain, the ask its barrier held. */
static sh_yield asker_ask(sh_actor *self, sh_stack *st) {
  asker_log((asker *)self, LOG_ANSWERED_HELD);
  return th_reply_with(st, sh_stack_msg_as(st, num_ask)->v + 1);
}

static const sh_actor_class asker_class = {
    .name = "asker", .size = sizeof(asker), .locals_size = sizeof(asker_locals),
    .init = asker_init, .notice = asker_notice, .ask = asker_ask};

/* Servers: echo (v + 1), or relay (ask `next`, answer its reply + 10, then
 * notice `notify` if set). */
typedef struct server_cfg {
  const sh_addr *next;
  const sh_addr *notify;
} server_cfg;

typedef struct server { sh_actor base; server_cfg cfg; } server;
typedef struct server_locals { sh_future *f; } server_locals;
enum { S_RESUMED = 1 };

TH_CFG_INIT(server_init, server, server_cfg);

static sh_yield server_ask(sh_actor *self, sh_stack *st) {
  server *s = (server *)self;
  server_locals *l = sh_stack_locals(st);
  long v = sh_stack_msg_as(st, num_ask)->v;
  if (s->cfg.next == NULL) return th_reply_with(st, v + 1);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_ask(st, s->cfg.next, th_new_ask(v), SH_FOREVER);
    CHECK(l->f != NULL);
    return sh_suspend(st, S_RESUMED);
  }
  CHECK(sh_future_error(l->f) == 0);
  const num_reply *rep = sh_future_reply(l->f, num_reply);
  sh_yield y = th_reply_with(st, rep != NULL ? rep->v + 10 : -1);
  /* Sent after the reply: the run cannot end before the late reply is out. */
  if (s->cfg.notify != NULL) CHECK(sh_notice(s->cfg.notify, &sh_msg_new(late_sent)->hdr) == 0);
  return y;
}

static const sh_actor_class server_class = {
    .name = "server", .size = sizeof(server), .locals_size = sizeof(server_locals),
    .init = server_init, .ask = server_ask};

static const sh_addr *spawn_server(sh_system *sys, const sh_addr *next, const sh_addr *notify,
                                   uint32_t w) {
  server_cfg c = {.next = next, .notify = notify};
  return th_spawn_on(sys, &server_class, &c, w);
}

static void test_ask_timeout_then_late_reply_dropped(void **state) {
  (void)state;
  sh_system *sys = th_env(2, 1);
  asker_result res = {0};
  asker_cfg ac = {.timeout_ms = 20, .res = &res};
  const sh_addr *a = th_spawn_on(sys, &asker_class, &ac, 0);
  const sh_addr *relay = spawn_server(sys, a, NULL, 0);
  const sh_addr *slow = spawn_server(sys, relay, a, 1);
  assert_int_equal(sh_notice(a, &sh_msg_new(hold_kick, .v = 1, .target = slow)->hdr), 0);
  th_run(sys);
  sh_stats st = th_end(sys);

  assert_int_equal(res.error, -ETIMEDOUT);
  assert_true(res.reply_null);
  assert_int_equal(res.invocations, 2);
  /* The held ask was answered only after the timeout, and the late reply
   * was sent only after that (it is counted at the latest by the shutdown's
   * drain, which the stats are read after). */
  assert_int_equal(res.nlog, 3);
  assert_int_equal(res.log[0], LOG_TIMED_OUT);
  assert_int_equal(res.log[1], LOG_ANSWERED_HELD);
  assert_int_equal(res.log[2], LOG_LATE_SENT);
  assert_int_equal(st.asks_timed_out, 1);
  assert_int_equal(st.replies_unknown, 1);
}

/* Asks with a timeout, answered in time from both workers: none fails, no
 * reply is dropped, every timeout node is freed (pool_outstanding). */
static void test_ask_answered_in_time_is_not_failed(void **state) {
  (void)state;
  enum { N = 4 };
  sh_system *sys = th_env(2, N);
  asker_result res[N] = {{0}};
  for (int i = 0; i < N; i++) {
    asker_cfg ac = {.timeout_ms = NO_EXPIRY_MS, .res = &res[i]};
    const sh_addr *a = th_spawn_on(sys, &asker_class, &ac, (uint32_t)i % 2);
    const sh_addr *echo = spawn_server(sys, NULL, NULL, (uint32_t)(i / 2) % 2);
    assert_int_equal(sh_notice(a, &sh_msg_new(kick_msg, .v = 10 * i, .target = echo)->hdr), 0);
  }
  th_run(sys);
  sh_stats st = th_end(sys);
  for (int i = 0; i < N; i++) {
    assert_int_equal(res[i].error, 0);
    assert_int_equal(res[i].value, 10 * i + 1);
    assert_int_equal(res[i].invocations, 2);
  }
  assert_int_equal(st.asks_timed_out, 0);
  assert_int_equal(st.replies_unknown, 0);
}

/* ---- actor timers ----------------------------------------------------------- */

typedef enum timer_mode {
  TM_ONE_SHOT,      /* one-shot; then a sentinel */
  TM_PERIODIC,      /* periodic; cancelled at its 5th tick; then a sentinel */
  TM_CANCEL_EARLY,  /* one-shot cancelled before it fires; then a sentinel */
  TM_LIVE_AT_END,   /* periodic and a far one-shot still live when the run ends */
} timer_mode;

#define PERIODIC_TICKS 5

typedef struct timer_result {
  int start_rc;
  int fired;          /* the main timer's callbacks */
  int bad_arg;        /* callbacks with the wrong argument */
  int fired_at_end;   /* `fired` when the sentinel fired */
  int sentinel;       /* the sentinel's callbacks */
  int cancel_rc[3];   /* the mode's sh_timer_cancel results */
} timer_result;

typedef struct timer_cfg {
  timer_mode mode;
  timer_result *res;
} timer_cfg;

typedef struct ticker {
  sh_actor base;
  timer_cfg cfg;
  uint64_t main_id, sentinel_id;
} ticker;

/* Distinct addresses handed to the timers as their argument. */
static int g_main_arg, g_sentinel_arg;

TH_CFG_INIT(ticker_init, ticker, timer_cfg);

/* The "further wait": a one-shot whose firing ends the run. */
static void start_sentinel(ticker *t, uint64_t delay_ms) {
  CHECK(sh_timer_start(&t->base, delay_ms, 0, &g_sentinel_arg, &t->sentinel_id) == 0);
  CHECK(t->sentinel_id != t->main_id);
}

static sh_yield ticker_notice(sh_actor *self, sh_stack *st) {
  ticker *t = (ticker *)self;
  timer_result *r = t->cfg.res;
  switch (t->cfg.mode) {
  case TM_ONE_SHOT:
    r->start_rc = sh_timer_start(self, 5, 0, &g_main_arg, &t->main_id);
    break;
  case TM_PERIODIC:
    r->start_rc = sh_timer_start(self, 1, 2, &g_main_arg, &t->main_id);
    break;
  case TM_CANCEL_EARLY:
    r->start_rc = sh_timer_start(self, 20, 0, &g_main_arg, &t->main_id);
    r->cancel_rc[0] = sh_timer_cancel(self, t->main_id);
    r->cancel_rc[1] = sh_timer_cancel(self, t->main_id);
    r->cancel_rc[2] = sh_timer_cancel(self, t->main_id + 1000);
    start_sentinel(t, 60);
    break;
  case TM_LIVE_AT_END:
    r->start_rc = sh_timer_start(self, 1, 1, &g_main_arg, &t->main_id);
    CHECK(sh_timer_start(self, 600000, 0, &g_sentinel_arg, &t->sentinel_id) == 0);
    break;
  }
  return sh_return(st, NULL);
}

static void main_timer_fired(ticker *t) {
  timer_result *r = t->cfg.res;
  r->fired++;
  switch (t->cfg.mode) {
  case TM_ONE_SHOT:
    r->cancel_rc[0] = sh_timer_cancel(&t->base, t->main_id); /* already fired */
    start_sentinel(t, 30);
    break;
  case TM_PERIODIC:
    if (r->fired != PERIODIC_TICKS) break;
    r->cancel_rc[0] = sh_timer_cancel(&t->base, t->main_id);
    r->cancel_rc[1] = sh_timer_cancel(&t->base, t->main_id);
    start_sentinel(t, 50);
    break;
  case TM_CANCEL_EARLY: break;
  case TM_LIVE_AT_END:
    if (r->fired == 1) th_done(&t->base); /* both timers are still live */
    break;
  }
}

static void ticker_timeout(sh_actor *self, uint64_t id, void *arg) {
  ticker *t = (ticker *)self;
  timer_result *r = t->cfg.res;
  if (id == t->main_id) {
    r->bad_arg += arg != &g_main_arg;
    main_timer_fired(t);
  } else if (id == t->sentinel_id) {
    r->bad_arg += arg != &g_sentinel_arg;
    r->sentinel++;
    r->fired_at_end = r->fired;
    th_done(self);
  } else {
    CHECK(!"a timer fired that was never started");
  }
}

static const sh_actor_class ticker_class = {
    .name = "ticker", .size = sizeof(ticker), .init = ticker_init,
    .notice = ticker_notice, .timeout = ticker_timeout};

static void run_ticker(timer_mode mode, timer_result *res) {
  sh_system *sys = th_env(2, 1);
  timer_cfg tc = {.mode = mode, .res = res};
  const sh_addr *a = th_spawn_on(sys, &ticker_class, &tc, 1);
  assert_int_equal(sh_notice(a, &sh_msg_new(kick_msg, .v = 0)->hdr), 0);
  th_run(sys);
  th_end(sys);
  assert_int_equal(res->start_rc, 0);
  assert_int_equal(res->bad_arg, 0);
}

static void test_one_shot_fires_once_with_its_arg(void **state) {
  (void)state;
  timer_result res = {0};
  run_ticker(TM_ONE_SHOT, &res);
  assert_int_equal(res.fired, 1);
  assert_int_equal(res.sentinel, 1);
  assert_int_equal(res.cancel_rc[0], -ENOENT); /* a fired one-shot is gone */
}

static void test_periodic_fires_until_cancelled(void **state) {
  (void)state;
  timer_result res = {0};
  run_ticker(TM_PERIODIC, &res);
  assert_int_equal(res.cancel_rc[0], 0);
  assert_int_equal(res.cancel_rc[1], -ENOENT);
  assert_int_equal(res.fired_at_end, PERIODIC_TICKS); /* none over the further wait */
  assert_int_equal(res.fired, PERIODIC_TICKS);
  assert_int_equal(res.sentinel, 1);
}

static void test_cancel_before_fire_and_unknown(void **state) {
  (void)state;
  timer_result res = {0};
  run_ticker(TM_CANCEL_EARLY, &res);
  assert_int_equal(res.cancel_rc[0], 0);
  assert_int_equal(res.cancel_rc[1], -ENOENT); /* cancelled already */
  assert_int_equal(res.cancel_rc[2], -ENOENT); /* never existed */
  assert_int_equal(res.fired, 0);
  assert_int_equal(res.sentinel, 1);
}

/* th_end's pool_outstanding == 0 is the assertion: shutdown frees the
 * periodic node (in a wheel) and the far one-shot. */
static void test_live_timers_freed_at_shutdown(void **state) {
  (void)state;
  timer_result res = {0};
  run_ticker(TM_LIVE_AT_END, &res);
  assert_true(res.fired >= 1);
  assert_int_equal(res.sentinel, 0);
}

/* sh_timer_start misuse: off a worker, NULL, no timeout handler. */
typedef struct plain { sh_actor base; int *rc_out; } plain;

static int plain_init(sh_actor *self, void *arg) {
  plain *p = (plain *)self;
  p->rc_out = arg;
  return 0;
}

static sh_yield plain_notice(sh_actor *self, sh_stack *st) {
  uint64_t id = 77;
  *((plain *)self)->rc_out = sh_timer_start(self, 1, 0, NULL, &id);
  CHECK(id == 77); /* untouched on failure */
  th_done(self);
  return sh_return(st, NULL);
}

static const sh_actor_class no_timeout_class = {
    .name = "no_timeout", .size = sizeof(plain), .init = plain_init, .notice = plain_notice};

static sh_actor *g_captured;
static int capture_init(sh_actor *self, void *arg) {
  (void)arg;
  g_captured = self;
  return 0;
}
static const sh_actor_class captured_class = {
    .name = "captured", .size = sizeof(ticker), .init = capture_init, .timeout = ticker_timeout};

static void test_timer_start_misuse_is_einval(void **state) {
  (void)state;
  sh_system *sys = th_env(2, 1);
  th_spawn_on(sys, &captured_class, NULL, 0);
  uint64_t id = 77;
  /* From the main thread: not an actor's handler, even with a timeout hook. */
  assert_int_equal(sh_timer_start(g_captured, 1, 0, NULL, &id), -EINVAL);
  assert_int_equal(sh_timer_start(NULL, 1, 0, NULL, &id), -EINVAL);
  assert_int_equal(id, 77);
  int rc = 0;
  const sh_addr *a = th_spawn_on(sys, &no_timeout_class, &rc, 1);
  assert_int_equal(sh_notice(a, &sh_msg_new(kick_msg, .v = 0)->hdr), 0);
  th_run(sys);
  th_end(sys);
  assert_int_equal(rc, -EINVAL);
}

/* An actor that keeps its own notice mailbox full (every notice sends the
 * next) must still get its timer event: events have a share of every run.
 * Without it the flood would run to FLOOD_LIMIT before the timer is seen. */
#define FLOOD_DEPTH 200
#define FLOOD_LIMIT 2000000L

typedef struct flooder { sh_actor base; long handled; long fired_at; } flooder;

static void flooder_mount(sh_actor *self) {
  ((flooder *)self)->fired_at = -1;
  CHECK(sh_timer_start(self, 1, 0, NULL, NULL) == 0);
}

static void flooder_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)id;
  (void)arg;
  flooder *f = (flooder *)self;
  f->fired_at = f->handled;
}

static sh_yield flooder_notice(sh_actor *self, sh_stack *st) {
  flooder *f = (flooder *)self;
  f->handled++;
  if (f->fired_at < 0 && f->handled < FLOOD_LIMIT) {
    CHECK(sh_notice(sh_self(self), &sh_msg_new(kick_msg, .v = 0)->hdr) == 0);
  } else if (f->handled == f->fired_at + FLOOD_DEPTH || f->handled == FLOOD_LIMIT) {
    /* The last notice of the queue drained after the timer stopped the refills. */
    CHECK(f->fired_at >= 0 && f->fired_at < FLOOD_LIMIT);
    th_done(self);
  }
  return sh_return(st, NULL);
}

static const sh_actor_class flooder_class = {.name = "flooder", .size = sizeof(flooder),
                                             .mount = flooder_mount, .timeout = flooder_timeout,
                                             .notice = flooder_notice};

static void test_timer_fires_during_a_notice_flood(void **state) {
  (void)state;
  sh_system *sys = th_env(2, 1);
  const sh_addr *a = th_spawn_on(sys, &flooder_class, NULL, 0);
  for (int i = 0; i < FLOOD_DEPTH; i++)
    assert_int_equal(sh_notice(a, &sh_msg_new(kick_msg, .v = i)->hdr), 0);
  th_run(sys);
  sh_stats st = th_end(sys);
  assert_true(st.delivered < (uint64_t)FLOOD_LIMIT);
}

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ask_timeout_then_late_reply_dropped),
      cmocka_unit_test(test_ask_answered_in_time_is_not_failed),
      cmocka_unit_test(test_one_shot_fires_once_with_its_arg),
      cmocka_unit_test(test_periodic_fires_until_cancelled),
      cmocka_unit_test(test_cancel_before_fire_and_unknown),
      cmocka_unit_test(test_live_timers_freed_at_shutdown),
      cmocka_unit_test(test_timer_start_misuse_is_einval),
      cmocka_unit_test(test_timer_fires_during_a_notice_flood),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
