/*
 * End-to-end scheduling tests on the production backend (epoll, pthreads),
 * through the public API only:
 *   - priority decided at enqueue: an actor with no pending promise, or with
 *     more than two replies queued, runs before a normal one queued earlier;
 *   - the per-run message budget (regression for known bug 5: configured but
 *     never applied, so a flooding actor starved its neighbours);
 *   - a message put during the actor's own drain is delivered (regression for
 *     known bug 2: "has messages" cleared after draining);
 *   - stealing under imbalance (and never under balanced light load), with
 *     each actor still run by one worker at a time;
 *   - placement: per-worker addresses, round-robin addresses, sh_spawn_on.
 *
 * Handlers run on worker threads, where cmocka's asserts cannot be used: they
 * record what they saw in the global `g`, and the test thread asserts on it
 * once the system has exited. Nothing here measures time; tests that must
 * observe a worker while it is busy use a "blocker" actor that spins until
 * the test thread releases it.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

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

/* ---- priority ------------------------------------------------------------- */

/* One worker. P has an ask pending (normal priority), Q none (high). While a
 * blocker holds the worker, P's notice is queued before Q's; Q must run first. */
static void test_no_pending_promise_is_high(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = new_system(1, 0);
  const sh_addr *h = th_spawn_on(sys, &holder_class, NULL, 0);
  const sh_addr *blocker = th_spawn_on(sys, &probe_class, NULL, 0); /* id 0 */
  const sh_addr *p = th_spawn_on(sys, &probe_class, NULL, 0);       /* id 1 */
  const sh_addr *q = th_spawn_on(sys, &probe_class, NULL, 0);       /* id 2 */
  assert_int_equal(sh_system_start(sys), 0);

  notify(p, OP_ASK_HOLD, 0, h);
  th_wait_for(&g.held, 1); /* P has run and settled with one pending promise */
  notify(blocker, OP_SPIN, 0, NULL);
  th_wait_for(&g.spinning, 1);
  th_set_goal(2);
  notify(p, OP_MARK, 0, NULL);
  notify(q, OP_MARK, 0, NULL);
  atomic_store(&g.release, 1);
  finish(sys);

  int op = atomic_load(&g.order[1]), oq = atomic_load(&g.order[2]);
  assert_true(op > 0 && oq > 0);
  assert_true(oq < op); /* Q (high) before P (normal), though queued after it */
}

/* Two workers. R, on worker 0, asks an echo on worker 1 k times and blocks its
 * worker while the k replies arrive; then P (normal, a pending ask) is queued.
 * When R settles with k > 2 replies queued it is high and runs before P; with
 * k = 2 it stays normal and runs after P. A budget of one message a run ends
 * R's run with its blocking handler: a run with budget left would take the
 * replies that came meanwhile at once (mailbox order holds for every take),
 * and R would never settle with them queued. R marks its first run after
 * that, where it takes one reply. */
static void check_replies_priority(int k, bool r_first) {
  reset_globals();
  sh_system *sys = new_system(2, 1);
  const sh_addr *h = th_spawn_on(sys, &holder_class, NULL, 1);
  const sh_addr *echo = th_spawn_on(sys, &echo_class, NULL, 1);
  const sh_addr *r = th_spawn_on(sys, &probe_class, NULL, 0); /* id 0 */
  const sh_addr *p = th_spawn_on(sys, &probe_class, NULL, 0); /* id 1 */
  assert_int_equal(sh_system_start(sys), 0);

  notify(p, OP_ASK_HOLD, 0, h);
  th_wait_for(&g.held, 1);
  notify(r, OP_FANOUT_SPIN, k, echo);
  th_wait_for(&g.spinning, 1);
  th_wait_for(&g.replied, k); /* all k replies sit in R's mailbox */
  th_set_goal(2);
  notify(p, OP_MARK, 0, NULL);
  atomic_store(&g.release, 1);
  finish(sys);

  int at_r = atomic_load(&g.order[0]), at_p = atomic_load(&g.order[1]);
  assert_true(at_r > 0 && at_p > 0);
  assert_true(r_first ? at_r < at_p : at_p < at_r);
}

static void test_more_than_two_replies_is_high(void **state) {
  (void)state;
  check_replies_priority(3, true);
}

static void test_two_replies_stay_normal(void **state) {
  (void)state;
  check_replies_priority(2, false);
}

/* ---- the per-run budget (known bug 5) ------------------------------------ */

/* One worker, max_per_run 8. F has 10,000 notices queued before start, G one
 * (G queued after F). G must run after at most a few of F's runs, not after
 * all of F's notices. */
static void test_max_per_run_bounds_a_flooder(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = new_system(1, FLOOD_BUDGET);
  const sh_addr *f = th_spawn_on(sys, &probe_class, NULL, 0); /* id 0 */
  const sh_addr *gg = th_spawn_on(sys, &probe_class, NULL, 0); /* id 1 */
  th_set_goal(FLOOD_NOTICES + 1);
  for (int i = 0; i < FLOOD_NOTICES; i++) notify(f, OP_COUNT, 0, NULL);
  notify(gg, OP_PEEK, 0, NULL);
  notify(gg, OP_COUNT, 0, NULL);
  assert_int_equal(sh_system_start(sys), 0);
  sh_stats s = finish(sys);

  assert_int_equal(atomic_load(&g.count[0]), FLOOD_NOTICES);
  assert_int_equal(atomic_load(&g.count[1]), 1);
  int seen = atomic_load(&g.peek);
  assert_true(seen >= 0);
  assert_true(seen <= 4 * FLOOD_BUDGET);
  assert_int_equal(s.delivered, FLOOD_NOTICES + 2);
  /* F alone needs at least 10,000 / 8 runs. */
  assert_true(s.runs >= FLOOD_NOTICES / FLOOD_BUDGET);
}

/* ---- messages put during the drain (known bug 2) ------------------------- */

/* A chain of notices each sent by the actor to itself while it handles the
 * previous one: every link is put during the actor's own drain. Nothing else
 * sends, so a lost "has messages" signal stalls the chain (watchdog). */
static void test_self_notice_chain_completes(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = new_system(2, 0);
  const sh_addr *a = th_spawn_on(sys, &probe_class, NULL, 0); /* id 0 */
  atomic_store(&g.chain_len[0], CHAIN_LEN);
  th_set_goal(CHAIN_LEN);
  assert_int_equal(sh_system_start(sys), 0);
  notify(a, OP_CHAIN, 1, NULL);
  sh_stats s = finish(sys);
  assert_int_equal(th_done_count(), CHAIN_LEN);
  assert_int_equal(s.delivered, CHAIN_LEN);
}

/* The same chain on worker 0, while an actor on worker 1 runs its own chain
 * and sends every link to A too: puts from the owner and from another
 * thread land during A's drains. */
static void test_self_chain_with_remote_sender(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = new_system(2, 0);
  const sh_addr *a = th_spawn_on(sys, &probe_class, NULL, 0); /* id 0 */
  const sh_addr *b = th_spawn_on(sys, &probe_class, NULL, 1); /* id 1 */
  atomic_store(&g.chain_len[0], CHAIN_LEN);
  atomic_store(&g.chain_len[1], FEED_LEN);
  th_set_goal(CHAIN_LEN + 2 * FEED_LEN); /* A's links, B's links, A's OP_EXT */
  assert_int_equal(sh_system_start(sys), 0);
  notify(b, OP_FEED, 1, a);
  notify(a, OP_CHAIN, 1, NULL);
  sh_stats s = finish(sys);
  assert_int_equal(th_done_count(), CHAIN_LEN + 2 * FEED_LEN);
  assert_int_equal(s.delivered, CHAIN_LEN + 2 * FEED_LEN);
}

/* ---- stealing --------------------------------------------------------------- */

/* 200 busy actors all on worker 0, worker 1 idle: worker 1 must steal, every
 * notice must be handled exactly once, and no actor may run on two workers
 * at the same time. */
static void test_imbalance_is_stolen(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = new_system(2, 0);
  const sh_addr *a[STEAL_ACTORS];
  for (int i = 0; i < STEAL_ACTORS; i++) a[i] = th_spawn_on(sys, &probe_class, NULL, 0);
  th_set_goal(STEAL_ACTORS * STEAL_NOTICES);
  for (int n = 0; n < STEAL_NOTICES; n++)
    for (int i = 0; i < STEAL_ACTORS; i++) notify(a[i], OP_BURN, n, NULL);
  assert_int_equal(sh_system_start(sys), 0);
  sh_stats s = finish(sys);

  for (int i = 0; i < STEAL_ACTORS; i++)
    for (int n = 0; n < STEAL_NOTICES; n++) assert_int_equal(atomic_load(&g.seen[i][n]), 1);
  assert_int_equal(atomic_load(&g.overlaps), 0);
  assert_int_equal(s.delivered, STEAL_ACTORS * STEAL_NOTICES);
  assert_true(s.steals > 0);
}

/* Pairs of actors ping-ponging within their own worker, a few per worker:
 * no backlog ever passes the steal floor, so nothing is stolen. */
static void test_balanced_light_load_is_not_stolen(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = new_system(2, 0);
  const sh_addr *left[2 * PING_PAIRS], *right[2 * PING_PAIRS];
  for (int i = 0; i < 2 * PING_PAIRS; i++) {
    left[i] = th_spawn_on(sys, &probe_class, NULL, (uint32_t)i % 2);
    right[i] = th_spawn_on(sys, &probe_class, NULL, (uint32_t)i % 2);
  }
  th_set_goal(2 * PING_PAIRS);
  assert_int_equal(sh_system_start(sys), 0);
  for (int i = 0; i < 2 * PING_PAIRS; i++) notify(left[i], OP_PING, PING_ROUNDS, right[i]);
  sh_stats s = finish(sys);
  assert_int_equal(s.delivered, 2 * PING_PAIRS * (PING_ROUNDS + 1));
  assert_int_equal(s.steals, 0);
}

/* ---- placement --------------------------------------------------------------- */

/* A per-worker address has one instance per worker, and an ask from an actor
 * on worker w goes to the instance on worker w. */
static void test_per_worker_address_is_local(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = new_system(PLACE_WORKERS, 0);
  const sh_addr *echo = NULL;
  assert_int_equal(sh_spawn(sys, &echo_class, NULL, SH_SPAWN_PER_WORKER, &echo), 0);
  assert_int_equal(sh_addr_count(echo), PLACE_WORKERS);
  const sh_addr *prober[PLACE_WORKERS];
  for (uint32_t w = 0; w < PLACE_WORKERS; w++) prober[w] = th_spawn_on(sys, &probe_class, NULL, w);
  th_set_goal(PLACE_WORKERS);
  assert_int_equal(sh_system_start(sys), 0);
  for (uint32_t w = 0; w < PLACE_WORKERS; w++) notify(prober[w], OP_PROBE, 0, echo);
  finish(sys);
  for (int w = 0; w < PLACE_WORKERS; w++)
    assert_int_equal(atomic_load(&g.probe_reply[w]), w + 1); /* worker + 1: 0 is "none" */
}

/* K instances behind a round-robin address share notices evenly. */
static void test_round_robin_spreads_evenly(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = new_system(2, 0);
  const sh_addr *rr = NULL;
  assert_int_equal(sh_spawn(sys, &probe_class, NULL, ROBIN_K, &rr), 0);
  assert_int_equal(sh_addr_count(rr), ROBIN_K);
  th_set_goal(ROBIN_K * ROBIN_EACH);
  assert_int_equal(sh_system_start(sys), 0);
  for (int i = 0; i < ROBIN_K * ROBIN_EACH; i++) notify(rr, OP_COUNT, 0, NULL);
  finish(sys);
  for (int i = 0; i < ROBIN_K; i++) assert_int_equal(atomic_load(&g.count[i]), ROBIN_EACH);
}

/* sh_spawn_on puts an actor on the worker asked for: it reports that worker,
 * and actors on one worker run on one thread, distinct from the others'. */
static void test_spawn_on_places(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = new_system(PLACE_WORKERS, 0);
  const sh_addr *a[2 * PLACE_WORKERS];
  for (int i = 0; i < 2 * PLACE_WORKERS; i++)
    a[i] = th_spawn_on(sys, &probe_class, NULL, (uint32_t)(i % PLACE_WORKERS));
  th_set_goal(2 * PLACE_WORKERS);
  assert_int_equal(sh_system_start(sys), 0);
  for (int i = 0; i < 2 * PLACE_WORKERS; i++) notify(a[i], OP_WHERE, 0, NULL);
  finish(sys);
  for (int i = 0; i < 2 * PLACE_WORKERS; i++) {
    assert_int_equal(atomic_load(&g.worker[i]), i % PLACE_WORKERS);
    for (int j = 0; j < i; j++) {
      bool same_worker = i % PLACE_WORKERS == j % PLACE_WORKERS;
      assert_int_equal(pthread_equal(g.thread[i], g.thread[j]) != 0, same_worker);
    }
  }
}

static void test_spawn_on_bad_worker_is_einval(void **state) {
  (void)state;
  reset_globals();
  sh_system *sys = new_system(2, 0);
  const sh_addr *a = NULL;
  assert_int_equal(sh_spawn_on(sys, &probe_class, NULL, 2, &a), -EINVAL);
  assert_int_equal(sh_spawn_on(sys, &probe_class, NULL, UINT32_MAX, &a), -EINVAL);
  assert_null(a);
  assert_int_equal(sh_spawn_on(NULL, &probe_class, NULL, 0, &a), -EINVAL);
  assert_int_equal(atomic_load(&g.next_id), 0); /* no init hook ran */
  th_end(sys);
}

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_pending_promise_is_high),
      cmocka_unit_test(test_more_than_two_replies_is_high),
      cmocka_unit_test(test_two_replies_stay_normal),
      cmocka_unit_test(test_max_per_run_bounds_a_flooder),
      cmocka_unit_test(test_self_notice_chain_completes),
      cmocka_unit_test(test_self_chain_with_remote_sender),
      cmocka_unit_test(test_imbalance_is_stolen),
      cmocka_unit_test(test_balanced_light_load_is_not_stolen),
      cmocka_unit_test(test_per_worker_address_is_local),
      cmocka_unit_test(test_round_robin_spreads_evenly),
      cmocka_unit_test(test_spawn_on_places),
      cmocka_unit_test(test_spawn_on_bad_worker_is_einval),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
