/*
 * metrics: the public figures (sh_system_stats, sh_mailbox_stats_get,
 * sh_actor_probe_get, sh_faults_fired) against what the workload knows it
 * did. The shared invariants compare counters with each other (sent ==
 * delivered + ...); a counter that stops counting, counts twice or reads
 * another field can keep those sums, and is caught here.
 *
 * The workload, every count drawn per run:
 *   - a driver D asks the sink S (notice capacity C in 1..4, ask capacity A
 *     in 1..3, one message per run) a barrier ask `hold`, whose stack asks a
 *     gate G, which asks D: until D answers, S takes nothing;
 *   - meanwhile D tries K > C notices (sh_notice_try): C are admitted, the
 *     rest refused; a putter P puts N notices (sh_put), which all wait for
 *     room; an asker Q tries A + 1 asks (sh_ask_try): A admitted, one
 *     refused; then one more notice try is refused (senders wait ahead);
 *   - with all that in place, S's mailboxes must read capacity, depth and
 *     high water C (A), N senders waiting and suspended, K - C + 1 (1)
 *     refused; Q's probe must count its A asks pending;
 *   - D answers, S takes everything, each put completes in turn; an ask of
 *     D to a late actor L times out and its reply comes late; a notice to
 *     a stopped actor is dropped.
 * After the shutdown every counter of sh_stats equals the workload's own
 * count (sent, delivered, asks, resolved, timed out, unknown replies,
 * dropped), runs >= S's messages (S takes one per run), steals <= runs,
 * the mailboxes read depth 0, the same high waters and the counts of
 * waits and refusals; the figures D sampled along the way never went
 * down; no fault fired (a run without faults).
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/probe.h>
#include <stackhouse/scenario.h>

enum { M_DRIVER = 0, M_SINK, M_GATE, M_PUTTER, M_ASKER, M_LATE, M_ROLES };
#define M_POLLS 1000 /* 1 ms sleeps D waits for P and Q to be in place */
#define M_LATE_MS 5  /* D's ask to L times out after this; L answers at twice it */

typedef sh_scn_num_ask m_hold;
SH_MSG_DEFINE(m_hold, SH_ASK, SH_MSG_BARRIER);

typedef struct world {
  uint32_t cap_n, cap_a, tries, puts;
  const sh_addr *a[M_ROLES];
  const sh_addr *stopped;
  sh_actor_class sink_class; /* the capacities are the run's */
  /* The workload's own counts, to compare with sh_stats. */
  atomic_uint sent, delivered, asks, timed_out, unknown, dropped;
  atomic_uint sink_took, puts_issued, asks_issued, asks_refused;
  atomic_uint left; /* D's hold, S, P, Q */
  sh_stats last;    /* D's latest sample */
} world;

static world *world_of(sh_actor *self) { return sh_scn_state(sh_scn_of(self)); }
static void sent(world *wd, unsigned n) { atomic_fetch_add(&wd->sent, n); }
static void got(world *wd) { atomic_fetch_add(&wd->delivered, 1); }

/* Every counter of a sample at least the one before (the workers' counts
 * only grow; pool_outstanding is a level, not a count). */
static void sample(sh_actor *self, const char *where) {
  sh_scn *s = sh_scn_of(self);
  world *wd = world_of(self);
  sh_stats now;
  sh_system_stats(sh_actor_system(self), &now);
  const uint64_t *a = &wd->last.delivered, *b = &now.delivered;
  for (size_t i = 0; i < sizeof(now) / sizeof(uint64_t); i++) {
    if (&a[i] == &wd->last.pool_outstanding) continue;
    SH_SCN_CHECK(s, b[i] >= a[i], "%s: sh_stats field %zu went down: %llu < %llu", where, i,
                 (unsigned long long)b[i], (unsigned long long)a[i]);
  }
  wd->last = now;
}

static sh_mailbox_stats box(sh_scn *s, const sh_addr *to, sh_msg_kind kind) {
  sh_mailbox_stats ms = {0};
  int rc = sh_mailbox_stats_get(to, 0, kind, &ms);
  SH_SCN_CHECK(s, rc == 0, "sh_mailbox_stats_get: %d", rc);
  return ms;
}

static void check_box(sh_scn *s, const char *what, const sh_mailbox_stats *ms, uint32_t cap,
                      uint32_t depth, uint32_t waiting, uint64_t suspended, uint64_t refused) {
  SH_SCN_CHECK(s, ms->capacity == cap && ms->depth == depth && ms->high_water == cap &&
                      ms->waiting == waiting && ms->suspended == suspended &&
                      ms->refused == refused,
               "%s: capacity %u depth %u high water %u waiting %u suspended %llu refused %llu, "
               "want %u %u %u %u %llu %llu", what, ms->capacity, ms->depth, ms->high_water,
               ms->waiting, (unsigned long long)ms->suspended, (unsigned long long)ms->refused,
               cap, depth, cap, waiting, (unsigned long long)suspended,
               (unsigned long long)refused);
}

/* ---- D: the hold, then (as G's asker) the bursts and the checks ------------- */

static sh_yield driver_notice(sh_actor *self, sh_stack *st) {
  world *wd = world_of(self);
  sh_scn *s = sh_scn_of(self);
  if (sh_stack_state(st) == SH_START) {
    got(wd);
    sample(self, "start");
    sh_future *h = sh_scn_ask_num_as(st, &m_hold_type, wd->a[M_SINK], 0, SH_FOREVER);
    sh_future *l = sh_scn_ask_num(st, wd->a[M_LATE], 0, M_LATE_MS);
    SH_SCN_CHECK(s, h != NULL && l != NULL, "D's asks not made");
    sent(wd, 2);
    atomic_fetch_add(&wd->asks, 2);
    return sh_suspend(st, 1);
  }
  got(wd); /* the hold's reply; the late ask timed out, its reply is unknown */
  atomic_fetch_add(&wd->timed_out, 1);
  sample(self, "end");
  sh_scn_count_down(s, sh_actor_system(self), &wd->left);
  return sh_return(st, NULL);
}

static void burst(sh_actor *self, uint32_t n, uint32_t admitted) {
  world *wd = world_of(self);
  /* Bounded: n tries. */
  for (uint32_t i = 0; i < n; i++) {
    sh_scn_go *g = sh_msg_new(sh_scn_go, .n = 0);
    int rc = g != NULL ? sh_notice_try(wd->a[M_SINK], &g->hdr) : -ENOMEM;
    bool want_in = i < admitted;
    SH_SCN_CHECK(sh_scn_of(self), rc == (want_in ? 0 : -EAGAIN), "notice try %u: %d", i, rc);
    if (rc == 0) sent(wd, 1);
    if (rc != 0) sh_msg_free(g ? &g->hdr : NULL);
  }
}

static void check_held(sh_actor *self) {
  world *wd = world_of(self);
  sh_scn *s = sh_scn_of(self);
  sh_mailbox_stats n = box(s, wd->a[M_SINK], SH_NOTICE);
  check_box(s, "held notices", &n, wd->cap_n, wd->cap_n, wd->puts, wd->puts,
            wd->tries - wd->cap_n + 1);
  sh_mailbox_stats a = box(s, wd->a[M_SINK], SH_ASK);
  check_box(s, "held asks", &a, wd->cap_a, wd->cap_a, 0, 0, 1);
  sample(self, "held");
}

static sh_yield driver_ask(sh_actor *self, sh_stack *st) {
  world *wd = world_of(self);
  int state = sh_stack_state(st);
  if (state == SH_START) {
    got(wd);
    burst(self, wd->tries, wd->cap_n);
    SH_SCN_CHECK(sh_scn_of(self), sh_scn_kick_n(wd->a[M_PUTTER], wd->puts) == 0, "kick P");
    SH_SCN_CHECK(sh_scn_of(self), sh_scn_kick(wd->a[M_ASKER]) == 0, "kick Q");
    sent(wd, 2);
  }
  bool ready = atomic_load(&wd->puts_issued) == wd->puts && atomic_load(&wd->asks_issued) > 0;
  if (!ready && state < M_POLLS) {
    sh_future *f = sh_sleep(st, 1);
    SH_SCN_CHECK(sh_scn_of(self), f != NULL, "D's sleep");
    atomic_fetch_add(&wd->asks, 1); /* a sleep's future counts as an ask */
    return sh_suspend(st, state + 1);
  }
  SH_SCN_CHECK(sh_scn_of(self), ready, "P and Q not in place after %d polls", M_POLLS);
  burst(self, 1, 0); /* senders wait for room: refused */
  check_held(self);
  sent(wd, 1);
  return sh_scn_answer(st, 0);
}

/* ---- S, G, P, Q, L -------------------------------------------------------------- */

static void sink_took(sh_actor *self) {
  world *wd = world_of(self);
  if (atomic_fetch_add(&wd->sink_took, 1) + 1 == wd->cap_n + wd->puts + wd->cap_a)
    sh_scn_count_down(sh_scn_of(self), sh_actor_system(self), &wd->left);
}

static sh_yield sink_notice(sh_actor *self, sh_stack *st) {
  got(world_of(self));
  sink_took(self);
  return sh_return(st, NULL);
}

/* An ask stack that asks actor `to` in its turn and answers 0 once that
 * answer came; every send counted. */
static sh_yield relay(sh_actor *self, sh_stack *st, uint32_t to, const char *what) {
  world *wd = world_of(self);
  if (sh_stack_state(st) == SH_START) {
    SH_SCN_CHECK(sh_scn_of(self), sh_scn_ask_num(st, wd->a[to], 0, SH_FOREVER) != NULL, "%s",
                 what);
    sent(wd, 1);
    atomic_fetch_add(&wd->asks, 1);
    return sh_suspend(st, 1);
  }
  sent(wd, 1);
  return sh_scn_answer(st, 0);
}

static sh_yield sink_ask(sh_actor *self, sh_stack *st) {
  world *wd = world_of(self);
  got(wd);
  if (!sh_msg_is(sh_stack_msg(st), &m_hold_type)) {
    sink_took(self);
    sent(wd, 1);
    return sh_scn_answer(st, 1);
  }
  return relay(self, st, M_GATE, "S's gate ask");
}

static sh_yield gate_ask(sh_actor *self, sh_stack *st) {
  got(world_of(self));
  return relay(self, st, M_DRIVER, "G's ask");
}

/* P: N puts from one stack, all waiting for room until S is released. */
static sh_yield putter_notice(sh_actor *self, sh_stack *st) {
  world *wd = world_of(self);
  sh_scn *s = sh_scn_of(self);
  if (sh_stack_state(st) == SH_START) {
    got(wd);
    for (uint32_t i = 0; i < wd->puts; i++) { /* bounded: N puts */
      sh_scn_go *g = sh_msg_new(sh_scn_go, .n = 0);
      SH_SCN_CHECK(s, g != NULL && sh_put(st, wd->a[M_SINK], &g->hdr, SH_FOREVER) != NULL,
                   "put %u", i);
      atomic_fetch_add(&wd->asks, 1); /* a put's future counts as an ask */
      atomic_fetch_add(&wd->puts_issued, 1);
    }
    return sh_suspend(st, 1);
  }
  sent(wd, wd->puts); /* each put's notice entered the mailbox */
  sh_scn_count_down(s, sh_actor_system(self), &wd->left);
  return sh_return(st, NULL);
}

/* Q: A + 1 ask tries, the last refused; its probe counts the A pending. */
static sh_yield asker_notice(sh_actor *self, sh_stack *st) {
  world *wd = world_of(self);
  sh_scn *s = sh_scn_of(self);
  sh_actor_probe pr;
  if (sh_stack_state(st) == SH_START) {
    got(wd);
    for (uint32_t i = 0; i <= wd->cap_a; i++) { /* bounded: A + 1 tries */
      sh_scn_num_ask *q = sh_msg_new(sh_scn_num_ask, .v = i);
      sh_future *f = NULL;
      int rc = q != NULL ? sh_ask_try(st, wd->a[M_SINK], &q->hdr, SH_FOREVER, &f) : -ENOMEM;
      SH_SCN_CHECK(s, rc == (i < wd->cap_a ? 0 : -EAGAIN), "ask try %u: %d", i, rc);
      if (rc != 0) {
        sh_msg_free(q ? &q->hdr : NULL);
        continue;
      }
      sent(wd, 1);
      atomic_fetch_add(&wd->asks, 1);
    }
    sh_actor_probe_get(self, &pr);
    SH_SCN_CHECK_EQ(s, pr.asks_pending, wd->cap_a, "Q's asks pending");
    SH_SCN_CHECK(s, pr.asks_pending <= pr.ask_buckets * pr.ask_load, "Q's table over its load");
    atomic_fetch_add(&wd->asks_issued, 1);
    return sh_suspend(st, 1);
  }
  atomic_fetch_add(&wd->delivered, wd->cap_a); /* the replies */
  sh_actor_probe_get(self, &pr);
  SH_SCN_CHECK_EQ(s, pr.asks_pending, 0, "Q's asks pending once answered");
  sh_scn_count_down(s, sh_actor_system(self), &wd->left);
  return sh_return(st, NULL);
}

/* L answers after D's timeout: an unknown reply. */
static sh_yield late_ask(sh_actor *self, sh_stack *st) {
  world *wd = world_of(self);
  if (sh_stack_state(st) == SH_START) {
    got(wd);
    SH_SCN_CHECK(sh_scn_of(self), sh_sleep(st, 2 * M_LATE_MS) != NULL, "L's sleep");
    atomic_fetch_add(&wd->asks, 1);
    return sh_suspend(st, 1);
  }
  sent(wd, 1);
  atomic_fetch_add(&wd->unknown, 1);
  return sh_scn_answer(st, 0);
}

#define M_CLASS(nm, ...) \
  {.name = nm, .size = sizeof(sh_scn_actor), .init = sh_scn_actor_init, __VA_ARGS__}
static const sh_actor_class m_classes[M_ROLES] = {
    [M_DRIVER] = M_CLASS("driver", .notice = driver_notice, .ask = driver_ask),
    [M_SINK] = M_CLASS("sink", .notice = sink_notice, .ask = sink_ask, .max_per_run = 1),
    [M_GATE] = M_CLASS("gate", .ask = gate_ask),
    [M_PUTTER] = M_CLASS("putter", .notice = putter_notice),
    [M_ASKER] = M_CLASS("asker", .notice = asker_notice),
    [M_LATE] = M_CLASS("late", .ask = late_ask),
};

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  wd->cap_n = 1 + (uint32_t)sh_scn_below(s, 4);
  wd->cap_a = 1 + (uint32_t)sh_scn_below(s, 3);
  wd->tries = wd->cap_n + 1 + (uint32_t)sh_scn_below(s, 3);
  wd->puts = 1 + (uint32_t)sh_scn_below(s, 4);
  atomic_store(&wd->left, 4);
  wd->sink_class = m_classes[M_SINK];
  wd->sink_class.notice_capacity = wd->cap_n;
  wd->sink_class.ask_capacity = wd->cap_a;
  int rc = 0;
  for (uint32_t r = 0; r < M_ROLES && rc == 0; r++) /* bounded: the roles */
    rc = sh_scn_spawn_on(s, sys, r == M_SINK ? &wd->sink_class : &m_classes[r], r,
                         r % sh_scn_workers(s), &wd->a[r]);
  /* A notice to a stopped actor: refused, counted sent and dropped. */
  if (rc == 0) rc = sh_scn_spawn(s, sys, &m_classes[M_GATE], M_ROLES, 1, &wd->stopped);
  if (rc == 0) rc = sh_stop(wd->stopped);
  if (rc == 0) {
    SH_SCN_CHECK_EQ(s, -sh_scn_kick(wd->stopped), ESHUTDOWN, "a notice to a stopped actor");
    sent(wd, 1);
    atomic_fetch_add(&wd->dropped, 1);
  }
  if (rc == 0) rc = sh_scn_kick(wd->a[M_DRIVER]);
  if (rc == 0) sent(wd, 1);
  return rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  world *wd = sh_scn_state(s);
  SH_SCN_CHECK_EQ(s, st->sent, atomic_load(&wd->sent), "sent");
  SH_SCN_CHECK_EQ(s, st->delivered, atomic_load(&wd->delivered), "delivered");
  SH_SCN_CHECK_EQ(s, st->asks, atomic_load(&wd->asks), "asks");
  SH_SCN_CHECK_EQ(s, st->asks_resolved, atomic_load(&wd->asks), "asks resolved");
  SH_SCN_CHECK_EQ(s, st->asks_timed_out, atomic_load(&wd->timed_out), "asks timed out");
  SH_SCN_CHECK_EQ(s, st->replies_unknown, atomic_load(&wd->unknown), "replies unknown");
  SH_SCN_CHECK_EQ(s, st->dropped_stopped, atomic_load(&wd->dropped), "dropped");
  SH_SCN_CHECK_EQ(s, st->drain_overruns, 0, "drain overruns");
  uint32_t took = atomic_load(&wd->sink_took) + 1; /* and the hold */
  SH_SCN_CHECK(s, st->runs >= took && st->steals <= st->runs && st->pool_mallocs > 0,
               "runs %llu (S took %u, one a run), steals %llu, pool mallocs %llu",
               (unsigned long long)st->runs, took, (unsigned long long)st->steals,
               (unsigned long long)st->pool_mallocs);
  /* What D sampled last was before the end: the final figures are no less. */
  SH_SCN_CHECK(s, st->sent >= wd->last.sent && st->runs >= wd->last.runs &&
                      st->parks >= wd->last.parks && st->wakeups >= wd->last.wakeups,
               "a final figure below one sampled during the run");
  sh_mailbox_stats n = box(s, wd->a[M_SINK], SH_NOTICE);
  check_box(s, "notices at the end", &n, wd->cap_n, 0, 0, wd->puts, wd->tries - wd->cap_n + 1);
  sh_mailbox_stats a = box(s, wd->a[M_SINK], SH_ASK);
  check_box(s, "asks at the end", &a, wd->cap_a, 0, 0, 0, 1);
  SH_SCN_CHECK_EQ(s, sh_faults_fired(), 0, "faults fired in a run without faults");
}

static const sh_scenario metrics = {
    .name = "metrics",
    .summary = "public figures (stats, mailbox stats, probes) equal what the workload did",
    .workers = 2,
    .flags = SH_SCN_NO_FAULTS, /* exact counts: a fault would change them */
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(metrics);
