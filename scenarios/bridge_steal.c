/*
 * The outside-thread bridge under stealing:
 *
 *   bridge_steal      outside threads asking and sending through bridges
 *                     while the workers steal from each other.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>

#include <stackhouse/probe.h>

#include <stackhouse/scenario.h>

#include "kilim.h"

/* ==== bridge_steal ============================================================
 *
 * Outside threads talk to the actors through bridges while the workers
 * steal. A ring of BS_RING actors on worker 0 (more than the steal floor)
 * passes tokens around with CPU work per hop, as in stealing.c, so worker 0
 * has a backlog that idle workers rob. Then, from setup (the outside
 * thread; in the simulator the outside fiber):
 *   - BS_ASKS asks, one at a time, to BS_ECHOES echo actors on worker 0,
 *     received with SH_FOREVER, by SH_NOWAIT polling, or with a timeout;
 *     every reply must carry its ask's ticket and value; then a burst of
 *     one ask per echo, whose replies come in any order, each ticket once;
 *     with nothing pending, recv is -ENOMSG;
 *   - meanwhile BS_THREADS more outside threads (sh_thread_start),
 *     each with its own bridge, send BS_NOTICES notices with SH_FOREVER to
 *     a sink whose notice mailbox holds BS_SINK_CAP: they block for room;
 *     the sink checks each thread's notices come in order.
 * Setup frees its bridge and joins the threads before the last count-down
 * can end the run. A bridge made on a worker is -EINVAL (an echo checks).
 */
#define BS_RING 40
#define BS_TOKENS 2
#define BS_HOPS 8
#define BS_BURN 500
#define BS_ECHOES 4
#define BS_ASKS 300
#define BS_THREADS 2
#define BS_NOTICES 100
#define BS_SINK_CAP 2
#define BS_PER_RUN 2
#define BS_POLLS 100000  /* SH_NOWAIT tries before falling back to SH_FOREVER */
#define BS_TIMEOUT_MS 5000

typedef struct bs_token {
  sh_msg hdr;
  uint32_t hops;
} bs_token;
static SH_MSG_DEFINE(bs_token, SH_NOTICE, 0);

typedef struct bs_world bs_world;

typedef struct bs_thread {
  bs_world *w;
  uint32_t id;
  sh_thread *t;
} bs_thread;

struct bs_world {
  sh_scn *s;
  sh_system *sys;
  const sh_addr *ring[BS_RING];
  const sh_addr *echo[BS_ECHOES];
  const sh_addr *sink;
  bs_thread threads[BS_THREADS];
  /* relaxed counters, read by verify after the join. */
  atomic_uint hops, answered, bridge_checked;
  uint32_t sink_next[BS_THREADS]; /* the sink's, one handler at a time */
  uint32_t sink_received;
  uint32_t polled, timed, fallbacks; /* setup's */
  atomic_uint left; /* tokens, the sink's notices, setup itself */
};

typedef struct bs_ring_actor {
  sh_scn_actor a;
  uint64_t sink;
} bs_ring_actor;

static void bs_one_less(bs_world *w) { sh_scn_count_down(w->s, w->sys, &w->left); }

static sh_yield bs_ring_notice(sh_actor *self, sh_stack *st) {
  bs_ring_actor *r = (bs_ring_actor *)self;
  bs_world *w = sh_scn_state(r->a.s);
  uint32_t hops = sh_stack_msg_as(st, bs_token)->hops;
  r->sink ^= kl_burn(r->sink + hops, BS_BURN);
  atomic_fetch_add_explicit(&w->hops, 1, memory_order_relaxed);
  if (hops == 0) {
    bs_one_less(w);
    return sh_return(st, NULL);
  }
  bs_token *t = sh_msg_new(bs_token, .hops = hops - 1);
  int rc = t != NULL ? sh_notice(w->ring[(r->a.id + 1) % BS_RING], &t->hdr) : -ENOMEM;
  if (!SH_SCN_CHECK(r->a.s, rc == 0, "ring %u: token not passed: %d", r->a.id, rc))
    kl_give_up(self);
  return sh_return(st, NULL);
}

static uint64_t bs_answer_of(uint64_t v) { return 3 * v + 1; }

static sh_yield bs_echo_ask(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  bs_world *w = sh_scn_state(s);
  if (atomic_exchange_explicit(&w->bridge_checked, 1, memory_order_relaxed) == 0) {
    sh_bridge *b = NULL;
    int rc = sh_bridge_new(sh_actor_system(self), &b);
    SH_SCN_CHECK(s, rc == -EINVAL && b == NULL, "sh_bridge_new on a worker: %d", rc);
  }
  atomic_fetch_add_explicit(&w->answered, 1, memory_order_relaxed);
  return sh_scn_answer(st, bs_answer_of(sh_stack_msg_as(st, sh_scn_num_ask)->v));
}

static sh_yield bs_sink_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  bs_world *w = sh_scn_state(s);
  kl_item_in_order(s, "sink", w->sink_next, BS_THREADS, sh_stack_msg_as(st, kl_item));
  w->sink_received++;
  bs_one_less(w);
  return sh_return(st, NULL);
}

static const sh_actor_class bs_ring_class = {
    .name = "bridge_ring",
    .size = sizeof(bs_ring_actor),
    .init = sh_scn_actor_init,
    .notice = bs_ring_notice,
};
static const sh_actor_class bs_echo_class = {
    .name = "bridge_echo",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .ask = bs_echo_ask,
};
static const sh_actor_class bs_sink_class = {
    .name = "bridge_sink",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = bs_sink_notice,
    .notice_capacity = BS_SINK_CAP,
};

/* ---- the outside threads ------------------------------------------------------ */

/* One extra thread: its notices to the sink, blocking while it is full. */
static void bs_sender(void *arg) {
  bs_thread *t = arg;
  sh_scn *s = t->w->s;
  sh_bridge *b;
  int rc = sh_bridge_new(t->w->sys, &b);
  if (!SH_SCN_CHECK(s, rc == 0, "thread %u: sh_bridge_new: %d", t->id, rc)) {
    sh_scn_done(s, t->w->sys);
    return;
  }
  for (uint32_t i = 0; i < BS_NOTICES; i++) {
    kl_item *it = sh_msg_new(kl_item, .from = t->id, .seq = i);
    rc = it != NULL ? sh_bridge_notice(b, t->w->sink, &it->hdr, SH_FOREVER) : -ENOMEM;
    if (!SH_SCN_CHECK(s, rc == 0, "thread %u: notice %u: %d", t->id, i, rc)) {
      if (it != NULL) sh_msg_free(&it->hdr); /* a failed send leaves it ours */
      sh_scn_done(s, t->w->sys);
      break;
    }
  }
  sh_bridge_reply r;
  rc = sh_bridge_recv(b, SH_FOREVER, &r);
  SH_SCN_CHECK(s, rc == -ENOMSG, "thread %u: recv with no ask pending: %d", t->id, rc);
  sh_bridge_free(b);
}

/* Waits for one reply: SH_FOREVER, SH_NOWAIT polls, or a timeout, by i. */
static int bs_recv(bs_world *w, sh_bridge *b, uint32_t i, sh_bridge_reply *r) {
  if (i % 10 == 7) {
    w->polled++;
    int rc = -EAGAIN;
    /* Bounded: a poller that runs out of patience waits as usual. Each
     * try gives the CPU away, so in the simulator the workers run. */
    for (uint32_t k = 0; k < BS_POLLS && rc == -EAGAIN; k++) {
      rc = sh_bridge_recv(b, SH_NOWAIT, r);
      if (rc == -EAGAIN) sh_yield_cpu();
    }
    if (rc != -EAGAIN) return rc;
    w->fallbacks++;
  } else if (i % 10 == 9) {
    w->timed++;
    int rc = sh_bridge_recv(b, BS_TIMEOUT_MS, r);
    if (rc != -ETIMEDOUT) return rc;
    /* The echo answers at once: only a machine stalled for seconds gets
     * here, never the simulator, whose clock moves with the run. */
    SH_SCN_CHECK(w->s, !sh_scn_simulated(w->s), "timed recv timed out in the simulator");
    w->fallbacks++;
  }
  return sh_bridge_recv(b, SH_FOREVER, r);
}

/* The value of the reply to ticket t was v: checks it and frees it. */
static bool bs_check_reply(bs_world *w, int rc, const sh_bridge_reply *r, uint64_t ticket,
                           uint64_t v) {
  const sh_scn_num *n = rc == 0 && r->msg != NULL && sh_msg_is(r->msg, &sh_scn_num_type)
                            ? (const sh_scn_num *)r->msg
                            : NULL;
  bool ok = SH_SCN_CHECK(w->s, rc == 0 && r->error == 0 && n != NULL,
                         "bridge: recv %d, reply error %d", rc, rc == 0 ? r->error : 0) &&
            SH_SCN_CHECK(w->s, r->ticket == ticket && n->v == bs_answer_of(v),
                         "bridge: reply to ticket %llu (value %llu) for ticket %llu",
                         (unsigned long long)r->ticket, (unsigned long long)n->v,
                         (unsigned long long)ticket);
  if (rc == 0) sh_msg_free(r->msg);
  return ok;
}

/* Asks echo `e` the value v; its ticket to *ticket. */
static int bs_ask(bs_world *w, sh_bridge *b, uint32_t e, uint64_t v, uint64_t *ticket) {
  sh_scn_num_ask *q = sh_msg_new(sh_scn_num_ask, .v = v);
  if (q == NULL) return -ENOMEM;
  int rc = sh_bridge_ask(b, w->echo[e], &q->hdr, SH_FOREVER, ticket);
  if (rc != 0) sh_msg_free(&q->hdr);
  return rc;
}

/* One at a time: ask, then wait for that very reply. */
static int bs_ask_one_by_one(bs_world *w, sh_bridge *b) {
  for (uint32_t i = 0; i < BS_ASKS; i++) {
    uint64_t ticket = 0, v = ((uint64_t)i << 8) | (i % BS_ECHOES);
    int rc = bs_ask(w, b, i % BS_ECHOES, v, &ticket);
    if (!SH_SCN_CHECK(w->s, rc == 0, "bridge: ask %u: %d", i, rc)) return rc;
    sh_bridge_reply r;
    rc = bs_recv(w, b, i, &r);
    if (!bs_check_reply(w, rc, &r, ticket, v)) return rc != 0 ? rc : -EPROTO;
    SH_SCN_CHECK(w->s, sh_bridge_pending(b) == 0, "bridge: %u asks pending after a reply",
                 sh_bridge_pending(b));
  }
  return 0;
}

/* A burst: one ask per echo, then the replies in whatever order. */
static int bs_ask_burst(bs_world *w, sh_bridge *b) {
  uint64_t tickets[BS_ECHOES];
  bool seen[BS_ECHOES] = {false};
  for (uint32_t e = 0; e < BS_ECHOES; e++) {
    int rc = bs_ask(w, b, e, 1000 + e, &tickets[e]);
    if (!SH_SCN_CHECK(w->s, rc == 0, "bridge: burst ask %u: %d", e, rc)) return rc;
  }
  SH_SCN_CHECK_EQ(w->s, sh_bridge_pending(b), BS_ECHOES, "asks pending after the burst");
  for (uint32_t k = 0; k < BS_ECHOES; k++) {
    sh_bridge_reply r;
    int rc = sh_bridge_recv(b, SH_FOREVER, &r);
    uint32_t e = 0;
    while (e < BS_ECHOES && (rc != 0 || r.ticket != tickets[e])) e++;
    if (!SH_SCN_CHECK(w->s, e < BS_ECHOES && !seen[e], "bridge: burst recv %d, ticket %llu", rc,
                      rc == 0 ? (unsigned long long)r.ticket : 0ull)) {
      if (rc == 0) sh_msg_free(r.msg);
      return rc != 0 ? rc : -EPROTO;
    }
    seen[e] = true;
    bs_check_reply(w, rc, &r, tickets[e], 1000 + e);
  }
  sh_bridge_reply r;
  int rc = sh_bridge_recv(b, SH_NOWAIT, &r);
  SH_SCN_CHECK(w->s, rc == -ENOMSG, "bridge: recv with no ask pending: %d", rc);
  return 0;
}

static void bs_join(bs_world *w, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) sh_thread_join(w->threads[i].t);
}

/* The outside thread's part: the asks, then its bridge freed and the
 * threads joined, and only then its count-down. */
static int bs_talk(bs_world *w) {
  uint32_t started = 0;
  int rc = 0;
  for (; started < BS_THREADS && rc == 0; started++) {
    w->threads[started] = (bs_thread){.w = w, .id = started};
    rc = sh_thread_start(bs_sender, &w->threads[started], &w->threads[started].t);
    if (rc != 0) break;
  }
  sh_bridge *b = NULL;
  if (rc == 0) rc = sh_bridge_new(w->sys, &b);
  if (rc == 0) rc = bs_ask_one_by_one(w, b);
  if (rc == 0) rc = bs_ask_burst(w, b);
  sh_bridge_free(b);
  bs_join(w, started);
  if (rc == 0) bs_one_less(w);
  return rc;
}

static int bs_spawn(bs_world *w) {
  sh_scn *s = w->s;
  uint32_t workers = sh_scn_workers(s);
  int rc = sh_scn_spawn_on(s, w->sys, &bs_sink_class, 0, 1 % workers, &w->sink);
  for (uint32_t i = 0; i < BS_RING && rc == 0; i++)
    rc = sh_scn_spawn_on(s, w->sys, &bs_ring_class, i, 0, &w->ring[i]);
  for (uint32_t i = 0; i < BS_ECHOES && rc == 0; i++)
    rc = sh_scn_spawn_on(s, w->sys, &bs_echo_class, i, 0, &w->echo[i]);
  return rc;
}

/* Every ring actor gets its tokens, round by round: worker 0's queue fills. */
static int bs_tokens(bs_world *w) {
  for (uint32_t k = 0; k < BS_TOKENS; k++)
    for (uint32_t i = 0; i < BS_RING; i++) {
      bs_token *t = sh_msg_new(bs_token, .hops = BS_HOPS);
      int rc = t != NULL ? sh_notice(w->ring[i], &t->hdr) : -ENOMEM;
      if (rc != 0) return rc;
    }
  return 0;
}

static void bs_configure(sh_scn *s, sh_config *cfg) {
  (void)s;
  cfg->max_per_run = BS_PER_RUN; /* ring houses change hands often */
}

static int bs_setup(sh_scn *s, sh_system *sys) {
  bs_world *w = sh_scn_state(s);
  w->s = s;
  w->sys = sys;
  atomic_store(&w->left, BS_RING * BS_TOKENS + BS_THREADS * BS_NOTICES + 1);
  int rc = bs_spawn(w);
  if (rc == 0) rc = bs_tokens(w);
  if (rc == 0) rc = bs_talk(w);
  return rc;
}

static void bs_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  bs_world *w = sh_scn_state(s);
  SH_SCN_CHECK_EQ(s, atomic_load(&w->hops), BS_RING * BS_TOKENS * (BS_HOPS + 1), "ring hops");
  SH_SCN_CHECK_EQ(s, atomic_load(&w->answered), BS_ASKS + BS_ECHOES, "asks answered");
  SH_SCN_CHECK_EQ(s, st->asks, BS_ASKS + BS_ECHOES, "asks");
  SH_SCN_CHECK_EQ(s, w->sink_received, BS_THREADS * BS_NOTICES, "notices at the sink");
  for (uint32_t i = 0; i < BS_THREADS; i++)
    SH_SCN_CHECK_EQ(s, w->sink_next[i], BS_NOTICES, "notices of a thread at the sink");
  SH_SCN_CHECK_EQ(s, w->polled + w->timed, BS_ASKS / 10 * 2, "polled and timed receives");
  sh_mailbox_stats ms = kl_box_stats(s, w->sink, SH_NOTICE);
  kl_check_bounded(s, "sink", &ms, BS_SINK_CAP);
  SH_SCN_CHECK(s, sh_scn_workers(s) > 1 || st->steals == 0, "%llu steals with one worker",
               (unsigned long long)st->steals);
}

static const sh_scenario bridge_steal = {
    .name = "bridge_steal",
    .summary = "outside threads ask and send through bridges while workers steal",
    .workers = 3,
    .state_size = sizeof(bs_world),
    .configure = bs_configure,
    .setup = bs_setup,
    .verify = bs_verify,
};
SH_SCENARIO(bridge_steal);
