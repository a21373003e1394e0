/*
 * What the end-to-end scheduling tests (test_e2e_sched.c,
 * test_e2e_placement.c) share: a probe actor that does what a cmd notice
 * says (spin, ask, mark the order it ran in, count, chain notices to
 * itself, burn CPU, ping-pong, report where it runs), an echo that
 * answers with its worker, a holder that sits on every ask for good, and
 * the test thread's helpers.
 *
 * Handlers run on worker threads, where cmocka's asserts cannot be used: they
 * record what they saw in the global `g`, and the test thread asserts on it
 * once the system has exited. Nothing here measures time; tests that must
 * observe a worker while it is busy use a "blocker" actor that spins until
 * the test thread releases it.
 */
#ifndef TESTS_SCHED_FIXTURE_H
#define TESTS_SCHED_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include <stackhouse/stackhouse.h>

#include "support/harness.h"

/* A hang (a lost message) becomes a failed run, not a stuck CI job. */
#define WATCHDOG_S 120

#define MAX_PROBES 256
#define FLOOD_NOTICES 10000
#define FLOOD_BUDGET 8
#define CHAIN_LEN (TH_UNDER_TSAN ? 50000 : 100000)
#define FEED_LEN (TH_UNDER_TSAN ? 10000 : 20000)
#define STEAL_ACTORS 200
#define STEAL_NOTICES 32
#define BURN_ITERS 15000 /* a dependent xorshift chain: some tens of microseconds */
#define PING_PAIRS 3     /* per worker */
#define PING_ROUNDS 2000
#define ROBIN_K 4
#define ROBIN_EACH 250
#define PLACE_WORKERS 3

/* ---- messages ------------------------------------------------------------ */

/* What the test (or another actor) tells a probe to do. */
enum op {
  OP_SPIN = 1,      /* block this worker until g.release */
  OP_ASK_HOLD,      /* ask `to` (a holder): the ask stays pending for good */
  OP_MARK,          /* record when this ran (g.order) */
  OP_FANOUT_SPIN,   /* ask `to` `arg` times, then block; on the first resume, mark */
  OP_COUNT,         /* count one notice */
  OP_PEEK,          /* record probe `arg`'s count */
  OP_CHAIN,         /* the arg-th link of a chain of notices to self */
  OP_FEED,          /* a chain to self that also sends OP_EXT to `to` */
  OP_EXT,           /* a notice from another actor's chain */
  OP_BURN,          /* burn CPU; notice number arg */
  OP_PING,          /* ping-pong with `to`, arg rounds left */
  OP_PROBE,         /* ask `to` (an echo) and check where the answer came from */
  OP_WHERE,         /* record the owning worker and the running thread */
};

typedef struct cmd {
  sh_msg hdr;
  int op;
  int arg;
  const sh_addr *to;
} cmd;
SH_MSG_DEFINE(cmd, SH_NOTICE, 0);

/* Asks are num_asks (support/harness.h). */
typedef struct val_reply {
  sh_msg hdr;
  uint64_t v;
  uint32_t worker; /* the answering actor's worker */
} val_reply;
SH_MSG_DEFINE(val_reply, SH_REPLY, 0);

/* ---- what the handlers saw ----------------------------------------------- */

static struct {
  atomic_int next_id;   /* probe ids, in spawn order */
  atomic_int release;   /* lets blockers return */
  atomic_int spinning;  /* blockers currently spinning */
  atomic_int held;      /* asks a holder is sitting on */
  atomic_int replied;   /* replies echo actors have sent */
  atomic_int seq;       /* the order clock */
  atomic_int order[MAX_PROBES];
  atomic_int count[MAX_PROBES];
  atomic_int chain_len[MAX_PROBES]; /* OP_CHAIN / OP_FEED: links to send */
  atomic_int in_handler[MAX_PROBES];
  atomic_int seen[MAX_PROBES][STEAL_NOTICES];
  atomic_int worker[MAX_PROBES];
  atomic_int probe_reply[MAX_PROBES];
  pthread_t thread[MAX_PROBES];
  atomic_int peek;      /* a count seen by OP_PEEK; -1 before */
  atomic_int overlaps;  /* a probe's handler entered while already inside */
} g;

static void reset_globals(void) {
  /* No system exists between tests: nothing races with this. */
  memset(&g, 0, sizeof(g));
  atomic_store(&g.peek, -1);
  th_reset(0); /* each test sets its goal (th_set_goal) */
}

static int tick(void) { return atomic_fetch_add(&g.seq, 1) + 1; }

static void spin_until_released(void) {
  atomic_fetch_add(&g.spinning, 1);
  while (atomic_load(&g.release) == 0) {
  }
  atomic_fetch_sub(&g.spinning, 1);
}

static uint64_t burn(uint64_t x) {
  for (int i = 0; i < BURN_ITERS; i++) th_xorshift(&x);
  return x;
}

/* ---- echo: answers an ask with 3v+1 and its worker ----------------------- */

static sh_yield echo_ask(sh_actor *self, sh_stack *st) {
  uint64_t v = sh_stack_msg_as(st, num_ask)->v;
  val_reply *r = sh_msg_new(val_reply, .v = 3 * v + 1, .worker = sh_actor_worker(self));
  sh_yield y = sh_return(st, &r->hdr); /* the reply is queued at the asker now */
  atomic_fetch_add(&g.replied, 1);
  return y;
}

static const sh_actor_class echo_class = {
    .name = "echo", .size = sizeof(sh_actor), .ask = echo_ask};

/* ---- holder: sits on every ask it gets, for good (th_hold) -------------- */

typedef struct holder {
  sh_actor base;
  bool locked;
} holder;

static bool holder_barrier(sh_actor *self, const sh_msg *m) {
  (void)m;
  return !((holder *)self)->locked;
}

/* Only shutdown ends its barrier stack. */
static sh_yield holder_ask(sh_actor *self, sh_stack *st) {
  return th_hold(self, st, &((holder *)self)->locked, &g.held);
}

static const sh_actor_class holder_class = {.name = "holder",
                                            .size = sizeof(holder),
                                            .locals_size = sizeof(th_hold_locals),
                                            .ask = holder_ask,
                                            .barrier = holder_barrier};

/* ---- probe: does what a cmd says ----------------------------------------- */

typedef struct probe {
  sh_actor base;
  int id;
  int last;      /* OP_CHAIN / OP_FEED: the previous link seen */
  int last_ext;  /* OP_EXT: the previous link seen */
  uint64_t sink; /* burn's result, so the loop is not optimised away */
} probe;

#define FANOUT_MAX 8
typedef struct probe_locals {
  sh_future *f[FANOUT_MAX];
  int n;
} probe_locals;

static int probe_init(sh_actor *self, void *arg) {
  (void)arg;
  probe *p = (probe *)self;
  p->id = atomic_fetch_add(&g.next_id, 1);
  return p->id < MAX_PROBES ? 0 : -ENOSPC;
}

/* Sends a cmd notice; from actors and from the test thread. */
static int post(const sh_addr *to, int op, int arg, const sh_addr *about) {
  cmd *c = sh_msg_new(cmd, .op = op, .arg = arg, .to = about);
  return c == NULL ? -ENOMEM : sh_notice(to, &c->hdr);
}

static void do_chain(probe *p, const cmd *c) {
  CHECK(c->arg == p->last + 1); /* a chain to self stays in order */
  p->last = c->arg;
  if (c->op == OP_FEED) CHECK(post(c->to, OP_EXT, c->arg, NULL) == 0);
  if (c->arg < atomic_load(&g.chain_len[p->id]))
    CHECK(post(sh_self(&p->base), c->op, c->arg + 1, c->to) == 0);
  th_done(&p->base);
}

static void do_burn(probe *p, const cmd *c) {
  /* Two runners of one actor at once would find the flag already set. */
  if (atomic_exchange(&g.in_handler[p->id], 1) != 0) atomic_fetch_add(&g.overlaps, 1);
  p->sink ^= burn(p->sink + (uint64_t)c->arg + 1);
  CHECK(c->arg >= 0 && c->arg < STEAL_NOTICES);
  atomic_fetch_add(&g.seen[p->id][c->arg], 1);
  atomic_store(&g.in_handler[p->id], 0);
  th_done(&p->base);
}

static void do_ping(probe *p, const cmd *c) {
  if (c->arg > 0)
    CHECK(post(c->to, OP_PING, c->arg - 1, sh_self(&p->base)) == 0);
  else
    th_done(&p->base);
}

/* First entry of a notice; returns true when the stack suspends. */
static bool probe_start(probe *p, sh_stack *st, const cmd *c) {
  probe_locals *l = sh_stack_locals(st);
  switch (c->op) {
  case OP_SPIN: spin_until_released(); break;
  case OP_ASK_HOLD:
  case OP_PROBE:
    l->n = 1;
    l->f[0] = sh_ask(st, c->to, th_new_ask(7), SH_FOREVER);
    return true;
  case OP_MARK:
    atomic_store(&g.order[p->id], tick());
    th_done(&p->base);
    break;
  case OP_FANOUT_SPIN:
    l->n = c->arg;
    CHECK(l->n > 0 && l->n <= FANOUT_MAX);
    for (int i = 0; i < l->n; i++)
      l->f[i] = sh_ask(st, c->to, th_new_ask(i), SH_FOREVER);
    spin_until_released();
    return true;
  case OP_COUNT:
    atomic_fetch_add(&g.count[p->id], 1);
    th_done(&p->base);
    break;
  case OP_PEEK: atomic_store(&g.peek, atomic_load(&g.count[c->arg])); break;
  case OP_CHAIN:
  case OP_FEED: do_chain(p, c); break;
  case OP_EXT:
    CHECK(c->arg == p->last_ext + 1); /* one producer's notices stay in order */
    p->last_ext = c->arg;
    th_done(&p->base);
    break;
  case OP_BURN: do_burn(p, c); break;
  case OP_PING: do_ping(p, c); break;
  case OP_WHERE:
    atomic_store(&g.worker[p->id], (int)sh_actor_worker(&p->base));
    g.thread[p->id] = pthread_self(); /* read by the test after the run */
    th_done(&p->base);
    break;
  default: CHECK(0); break;
  }
  return false;
}

static bool all_done(const probe_locals *l) {
  for (int i = 0; i < l->n; i++)
    if (!sh_future_done(l->f[i])) return false;
  return true;
}

/* The resume after the asks of OP_FANOUT_SPIN or OP_PROBE completed. */
static void probe_resume(probe *p, sh_stack *st, const cmd *c) {
  probe_locals *l = sh_stack_locals(st);
  for (int i = 0; i < l->n; i++) {
    CHECK(sh_future_done(l->f[i]) && !sh_future_failed(l->f[i]));
    const val_reply *r = sh_future_reply(l->f[i], val_reply);
    if (r == NULL) continue;
    if (c->op == OP_FANOUT_SPIN) CHECK(r->v == 3 * (uint64_t)i + 1);
    if (c->op == OP_PROBE) atomic_store(&g.probe_reply[p->id], (int)r->worker + 1);
  }
  th_done(&p->base);
}

static sh_yield probe_notice(sh_actor *self, sh_stack *st) {
  probe *p = (probe *)self;
  const cmd *c = sh_stack_msg_as(st, cmd);
  if (sh_stack_state(st) == SH_START) {
    if (!probe_start(p, st, c)) return sh_return(st, NULL);
    return c->op == OP_FANOUT_SPIN ? sh_suspend_any(st, 1) : sh_suspend(st, 1);
  }
  if (c->op == OP_FANOUT_SPIN) {
    /* The mark: the first run of R that took one of the replies. */
    if (atomic_load(&g.order[p->id]) == 0) atomic_store(&g.order[p->id], tick());
    if (!all_done(sh_stack_locals(st))) return sh_suspend_any(st, 1);
  }
  /* OP_ASK_HOLD resumes only at shutdown: not a step of the goal. */
  if (c->op != OP_ASK_HOLD) probe_resume(p, st, c);
  return sh_return(st, NULL);
}

static const sh_actor_class probe_class = {.name = "probe",
                                           .size = sizeof(probe),
                                           .locals_size = sizeof(probe_locals),
                                           .init = probe_init,
                                           .notice = probe_notice};

/* ---- test-thread helpers ------------------------------------------------- */

static sh_system *new_system(uint32_t workers, uint32_t max_per_run) {
  sh_config cfg = th_config(workers);
  if (max_per_run != 0) cfg.max_per_run = max_per_run;
  return th_system_new(&cfg);
}

static void notify(const sh_addr *to, int op, int arg, const sh_addr *about) {
  assert_int_equal(post(to, op, arg, about), 0);
}

/* Waits for the run's goal, shuts down, checks the pools and the handlers'
 * own checks; returns the final statistics. */
static sh_stats finish(sh_system *sys) {
  assert_int_equal(sh_system_wait(sys), 0);
  return th_end(sys);
}

#endif
