/*
 * The machinery of the bounded-mailbox cases (bounded_cases.h), part one:
 * their sizes and messages, the rig (one run's configuration and
 * results), the holder H, the consumers C (bounded) and U (unbounded), and
 * the producers. Part two, the driver and running a case, is
 * bounded_driver.h.
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
 * comes before their th_done, so main reads it after the run ends.
 */
#ifndef TESTS_BOUNDED_RIG_H
#define TESTS_BOUNDED_RIG_H

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

#endif
