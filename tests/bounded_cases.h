/*
 * Tests of bounded mailboxes (an actor class's ask_capacity /
 * notice_capacity), written once on the public API and run on both
 * backends: tests/test_e2e_bounded.c (epoll, also under TSan) and
 * tests/test_sim_bounded.c (the simulator, several seeds and strategies).
 *
 * The including file defines, before it includes this one:
 *   BOUNDED_RUNS                   runs of every case (one per seed and strategy);
 *   static void bounded_configure(unsigned run)
 *                                  called before each run makes its system;
 *   static const char *bounded_run_name(unsigned run)
 *                                  names a run, for the message of a failed one.
 * and lists the tests with BOUNDED_CASES (cmocka_unit_test entries).
 *
 * The cases:
 *   try_full_*        sh_notice_try / sh_notice on a mailbox filled before start:
 *                     -EAGAIN, the try keeps the message, sh_notice frees it, refusals
 *                     counted; after start all delivered in order, depth back to 0;
 *   refill_*          full, drained, full again: the slots all came back;
 *   many_producers_*  producers putting into a mailbox of 1 or 2: each item once, each
 *                     producer's in its order, some puts certainly waited;
 *   fifo_*            senders (puts or asks, with or without a timeout that does not
 *                     pass) queued in a known order get in in that order; the waiting
 *                     count, suspensions and refusals are exact;
 *   stop_wakes_waiters  stopping the consumer fails every waiting put (its notice
 *                     handed back) and ask with -ESHUTDOWN;
 *   retry_after_stop  a sender woken by the stop sends again: refused -ESHUTDOWN;
 *   timeouts          a put and an ask time out while waiting for room;
 *   misuse            bad capacities, NULLs, wrong kinds; a put with room.
 *
 * Holding a consumer still. A slot of a bounded mailbox frees when its actor
 * takes a message, so to keep a mailbox full while senders queue, the
 * consumer C first takes a barrier notice (HOLD) whose stack asks a holder H
 * that never answers: while that stack runs, C takes no asks or notices. The
 * HOLD stack tells the driver D that C is held; D fills C's mailbox to the
 * brim and sets the senders going; stopping H (sh_stop) fails the HOLD
 * stack's ask, which ends the barrier: the release. Every step is caused by
 * a message of the step before, so what each actor sees is exact on any
 * schedule: the number of slots D gets, the waiters counted while they wait,
 * the order in which the queued senders get in.
 *
 * Actors record what they see in the run's rig and never call cmocka (a
 * check that fails on a worker counts through CHECK); everything they record
 * comes before their th_done, so main reads it after the run ends. Every
 * case ends with bounded_end: shutdown, then the system's accounting
 * (asks == asks_resolved, sent == delivered + replies_unknown +
 * dropped_stopped, no pooled object outstanding).
 */
#ifndef TESTS_BOUNDED_CASES_H
#define TESTS_BOUNDED_CASES_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <stackhouse/stackhouse.h>

#include "support/harness.h"

#define B_WORKERS 3
#define B_MAXP 6         /* producers in one case */
#define B_MAX_OPS 24     /* sends of one producer */
#define B_LOG_MAX 256    /* messages one consumer logs */
#define B_FILL_MAX 8     /* sends that fill a mailbox (more: the bound is not kept) */
#define B_FILL_FROM 100  /* the sender number of the driver's fill messages */
#define B_ASK_BASE 1000000 /* log entries of asks are offset by this */
#define B_TIMEOUT_MS 30  /* a timeout that is meant to pass */
#define B_LONG_MS 60000  /* a timeout that is meant never to pass */

/* ---- messages -------------------------------------------------------------- */

/* What senders send the consumers: from (a producer's index, or B_FILL_FROM)
 * and its sequence number. */
typedef struct b_item { sh_msg hdr; int from; int seq; } b_item;
typedef b_item b_item_ask; /* the same as an ask; answered with a num_reply */
typedef b_item b_hold;     /* the barrier notice that holds the consumer */
typedef struct b_go { sh_msg hdr; } b_go;
typedef enum b_report_kind { R_HELD = 1, R_QUEUED = 2, R_DONE = 3 } b_report_kind;
typedef struct b_report { sh_msg hdr; int kind; int from; } b_report;
static SH_MSG_DEFINE(b_item, SH_NOTICE, 0);
static SH_MSG_DEFINE(b_item_ask, SH_ASK, 0);
static SH_MSG_DEFINE(b_hold, SH_NOTICE, SH_MSG_BARRIER);
static SH_MSG_DEFINE(b_go, SH_NOTICE, 0);
static SH_MSG_DEFINE(b_report, SH_NOTICE, 0);

static sh_msg *b_new(const sh_msg_type *t, int from, int seq) {
  b_item *it = (b_item *)sh_msg_alloc(t);
  if (it == NULL) return NULL;
  it->from = from;
  it->seq = seq;
  return &it->hdr;
}

static sh_msg *b_notice(int from, int seq) { return b_new(&b_item_type, from, seq); }
static sh_msg *b_ask(int from, int seq) { return b_new(&b_item_ask_type, from, seq); }

/* A consumer's log entry of message m; an ask's reply carries entry + 1. */
#define B_N(from, seq) ((from) * 1000 + (seq))
#define B_A(from, seq) (B_ASK_BASE + B_N(from, seq))
static int b_entry(const sh_msg *m) {
  const b_item *it = (const b_item *)m;
  return sh_msg_is(m, &b_item_ask_type) ? B_A(it->from, it->seq) : B_N(it->from, it->seq);
}

static bool b_is_item(const sh_msg *m, const sh_msg_type *t, int from, int seq) {
  const b_item *it = (const b_item *)m;
  return sh_msg_is(m, t) && it->from == from && it->seq == seq;
}

/* ---- the rig: one run's configuration and results -------------------------- */

typedef struct rig rig;
typedef struct driver driver;

typedef enum p_op { OP_PUT = 0, OP_ASK = 1 } p_op;

/* What one producer saw. */
typedef struct p_result {
  int err[B_MAX_OPS]; /* each send's outcome */
  int done;           /* sends completed */
  int waits;          /* sends that did not complete at once */
  int handed_back;    /* failed puts whose very notice came back */
  int replies;        /* asks answered with the right value */
  int waiting_seen;   /* the target box's `waiting` right after the first wait began */
  /* The sends made once the target was stopped (rig.after_stop). */
  int stopped_put_err;
  bool stopped_put_at_once, stopped_put_back;
  int stopped_try_rc;
  int stopped_ask_err;
  bool stopped_ask_at_once;
  int stopped_ask_try_rc, stopped_ask_try_err;
} p_result;

/* What one consumer saw. */
typedef struct c_log {
  int e[B_LOG_MAX];
  int n;
  int next_seq[B_MAXP]; /* per producer: the seq it must send next */
  int order_errors;     /* items out of their producer's order, or twice */
} c_log;

/* The misuse case's findings (driver side). */
typedef struct misuse_result {
  bool put_room_done, put_room_back_null;
  int put_room_err;
  bool put_unbounded_done;
  int put_unbounded_err;
  bool put_null_msg, put_ask_type, put_null_to;
  int ask_try_null_out, ask_try_notice, ask_try_null_to, ask_try_ok;
  long reply;
} misuse_result;

/* The driver's reactions; NULL: none. */
typedef struct driver_plan {
  sh_yield (*held)(driver *d, sh_stack *st);   /* the consumer is held */
  void (*queued)(driver *d, int from);         /* a producer's send waits */
  void (*done)(driver *d, int from);           /* a producer is done */
  sh_yield (*go)(driver *d, sh_stack *st);     /* main's go */
} driver_plan;

#define D_MAXF 16 /* futures a driver stack keeps */

struct rig {
  /* Configuration: written by main before the system starts. */
  sh_msg_kind box;        /* the mailbox the queued senders wait for */
  int np, ops;            /* producers, sends each */
  p_op op[B_MAXP];
  uint32_t timeout_ms;    /* of the producers' sends and the driver's waiting one */
  bool report_waits;      /* producers tell the driver when a send waits */
  bool report_done;       /* ... and when they are done */
  bool release_on_wait;   /* the first send that waits releases the consumer */
  bool after_stop;        /* producers send again once their wait failed */
  int refill_cap;         /* > 0: the consumer refills itself after this many */
  const driver_plan *plan;
  const sh_addr *c, *u, *h, *d, *p[B_MAXP];
  /* The consumers' classes: here, not on a case's stack, since a failed
   * case's system is taken down after its frame is gone. */
  sh_actor_class cls[2];
  atomic_bool released;

  /* Results: each written by one actor, read by main after the run. */
  c_log log[2]; /* [0] the consumer C, [1] the unbounded consumer U */
  int hold_error;
  int refill_rc[B_FILL_MAX + 1];
  p_result pr[B_MAXP];
  int filled[2];          /* [kind == SH_ASK]: slots the driver got */
  int fill_refused[2];    /* its sends refused with -EAGAIN */
  bool d_waited;          /* the driver's own send waited */
  int d_nf, d_err[D_MAXF];
  long d_val[D_MAXF];     /* replies to the driver's asks (-1: none) */
  sh_mailbox_stats seen[2]; /* [kind == SH_ASK], read by the driver at its moment */
  misuse_result mis;
};
/* A run's timeout as the sends take it: 0 in a run's setup means none. */
static int64_t b_timeout(const struct rig *r) { return r->timeout_ms > 0 ? (int64_t)r->timeout_ms : SH_FOREVER; }

static rig *rig_new(void) {
  rig *r = calloc(1, sizeof(*r));
  assert_non_null(r);
  atomic_init(&r->released, false);
  r->box = SH_NOTICE;
  return r;
}

static int bkind(sh_msg_kind k) { return k == SH_ASK; }

/* Ends the run now with a failure (exit code 1): for states a case cannot
 * go on from, so that it fails at once instead of at the watchdog. */
static void b_abort(sh_actor *self) { sh_system_exit(sh_actor_system(self), 1); }

/* Releases the held consumer, once: stopping the holder fails the HOLD
 * stack's ask, which ends the barrier. */
static void b_release(rig *r) {
  if (!atomic_exchange(&r->released, true)) CHECK(sh_stop(r->h) == 0);
}

static void b_stats(const rig *r, sh_msg_kind kind, sh_mailbox_stats *out) {
  CHECK(sh_mailbox_stats_get(r->c, 0, kind, out) == 0);
}

static void b_report_to(const sh_addr *to, int kind, int from) {
  b_report *m = sh_msg_new(b_report, .kind = kind, .from = from);
  CHECK(m != NULL && sh_notice(to, &m->hdr) == 0);
}

static void b_kick(const sh_addr *to) {
  b_go *g = sh_msg_new(b_go);
  CHECK(g != NULL && sh_notice(to, &g->hdr) == 0);
}

/* ---- the holder H: sits on every ask (th_hold) until stopped ----------------- */

typedef struct holder { sh_actor base; bool locked; atomic_int held; } holder;

static sh_yield holder_ask(sh_actor *self, sh_stack *st) {
  holder *h = (holder *)self;
  return th_hold(self, st, &h->locked, &h->held);
}

static bool holder_barrier(sh_actor *self, const sh_msg *m) {
  (void)m;
  return !((holder *)self)->locked;
}

static const sh_actor_class holder_class = {
    .name = "b_holder", .size = sizeof(holder), .locals_size = sizeof(th_hold_locals),
    .ask = holder_ask, .barrier = holder_barrier};

/* ---- consumers: C (bounded, per case) and U (unbounded) ------------------------ */

typedef struct ccfg { rig *r; int which; } ccfg;
typedef struct consumer { sh_actor base; ccfg cfg; } consumer;
typedef struct c_locals { sh_future *f; } c_locals;
TH_CFG_INIT(consumer_init, consumer, ccfg);

static void c_log_item(c_log *lg, const sh_msg *m) {
  const b_item *it = (const b_item *)m;
  if (lg->n < B_LOG_MAX) lg->e[lg->n++] = b_entry(m);
  if (it->from >= 0 && it->from < B_MAXP) {
    if (it->seq != lg->next_seq[it->from]) lg->order_errors++;
    lg->next_seq[it->from] = it->seq + 1;
  }
}

/* The HOLD barrier: waits on the holder, and tells the driver. The ask goes
 * first, so no release (which follows the report) can fail it at once: the
 * barrier then always ends in a later run, which takes the held asks before
 * the held notices. */
static sh_yield c_hold(consumer *c, sh_stack *st) {
  rig *r = c->cfg.r;
  c_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_ask(st, r->h, th_new_ask(0), SH_FOREVER);
    CHECK(l->f != NULL);
    if (r->d != NULL) b_report_to(r->d, R_HELD, -1);
    return sh_suspend(st, 1);
  }
  r->hold_error = sh_future_error(l->f);
  return sh_return(st, NULL);
}

/* Case "full then drained": having taken the last of round one, the consumer
 * fills its own mailbox again. Nobody else sends to it and it is busy here,
 * so exactly refill_cap sends get in. */
static void c_refill(consumer *c) {
  rig *r = c->cfg.r;
  for (int i = 0; i <= r->refill_cap && i <= B_FILL_MAX; i++) {
    sh_msg *m = b_notice(B_FILL_FROM, r->refill_cap + i);
    r->refill_rc[i] = sh_notice_try(sh_self(&c->base), m);
    if (r->refill_rc[i] != 0) sh_msg_free(m); /* refused: still ours */
  }
}

static sh_yield c_notice(sh_actor *self, sh_stack *st) {
  consumer *c = (consumer *)self;
  rig *r = c->cfg.r;
  const sh_msg *m = sh_stack_msg(st);
  if (sh_msg_is(m, &b_hold_type)) return c_hold(c, st);
  CHECK(sh_msg_is(m, &b_item_type));
  c_log_item(&r->log[c->cfg.which], m);
  const b_item *it = (const b_item *)m;
  if (r->refill_cap > 0 && it->from == B_FILL_FROM && it->seq == r->refill_cap - 1) c_refill(c);
  th_done(self);
  return sh_return(st, NULL);
}

static sh_yield c_ask(sh_actor *self, sh_stack *st) {
  consumer *c = (consumer *)self;
  const sh_msg *m = sh_stack_msg(st);
  CHECK(sh_msg_is(m, &b_item_ask_type));
  c_log_item(&c->cfg.r->log[c->cfg.which], m);
  th_done(self);
  return th_reply_with(st, b_entry(m) + 1);
}

/* The consumer's class with the given capacities. */
static sh_actor_class consumer_class(uint32_t notice_cap, uint32_t ask_cap) {
  sh_actor_class c = {.name = "b_consumer", .size = sizeof(consumer),
                      .locals_size = sizeof(c_locals), .init = consumer_init,
                      .notice = c_notice, .ask = c_ask};
  c.notice_capacity = notice_cap;
  c.ask_capacity = ask_cap;
  return c;
}

/* ---- producers: each sends rig.ops items to C, waiting as it must ------------- */

typedef struct pcfg { rig *r; int idx; } pcfg;
typedef struct producer { sh_actor base; pcfg cfg; } producer;
typedef struct p_locals { int k; sh_future *f; } p_locals;
enum { P_WAITED = 1 };
TH_CFG_INIT(producer_init, producer, pcfg);

static sh_future *p_send(producer *p, sh_stack *st, int k) {
  rig *r = p->cfg.r;
  int i = p->cfg.idx;
  if (r->op[i] == OP_ASK) return sh_ask(st, r->c, b_ask(i, k), b_timeout(r));
  return sh_put(st, r->c, b_notice(i, k), b_timeout(r));
}

/* Send k completed: its outcome, and what its future holds. */
static void p_record(producer *p, sh_future *f, int k) {
  rig *r = p->cfg.r;
  int i = p->cfg.idx;
  p_result *pr = &r->pr[i];
  int err = sh_future_error(f);
  sh_msg *m = sh_future_take(f);
  pr->err[k] = err;
  pr->done++;
  if (r->op[i] == OP_PUT) {
    /* A failed put hands its notice back; a put that got in has none. */
    CHECK(err == 0 ? m == NULL : b_is_item(m, &b_item_type, i, k));
    if (err != 0 && b_is_item(m, &b_item_type, i, k)) pr->handed_back++;
  } else if (err == 0) {
    const num_reply *rep = (const num_reply *)m;
    if (sh_msg_is(m, &num_reply_type) && rep->v == B_A(i, k) + 1) pr->replies++;
  } else {
    CHECK(m == NULL);
  }
  sh_msg_free(m);
}

/* Send k waits: count it, see the target's waiters, tell whom the case says. */
static void p_waits(producer *p) {
  rig *r = p->cfg.r;
  p_result *pr = &r->pr[p->cfg.idx];
  if (pr->waits++ == 0) {
    sh_mailbox_stats s;
    b_stats(r, r->op[p->cfg.idx] == OP_ASK ? SH_ASK : SH_NOTICE, &s);
    pr->waiting_seen = (int)s.waiting;
  }
  if (r->report_waits) b_report_to(r->d, R_QUEUED, p->cfg.idx);
  if (r->release_on_wait) b_release(r);
}

/* The target is stopped: every kind of send fails at once, and the ones
 * that keep their message on failure keep it. */
static void p_after_stop(producer *p, sh_stack *st) {
  rig *r = p->cfg.r;
  int i = p->cfg.idx;
  p_result *pr = &r->pr[i];
  sh_future *f = sh_put(st, r->c, b_notice(i, 900), SH_FOREVER);
  pr->stopped_put_at_once = sh_future_done(f);
  pr->stopped_put_err = sh_future_error(f);
  sh_msg *back = sh_future_take(f);
  pr->stopped_put_back = b_is_item(back, &b_item_type, i, 900);
  sh_msg_free(back);
  sh_msg *m = b_notice(i, 901);
  pr->stopped_try_rc = sh_notice_try(r->c, m);
  if (pr->stopped_try_rc != 0) sh_msg_free(m);
  f = sh_ask(st, r->c, b_ask(i, 902), SH_FOREVER);
  pr->stopped_ask_at_once = sh_future_done(f);
  pr->stopped_ask_err = sh_future_error(f);
  m = b_ask(i, 903);
  pr->stopped_ask_try_rc = sh_ask_try(st, r->c, m, SH_FOREVER, &f);
  if (pr->stopped_ask_try_rc == 0)
    pr->stopped_ask_try_err = sh_future_error(f);
  else
    sh_msg_free(m);
}

static sh_yield p_notice(sh_actor *self, sh_stack *st) {
  producer *p = (producer *)self;
  rig *r = p->cfg.r;
  p_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == P_WAITED) p_record(p, l->f, l->k++);
  /* Bounded by ops: every turn completes a send or suspends. */
  while (l->k < r->ops && l->k < B_MAX_OPS) {
    sh_future *f = p_send(p, st, l->k);
    CHECK(f != NULL);
    if (f == NULL) {
      b_abort(self);
      return sh_return(st, NULL);
    }
    if (!sh_future_done(f)) {
      p_waits(p);
      l->f = f;
      return sh_suspend(st, P_WAITED);
    }
    p_record(p, f, l->k++);
  }
  if (r->after_stop) p_after_stop(p, st);
  if (r->report_done) b_report_to(r->d, R_DONE, p->cfg.idx);
  th_done(self);
  return sh_return(st, NULL);
}

static const sh_actor_class producer_class = {
    .name = "b_producer", .size = sizeof(producer), .locals_size = sizeof(p_locals),
    .init = producer_init, .notice = p_notice};

/* ---- the driver D ------------------------------------------------------------- */

struct driver { sh_actor base; rig *r; int queued, done; };
typedef struct d_locals { sh_future *f[D_MAXF]; int nf; } d_locals;
enum { D_DONE = 1 };

static int driver_init(sh_actor *self, void *arg) {
  ((driver *)self)->r = arg;
  return 0;
}

static void d_keep(d_locals *l, sh_future *f) {
  CHECK(l->nf < D_MAXF);
  if (l->nf < D_MAXF) l->f[l->nf++] = f;
}

/* Fills C's mailbox `kind` (sh_notice_try / sh_ask_try) until it refuses;
 * the asks' futures go to l. Returns the refused message, still ours
 * (NULL if none was refused: the bound was not kept). */
static sh_msg *d_fill(driver *d, sh_stack *st, sh_msg_kind kind) {
  rig *r = d->r;
  int k = bkind(kind);
  for (int i = 0; i <= B_FILL_MAX; i++) {
    sh_msg *m = k ? b_ask(B_FILL_FROM, i) : b_notice(B_FILL_FROM, i);
    sh_future *f = NULL;
    int rc = k ? sh_ask_try(st, r->c, m, SH_FOREVER, &f) : sh_notice_try(r->c, m);
    if (rc == -EAGAIN) {
      r->fill_refused[k]++;
      return m;
    }
    CHECK(rc == 0);
    if (rc != 0) {
      sh_msg_free(m);
      return NULL;
    }
    r->filled[k]++;
    if (f != NULL) d_keep(sh_stack_locals(st), f);
  }
  return NULL;
}

/* The driver's futures completed: their outcomes and replies. */
static void d_collect(driver *d, sh_stack *st) {
  rig *r = d->r;
  d_locals *l = sh_stack_locals(st);
  r->d_nf = l->nf;
  for (int i = 0; i < l->nf; i++) {
    r->d_err[i] = sh_future_error(l->f[i]);
    const num_reply *rep = sh_future_reply(l->f[i], num_reply);
    r->d_val[i] = rep != NULL ? rep->v : -1;
  }
}

/* The end of a driver stack that waits for its futures. */
static sh_yield d_wait_all(driver *d, sh_stack *st) {
  if (((d_locals *)sh_stack_locals(st))->nf > 0) return sh_suspend(st, D_DONE);
  th_done(&d->base);
  return sh_return(st, NULL);
}

static sh_yield d_finish(driver *d, sh_stack *st) {
  d_collect(d, st);
  th_done(&d->base);
  return sh_return(st, NULL);
}

static sh_yield d_notice(sh_actor *self, sh_stack *st) {
  driver *d = (driver *)self;
  const driver_plan *plan = d->r->plan;
  const sh_msg *m = sh_stack_msg(st);
  if (sh_msg_is(m, &b_go_type)) return plan->go(d, st);
  const b_report *rep = (const b_report *)m;
  CHECK(sh_msg_is(m, &b_report_type));
  if (rep->kind == R_HELD) return plan->held(d, st);
  if (rep->kind == R_QUEUED) {
    d->queued++;
    if (plan->queued != NULL) plan->queued(d, rep->from);
  } else if (rep->kind == R_DONE) {
    d->done++;
    if (plan->done != NULL) plan->done(d, rep->from);
  }
  return sh_return(st, NULL);
}

static const sh_actor_class driver_class = {
    .name = "b_driver", .size = sizeof(driver), .locals_size = sizeof(d_locals),
    .init = driver_init, .notice = d_notice};

/* ---- running a case -------------------------------------------------------------- */

/* The system of the case running, until bounded_end takes it down; a
 * failed case leaves it to bounded_teardown (the simulator runs one system
 * at a time: the next case needs this one gone). */
static sh_system *bounded_sys;

/* A fresh system of B_WORKERS workers whose run ends after `goal` th_done. */
static sh_system *b_system(int goal) {
  bounded_sys = th_env(B_WORKERS, goal);
  return bounded_sys;
}

static const sh_addr *b_spawn(sh_system *sys, const sh_actor_class *c, void *arg, uint32_t w) {
  return th_spawn_on(sys, c, arg, w % B_WORKERS);
}

/* C with the given capacities, on worker 0. */
static void b_spawn_consumer(sh_system *sys, rig *r, uint32_t notice_cap, uint32_t ask_cap) {
  r->cls[0] = consumer_class(notice_cap, ask_cap);
  r->c = b_spawn(sys, &r->cls[0], &(ccfg){r, 0}, 0); /* the init hook copies it */
}

static void b_spawn_producers(sh_system *sys, rig *r) {
  for (int i = 0; i < r->np; i++) {
    pcfg pc = {r, i};
    r->p[i] = b_spawn(sys, &producer_class, &pc, (uint32_t)i + 1);
  }
}

/* H on worker 1, D on worker 2, and the HOLD barrier sent to C first. */
static void b_spawn_hold(sh_system *sys, rig *r, const driver_plan *plan) {
  r->h = b_spawn(sys, &holder_class, NULL, 1);
  if (plan != NULL) {
    r->plan = plan;
    r->d = b_spawn(sys, &driver_class, r, 2);
  }
  assert_int_equal(sh_notice(r->c, b_new(&b_hold_type, -1, 0)), 0);
}

/* Starts the system; returns when the goal was reached (exit code 0). */
static void b_run(sh_system *sys) { th_run(sys); }

/* Shuts down and frees the system, then checks its accounting. */
static sh_stats bounded_end(sh_system *sys) {
  bounded_sys = NULL;
  return th_end_exact(sys);
}

static void assert_log(const c_log *lg, const int *want, int n) {
  for (int i = 0; i < lg->n && i < n; i++)
    if (lg->e[i] != want[i]) fprintf(stderr, "log[%d] = %d, want %d\n", i, lg->e[i], want[i]);
  assert_int_equal(lg->n, n);
  for (int i = 0; i < n; i++) assert_int_equal(lg->e[i], want[i]);
  assert_int_equal(lg->order_errors, 0);
}

static void assert_box(const sh_mailbox_stats *s, uint32_t cap, uint32_t depth, uint32_t waiting,
                       uint64_t suspended, uint64_t refused) {
  assert_int_equal(s->capacity, cap);
  assert_int_equal(s->depth, depth);
  assert_int_equal(s->waiting, waiting);
  assert_int_equal(s->suspended, suspended);
  assert_int_equal(s->refused, refused);
}

static void c_stats(const rig *r, sh_msg_kind kind, sh_mailbox_stats *out) {
  assert_int_equal(sh_mailbox_stats_get(r->c, 0, kind, out), 0);
}

/* ---- 1. sh_notice_try / sh_notice on a full mailbox, filled before start ------------ */

static void case_try_full(uint32_t cap) {
  rig *r = rig_new();
  sh_system *sys = b_system((int)cap);
  b_spawn_consumer(sys, r, cap, 0);
  /* Not started: nothing is taken, so exactly cap notices get in. */
  for (uint32_t i = 0; i < cap; i++) assert_int_equal(sh_notice_try(r->c, b_notice(0, (int)i)), 0);
  sh_msg *extra = b_notice(0, (int)cap);
  assert_int_equal(sh_notice_try(r->c, extra), -EAGAIN);
  /* Still ours: write to it (ASan would see a freed one) and offer it again. */
  ((b_item *)extra)->seq = (int)cap + 1;
  assert_int_equal(sh_notice_try(r->c, extra), -EAGAIN);
  sh_mailbox_stats s;
  c_stats(r, SH_NOTICE, &s);
  assert_box(&s, cap, cap, 0, 0, 2);
  assert_int_equal(s.high_water, cap);
  /* The old API frees what it refuses (LeakSanitizer would see it kept). */
  assert_int_equal(sh_notice(r->c, extra), -EAGAIN);
  c_stats(r, SH_NOTICE, &s);
  assert_int_equal(s.refused, 3);
  c_stats(r, SH_ASK, &s);
  assert_box(&s, 0, 0, 0, 0, 0); /* the ask mailbox is not bounded */

  b_run(sys);
  /* The last handler ran after the last take: nothing is left admitted. */
  c_stats(r, SH_NOTICE, &s);
  assert_box(&s, cap, 0, 0, 0, 3);
  assert_int_equal(s.high_water, cap);
  bounded_end(sys);
  int want[B_FILL_MAX];
  for (uint32_t i = 0; i < cap; i++) want[i] = B_N(0, (int)i);
  assert_log(&r->log[0], want, (int)cap);
  free(r);
}

static void case_try_full_cap1(void) { case_try_full(1); }
static void case_try_full_cap4(void) { case_try_full(4); }

/* ---- 2. full, drained, full again ------------------------------------------------- */

static void case_refill(uint32_t cap) {
  rig *r = rig_new();
  r->refill_cap = (int)cap;
  sh_system *sys = b_system(2 * (int)cap);
  b_spawn_consumer(sys, r, cap, 0);
  for (uint32_t i = 0; i < cap; i++)
    assert_int_equal(sh_notice_try(r->c, b_notice(B_FILL_FROM, (int)i)), 0);
  b_run(sys);
  sh_mailbox_stats s;
  c_stats(r, SH_NOTICE, &s);
  assert_box(&s, cap, 0, 0, 0, 1); /* one refusal: the refill's last try */
  assert_int_equal(s.high_water, cap);
  bounded_end(sys);
  /* Every slot came back after round one: cap sends got in again. */
  for (uint32_t i = 0; i < cap; i++) assert_int_equal(r->refill_rc[i], 0);
  assert_int_equal(r->refill_rc[cap], -EAGAIN);
  int want[2 * B_FILL_MAX];
  for (uint32_t i = 0; i < 2 * cap; i++) want[i] = B_N(B_FILL_FROM, (int)i);
  assert_log(&r->log[0], want, 2 * (int)cap);
  free(r);
}

static void case_refill_cap1(void) { case_refill(1); }
static void case_refill_cap3(void) { case_refill(3); }

/* ---- 3. many producers putting into a tiny mailbox --------------------------------- */

/* C is held from its first run until the first put that has to wait, so
 * some put certainly waits (more puts than slots meet a held consumer). */
static void case_many_producers(uint32_t cap) {
  enum { NP = 4, OPS = 12 };
  rig *r = rig_new();
  r->np = NP;
  r->ops = OPS;
  r->release_on_wait = true;
  sh_system *sys = b_system(NP * OPS + NP);
  b_spawn_consumer(sys, r, cap, 0);
  b_spawn_hold(sys, r, NULL);
  b_spawn_producers(sys, r);
  for (int i = 0; i < NP; i++) b_kick(r->p[i]);
  b_run(sys);
  sh_mailbox_stats s;
  c_stats(r, SH_NOTICE, &s);
  assert_int_equal(s.depth, 0);
  assert_int_equal(s.waiting, 0);
  assert_int_equal(s.refused, 0);
  assert_int_equal(s.high_water, cap);
  assert_true(s.suspended > 0);
  int waits = 0;
  for (int i = 0; i < NP; i++) waits += r->pr[i].waits;
  assert_int_equal(s.suspended, waits);
  bounded_end(sys);
  /* Each item exactly once, each producer's in its order (c_log_item). */
  assert_int_equal(r->log[0].n, NP * OPS);
  assert_int_equal(r->log[0].order_errors, 0);
  for (int i = 0; i < NP; i++) {
    assert_int_equal(r->log[0].next_seq[i], OPS);
    assert_int_equal(r->pr[i].done, OPS);
    assert_int_equal(r->pr[i].handed_back, 0);
    for (int k = 0; k < OPS; k++) assert_int_equal(r->pr[i].err[k], 0);
  }
  assert_int_equal(r->hold_error, -ESHUTDOWN);
  free(r);
}

static void case_many_producers_cap1(void) { case_many_producers(1); }
static void case_many_producers_cap2(void) { case_many_producers(2); }

/* ---- 4, 7, 9. FIFO admission of queued senders (puts, asks) ----------------------- */

/*
 * C held and full; the driver's own refused fill message goes in line
 * first (the -EAGAIN left it the driver's: it sends it again, now waiting),
 * then the producers one after another: each is set going by the driver
 * when the one before reported that its send waits. When the last waits,
 * the driver reads C's figures and releases it. C must take the fills, then
 * the driver's, then P0, P1, ... The waiting count each producer reads
 * right after its own send queued is exact: the ones before it and itself.
 */
static sh_yield fifo_held(driver *d, sh_stack *st) {
  rig *r = d->r;
  if (sh_stack_state(st) == D_DONE) return d_finish(d, st);
  sh_msg *kept = d_fill(d, st, r->box);
  if (kept == NULL) {
    b_abort(&d->base);
    return sh_return(st, NULL);
  }
  ((b_item *)kept)->seq = B_FILL_MAX + 1; /* ours: write to it, then send it */
  sh_future *f = r->box == SH_ASK ? sh_ask(st, r->c, kept, b_timeout(r))
                                  : sh_put(st, r->c, kept, b_timeout(r));
  CHECK(f != NULL);
  r->d_waited = f != NULL && !sh_future_done(f);
  if (f != NULL) d_keep(sh_stack_locals(st), f);
  b_kick(r->p[0]);
  return d_wait_all(d, st);
}

static void fifo_queued(driver *d, int from) {
  rig *r = d->r;
  if (from + 1 < r->np) {
    b_kick(r->p[from + 1]);
    return;
  }
  b_stats(r, r->box, &r->seen[bkind(r->box)]);
  b_release(r);
}

static const driver_plan fifo_plan = {.held = fifo_held, .queued = fifo_queued};

static void case_fifo(sh_msg_kind box, uint32_t cap, uint32_t timeout_ms) {
  enum { NP = 4 };
  rig *r = rig_new();
  r->box = box;
  r->np = NP;
  r->ops = 1;
  r->timeout_ms = timeout_ms;
  r->report_waits = true;
  for (int i = 0; i < NP; i++) r->op[i] = box == SH_ASK ? OP_ASK : OP_PUT;
  /* C takes the fills, the driver's and the producers'; the producers and
   * the driver's stack end. */
  sh_system *sys = b_system((int)cap + 1 + NP + NP + 1);
  b_spawn_consumer(sys, r, box == SH_ASK ? 0 : cap, box == SH_ASK ? cap : 0);
  b_spawn_hold(sys, r, &fifo_plan);
  b_spawn_producers(sys, r);
  b_run(sys);
  sh_mailbox_stats s;
  c_stats(r, box, &s);
  assert_box(&s, cap, 0, 0, NP + 1, 1);
  assert_int_equal(s.high_water, cap);
  sh_stats st = bounded_end(sys);
  assert_int_equal(st.asks_timed_out, 0);

  int k = bkind(box);
  assert_int_equal(r->filled[k], cap);
  assert_int_equal(r->fill_refused[k], 1);
  assert_true(r->d_waited);
  /* When the last producer queued: full, all of them waiting. */
  assert_box(&r->seen[k], cap, cap, NP + 1, NP + 1, 1);
  assert_int_equal(r->seen[k].high_water, cap);
  int want[B_FILL_MAX + 2 + NP], n = 0;
  for (uint32_t i = 0; i < cap; i++) want[n++] = B_N(B_FILL_FROM, (int)i);
  want[n++] = B_N(B_FILL_FROM, B_FILL_MAX + 1);
  for (int i = 0; i < NP; i++) want[n++] = B_N(i, 0);
  if (box == SH_ASK)
    for (int i = 0; i < n; i++) want[i] += B_ASK_BASE;
  assert_log(&r->log[0], want, n);
  for (int i = 0; i < NP; i++) {
    assert_int_equal(r->pr[i].waits, 1);
    assert_int_equal(r->pr[i].waiting_seen, i + 2); /* the driver's, those before, its own */
    assert_int_equal(r->pr[i].err[0], 0);
    assert_int_equal(r->pr[i].replies, box == SH_ASK ? 1 : 0);
  }
  /* The driver's fill asks and its waiting send: all answered. */
  assert_int_equal(r->d_nf, box == SH_ASK ? (int)cap + 1 : 1);
  for (int i = 0; i < r->d_nf; i++) {
    assert_int_equal(r->d_err[i], 0);
    if (box == SH_ASK) assert_int_equal(r->d_val[i], want[i] + 1);
  }
  assert_int_equal(r->hold_error, -ESHUTDOWN);
  free(r);
}

static void case_fifo_put(void) { case_fifo(SH_NOTICE, 2, 0); }
/* A put's timeout that does not pass: the admission cancels it. */
static void case_fifo_put_timed(void) { case_fifo(SH_NOTICE, 1, B_LONG_MS); }
static void case_fifo_ask(void) { case_fifo(SH_ASK, 2, 0); }
static void case_fifo_ask_timed(void) { case_fifo(SH_ASK, 1, B_LONG_MS); }

/* ---- 5. the consumer stops while senders wait ------------------------------------------ */

/* Fills both of C's mailboxes (the refused messages are freed: still the
 * driver's), sets every producer going, and waits for the fill asks. */
static sh_yield fill_both_held(driver *d, sh_stack *st) {
  rig *r = d->r;
  if (sh_stack_state(st) == D_DONE) return d_finish(d, st);
  sh_msg_free(d_fill(d, st, SH_NOTICE));
  sh_msg_free(d_fill(d, st, SH_ASK));
  for (int i = 0; i < r->np; i++) b_kick(r->p[i]);
  return d_wait_all(d, st);
}

static void stop_queued(driver *d, int from) {
  (void)from;
  rig *r = d->r;
  if (d->queued < r->np) return;
  b_stats(r, SH_NOTICE, &r->seen[0]);
  b_stats(r, SH_ASK, &r->seen[1]);
  CHECK(sh_stop(r->c) == 0);
}

static const driver_plan stop_plan = {.held = fill_both_held, .queued = stop_queued};

/* C held and both its mailboxes full; np producers (puts and asks, in
 * turn) wait for room; when all of them wait, the driver stops C. Returns
 * the system, run and not yet ended: the case checks what the actors saw
 * first (its own findings say more than the accounting would). */
static sh_system *stop_run(rig *r, int np, uint32_t cap, bool after_stop) {
  r->np = np;
  r->ops = 1;
  r->report_waits = true;
  r->after_stop = after_stop;
  for (int i = 0; i < np; i++) r->op[i] = i % 2 == 0 ? OP_PUT : OP_ASK;
  sh_system *sys = b_system(np + 1); /* the producers and the driver's fill stack */
  b_spawn_consumer(sys, r, cap, cap);
  b_spawn_hold(sys, r, &stop_plan);
  b_spawn_producers(sys, r);
  b_run(sys);
  /* Every waiter was taken out of the gate. */
  sh_mailbox_stats s;
  c_stats(r, SH_NOTICE, &s);
  assert_int_equal(s.waiting, 0);
  c_stats(r, SH_ASK, &s);
  assert_int_equal(s.waiting, 0);
  return sys;
}

static void case_stop_wakes_waiters(void) {
  enum { NP = 4, CAP = 2 };
  rig *r = rig_new();
  sh_system *sys = stop_run(r, NP, CAP, false);
  for (int k = 0; k < 2; k++) {
    assert_int_equal(r->filled[k], CAP);
    assert_int_equal(r->fill_refused[k], 1);
    assert_box(&r->seen[k], CAP, CAP, NP / 2, NP / 2, 1);
  }
  /* Nothing got through; every waiting put's notice came back. */
  assert_int_equal(r->log[0].n, 0);
  for (int i = 0; i < NP; i++) {
    assert_int_equal(r->pr[i].waits, 1);
    assert_int_equal(r->pr[i].err[0], -ESHUTDOWN);
    assert_int_equal(r->pr[i].handed_back, r->op[i] == OP_PUT ? 1 : 0);
  }
  sh_stats st = bounded_end(sys);
  assert_true(st.dropped_stopped >= CAP); /* the fill notices */
  /* The fill asks sat in the stopped mailbox: answered -ESHUTDOWN. */
  assert_int_equal(r->d_nf, CAP);
  for (int i = 0; i < CAP; i++) assert_int_equal(r->d_err[i], -ESHUTDOWN);
  assert_int_equal(r->hold_error, -ESHUTDOWN);
  free(r);
}

/* A sender told by the stop itself (its wait failed -ESHUTDOWN) sends again
 * to the stopped actor: every kind of send is refused -ESHUTDOWN (not
 * -EAGAIN: the mailbox is not full, it is closed), at once, and the
 * messages come back as promised. */
static void case_retry_after_stop(void) {
  enum { NP = 4, CAP = 2 };
  rig *r = rig_new();
  sh_system *sys = stop_run(r, NP, CAP, true);
  for (int i = 0; i < NP; i++) {
    const p_result *pr = &r->pr[i];
    assert_int_equal(pr->err[0], -ESHUTDOWN);
    assert_int_equal(pr->stopped_try_rc, -ESHUTDOWN);
    assert_int_equal(pr->stopped_ask_try_rc, 0); /* a future, failed at once */
    assert_int_equal(pr->stopped_ask_try_err, -ESHUTDOWN);
    assert_true(pr->stopped_put_at_once);
    assert_int_equal(pr->stopped_put_err, -ESHUTDOWN);
    assert_true(pr->stopped_put_back);
    assert_true(pr->stopped_ask_at_once);
    assert_int_equal(pr->stopped_ask_err, -ESHUTDOWN);
  }
  bounded_end(sys);
  free(r);
}

/* ---- 5b. the senders stop while they wait ------------------------------------------------ */

/* Once every producer waits, the driver stops them all (not C). */
static void stop_producers_queued(driver *d, int from) {
  (void)from;
  rig *r = d->r;
  if (d->queued < r->np) return;
  for (int i = 0; i < r->np; i++) CHECK(sh_stop(r->p[i]) == 0);
}

/* When every producer saw its wait end: the figures, then C goes on. */
static void release_when_done(driver *d, int from) {
  (void)from;
  rig *r = d->r;
  if (d->done < r->np) return;
  b_stats(r, SH_NOTICE, &r->seen[0]);
  b_stats(r, SH_ASK, &r->seen[1]);
  b_release(r);
}

static const driver_plan sender_stop_plan = {
    .held = fill_both_held, .queued = stop_producers_queued, .done = release_when_done};

/* A stopped sender takes its waiting send back out of the gate: its puts
 * fail -ESHUTDOWN with their notices handed back, its asks fail, and none
 * of them reaches C when C goes on (only the driver's fills do). */
static void case_sender_stopped(void) {
  enum { NP = 4, CAP = 2 };
  rig *r = rig_new();
  r->np = NP;
  r->ops = 1;
  r->report_waits = true;
  r->report_done = true;
  for (int i = 0; i < NP; i++) r->op[i] = i % 2 == 0 ? OP_PUT : OP_ASK;
  /* C takes the fills; the producers and the driver's fill stack end. */
  sh_system *sys = b_system(2 * CAP + NP + 1);
  b_spawn_consumer(sys, r, CAP, CAP);
  b_spawn_hold(sys, r, &sender_stop_plan);
  b_spawn_producers(sys, r);
  b_run(sys);
  for (int i = 0; i < NP; i++) {
    assert_int_equal(r->pr[i].waits, 1);
    assert_int_equal(r->pr[i].err[0], -ESHUTDOWN);
    assert_int_equal(r->pr[i].handed_back, r->op[i] == OP_PUT ? 1 : 0);
  }
  /* The gates let go of the stopped senders before C went on. */
  for (int k = 0; k < 2; k++) assert_box(&r->seen[k], CAP, CAP, 0, NP / 2, 1);
  const int want[] = {B_A(B_FILL_FROM, 0), B_A(B_FILL_FROM, 1), B_N(B_FILL_FROM, 0),
                      B_N(B_FILL_FROM, 1)};
  assert_log(&r->log[0], want, 2 * CAP);
  bounded_end(sys);
  free(r);
}

/* ---- 6. timeouts while waiting for room ------------------------------------------------- */

/* When both producers' sends timed out: the figures, then the release. */
static const driver_plan timeout_plan = {.held = fill_both_held, .done = release_when_done};

static void case_timeouts(void) {
  enum { NP = 2, CAP = 1 };
  rig *r = rig_new();
  r->np = NP;
  r->ops = 1;
  r->timeout_ms = B_TIMEOUT_MS;
  r->report_done = true;
  r->op[0] = OP_PUT;
  r->op[1] = OP_ASK;
  /* C takes the two fills; the producers and the driver's stack end. */
  sh_system *sys = b_system(2 + NP + 1);
  b_spawn_consumer(sys, r, CAP, CAP);
  b_spawn_hold(sys, r, &timeout_plan);
  b_spawn_producers(sys, r);
  b_run(sys);
  sh_stats st = bounded_end(sys);
  assert_int_equal(st.asks_timed_out, NP);

  /* Timed out: the put's notice back, the ask failed; their waits ended. */
  assert_int_equal(r->pr[0].err[0], -ETIMEDOUT);
  assert_int_equal(r->pr[0].handed_back, 1);
  assert_int_equal(r->pr[1].err[0], -ETIMEDOUT);
  for (int k = 0; k < 2; k++) {
    assert_int_equal(r->pr[k].waits, 1);
    assert_int_equal(r->filled[k], CAP);
    assert_box(&r->seen[k], CAP, CAP, 0, 1, 1);
  }
  /* Only the fills reached C (its asks go before its notices). */
  const int want[] = {B_A(B_FILL_FROM, 0), B_N(B_FILL_FROM, 0)};
  assert_log(&r->log[0], want, 2);
  assert_int_equal(r->d_nf, 1);
  assert_int_equal(r->d_err[0], 0);
  assert_int_equal(r->d_val[0], B_A(B_FILL_FROM, 0) + 1);
  free(r);
}

/* ---- 8. misuse, and a put with room ---------------------------------------------------- */

/* From a stack: sh_put with room completes at once; the calls that must be
 * refused are, and the message is freed or kept as each promises (ASan and
 * LeakSanitizer see any other fate); the kept ask is finally sent. */
static sh_yield misuse_go(driver *d, sh_stack *st) {
  rig *r = d->r;
  misuse_result *mr = &r->mis;
  d_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == D_DONE) {
    mr->ask_try_ok = sh_future_error(l->f[0]);
    const num_reply *rep = sh_future_reply(l->f[0], num_reply);
    mr->reply = rep != NULL ? rep->v : -1;
    th_done(&d->base);
    return sh_return(st, NULL);
  }
  sh_future *f = sh_put(st, r->c, b_notice(0, 0), SH_FOREVER);
  mr->put_room_done = sh_future_done(f);
  mr->put_room_err = sh_future_error(f);
  mr->put_room_back_null = sh_future_take(f) == NULL;
  f = sh_put(st, r->u, b_notice(0, 0), SH_FOREVER);
  mr->put_unbounded_done = sh_future_done(f);
  mr->put_unbounded_err = sh_future_error(f);
  mr->put_null_msg = sh_put(st, r->c, NULL, SH_FOREVER) == NULL;
  mr->put_ask_type = sh_put(st, r->c, b_ask(0, 1), SH_FOREVER) == NULL;   /* freed */
  mr->put_null_to = sh_put(st, NULL, b_notice(0, 2), SH_FOREVER) == NULL; /* freed */
  sh_msg *m = b_ask(0, 3);
  sh_msg *n = b_notice(0, 4);
  mr->ask_try_null_out = sh_ask_try(st, r->c, m, SH_FOREVER, NULL);
  mr->ask_try_notice = sh_ask_try(st, r->c, n, SH_FOREVER, &f);
  mr->ask_try_null_to = sh_ask_try(st, NULL, m, SH_FOREVER, &f);
  sh_msg_free(n);
  /* m is still ours after three refusals: now it goes. */
  f = NULL;
  if (sh_ask_try(st, r->c, m, SH_FOREVER, &f) != 0) sh_msg_free(m);
  CHECK(f != NULL);
  if (f == NULL) {
    b_abort(&d->base);
    return sh_return(st, NULL);
  }
  d_keep(l, f);
  return sh_suspend(st, D_DONE);
}

static const driver_plan misuse_plan = {.go = misuse_go};

static int noop_init(sh_actor *self, void *arg) {
  (void)self;
  (void)arg;
  return 0;
}

/* Capacities beyond SH_MAX_CAPACITY are refused by every spawn; the
 * greatest is accepted and reported. */
static void misuse_capacities(sh_system *sys) {
  sh_actor_class big = {.name = "b_big", .size = sizeof(sh_actor), .init = noop_init};
  const sh_addr *a = NULL;
  big.notice_capacity = SH_MAX_CAPACITY + 1;
  assert_int_equal(sh_spawn(sys, &big, NULL, 1, &a), -EINVAL);
  assert_int_equal(sh_spawn_on(sys, &big, NULL, 0, &a), -EINVAL);
  big.notice_capacity = 0;
  big.ask_capacity = UINT32_MAX;
  assert_int_equal(sh_spawn(sys, &big, NULL, 3, &a), -EINVAL);
  big.ask_capacity = SH_MAX_CAPACITY;
  big.notice_capacity = SH_MAX_CAPACITY;
  /* Three instances: a round-robin address, each with its own mailboxes. */
  static sh_actor_class biggest; /* lives as long as the system */
  biggest = big;
  assert_int_equal(sh_spawn(sys, &biggest, NULL, 3, &a), 0);
  sh_mailbox_stats s;
  for (uint32_t i = 0; i < 3; i++) {
    assert_int_equal(sh_mailbox_stats_get(a, i, SH_ASK, &s), 0);
    assert_int_equal(s.capacity, SH_MAX_CAPACITY);
    assert_int_equal(sh_mailbox_stats_get(a, i, SH_NOTICE, &s), 0);
    assert_int_equal(s.capacity, SH_MAX_CAPACITY);
  }
  assert_int_equal(sh_mailbox_stats_get(a, 3, SH_ASK, &s), -EINVAL);
}

/* Off any stack (main): the calls that need no stack. */
static void misuse_outside(const rig *r) {
  sh_mailbox_stats s;
  assert_int_equal(sh_mailbox_stats_get(NULL, 0, SH_NOTICE, &s), -EINVAL);
  assert_int_equal(sh_mailbox_stats_get(r->c, 0, SH_NOTICE, NULL), -EINVAL);
  assert_int_equal(sh_mailbox_stats_get(r->c, 1, SH_NOTICE, &s), -EINVAL);
  assert_int_equal(sh_mailbox_stats_get(r->c, 0, SH_REPLY, &s), -EINVAL);
  assert_int_equal(sh_mailbox_stats_get(r->c, 0, (sh_msg_kind)0, &s), -EINVAL);
  assert_int_equal(sh_mailbox_stats_get(r->c, 0, (sh_msg_kind)99, &s), -EINVAL);
  assert_int_equal(sh_mailbox_stats_get(r->u, 0, SH_NOTICE, &s), 0);
  assert_int_equal(s.capacity, 0);
  sh_msg *m = b_notice(0, 10);
  assert_int_equal(sh_notice_try(NULL, m), -EINVAL);
  assert_int_equal(sh_notice_try(r->c, NULL), -EINVAL);
  sh_msg *a = b_ask(0, 11);
  assert_int_equal(sh_notice_try(r->c, a), -EINVAL);
  sh_future *f = NULL;
  assert_int_equal(sh_ask_try(NULL, r->c, a, SH_FOREVER, &f), -EINVAL);
  assert_null(sh_put(NULL, r->c, m, SH_FOREVER)); /* freed */
  assert_int_equal(sh_notice(r->c, a), -EINVAL); /* freed */
  /* Nothing of it was counted against C's mailboxes. */
  assert_int_equal(sh_mailbox_stats_get(r->c, 0, SH_NOTICE, &s), 0);
  assert_box(&s, 2, 0, 0, 0, 0);
}

static void case_misuse(void) {
  rig *r = rig_new();
  /* C takes the put with room and the kept ask, U its put; the driver ends. */
  sh_system *sys = b_system(4);
  b_spawn_consumer(sys, r, 2, 2);
  r->cls[1] = consumer_class(0, 0);
  r->u = b_spawn(sys, &r->cls[1], &(ccfg){r, 1}, 1);
  r->plan = &misuse_plan;
  r->d = b_spawn(sys, &driver_class, r, 2);
  misuse_capacities(sys);
  misuse_outside(r);
  b_kick(r->d);
  b_run(sys);
  bounded_end(sys);
  const misuse_result *mr = &r->mis;
  assert_true(mr->put_room_done);
  assert_int_equal(mr->put_room_err, 0);
  assert_true(mr->put_room_back_null);
  assert_true(mr->put_unbounded_done);
  assert_int_equal(mr->put_unbounded_err, 0);
  assert_true(mr->put_null_msg);
  assert_true(mr->put_ask_type);
  assert_true(mr->put_null_to);
  assert_int_equal(mr->ask_try_null_out, -EINVAL);
  assert_int_equal(mr->ask_try_notice, -EINVAL);
  assert_int_equal(mr->ask_try_null_to, -EINVAL);
  assert_int_equal(mr->ask_try_ok, 0);
  assert_int_equal(mr->reply, B_A(0, 3) + 1);
  /* C got the put and the ask, in either order (two mailboxes). */
  const c_log *lg = &r->log[0];
  assert_int_equal(lg->n, 2);
  assert_int_equal(lg->e[0] + lg->e[1], B_N(0, 0) + B_A(0, 3));
  assert_true(lg->e[0] == B_N(0, 0) || lg->e[0] == B_A(0, 3));
  const int want_u[] = {B_N(0, 0)};
  assert_log(&r->log[1], want_u, 1);
  free(r);
}

/* ---- the list -------------------------------------------------------------------------- */

static unsigned bounded_current_run;
static bool bounded_all_ran;

/* After a failed test (cmocka runs teardowns after failures too): names
 * the run it failed in, and takes down the system it left. */
static int bounded_teardown(void **state) {
  (void)state;
  if (bounded_all_ran) return 0;
  fprintf(stderr, "  (failed in run %u: %s)\n", bounded_current_run,
          bounded_run_name(bounded_current_run));
  if (bounded_sys != NULL) {
    sh_system_shutdown(bounded_sys);
    sh_system_free(bounded_sys);
    bounded_sys = NULL;
  }
  return 0;
}

#define BOUNDED_TEST(name)                                        \
  static void test_##name(void **state) {                         \
    (void)state;                                                  \
    bounded_all_ran = false;                                      \
    for (unsigned run = 0; run < BOUNDED_RUNS; run++) {           \
      bounded_current_run = run;                                  \
      bounded_configure(run);                                     \
      case_##name();                                              \
    }                                                             \
    bounded_all_ran = true;                                       \
  }

BOUNDED_TEST(try_full_cap1)
BOUNDED_TEST(try_full_cap4)
BOUNDED_TEST(refill_cap1)
BOUNDED_TEST(refill_cap3)
BOUNDED_TEST(many_producers_cap1)
BOUNDED_TEST(many_producers_cap2)
BOUNDED_TEST(fifo_put)
BOUNDED_TEST(fifo_put_timed)
BOUNDED_TEST(fifo_ask)
BOUNDED_TEST(fifo_ask_timed)
BOUNDED_TEST(stop_wakes_waiters)
BOUNDED_TEST(retry_after_stop)
BOUNDED_TEST(sender_stopped)
BOUNDED_TEST(timeouts)
BOUNDED_TEST(misuse)

#define BOUNDED_CASE(name) cmocka_unit_test_teardown(test_##name, bounded_teardown)
#define BOUNDED_CASES                                                                     \
  BOUNDED_CASE(try_full_cap1), BOUNDED_CASE(try_full_cap4), BOUNDED_CASE(refill_cap1),    \
      BOUNDED_CASE(refill_cap3), BOUNDED_CASE(many_producers_cap1),                       \
      BOUNDED_CASE(many_producers_cap2), BOUNDED_CASE(fifo_put),                          \
      BOUNDED_CASE(fifo_put_timed), BOUNDED_CASE(fifo_ask), BOUNDED_CASE(fifo_ask_timed), \
      BOUNDED_CASE(stop_wakes_waiters), BOUNDED_CASE(retry_after_stop),                   \
      BOUNDED_CASE(sender_stopped), BOUNDED_CASE(timeouts), BOUNDED_CASE(misuse)

#endif
