/*
 * Bounded mailboxes (in the manner of Kilim's bounded mailboxes: blocking,
 * non-blocking and waiting puts): two scenarios of producers that put.
 *
 *   bounded_pipeline  fast producers, a slow consumer with a small notice
 *                     mailbox: back-pressure keeps memory bounded;
 *   bounded_fifo      many producers on a capacity-1 mailbox: waiting
 *                     senders get room in the order they began to wait.
 *
 * And what these share with bounded_stop.c and bridge_steal.c (kilim.h).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>

#include <stackhouse/probe.h>

#include <stackhouse/scenario.h>

#include "kilim.h"

/* ---- shared ------------------------------------------------------------------ */

SH_MSG_DEFINE(kl_item, SH_NOTICE, 0);

/* CPU work per item, as in stealing.c: xorshift steps the compiler keeps. */
uint64_t kl_burn(uint64_t x, uint32_t steps) {
  x |= 1;
  for (uint32_t i = 0; i < steps; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  return x;
}

/* A failure that stalls the workload (an item that will never come): end
 * the run so that it reports the check, not a hang. */
void kl_give_up(sh_actor *self) { sh_scn_done(sh_scn_of(self), sh_actor_system(self)); }

/* A consumer's checks on an item: a known producer, and from each
 * producer the items come in the order put (next[from] is the seq due). */
bool kl_item_in_order(sh_scn *s, const char *who, uint32_t *next, uint32_t producers,
                      const kl_item *it) {
  if (!SH_SCN_CHECK(s, it->from < producers, "%s: item from unknown producer %u", who, it->from))
    return false;
  bool ok = SH_SCN_CHECK(s, it->seq == next[it->from], "%s: item %u of producer %u when %u was due",
                         who, it->seq, it->from, next[it->from]);
  next[it->from] = it->seq + 1;
  return ok;
}

/* The mailbox figures of instance 0; a failed read is a failed check. */
sh_mailbox_stats kl_box_stats(sh_scn *s, const sh_addr *a, sh_msg_kind kind) {
  sh_mailbox_stats ms = {0};
  int rc = sh_mailbox_stats_get(a, 0, kind, &ms);
  SH_SCN_CHECK(s, rc == 0, "sh_mailbox_stats_get: %d", rc);
  return ms;
}

/* A bounded mailbox never holds more than its capacity. */
void kl_check_bounded(sh_scn *s, const char *who, const sh_mailbox_stats *ms, uint32_t cap) {
  SH_SCN_CHECK(s, ms->capacity == cap, "%s: capacity %u, want %u", who, ms->capacity, cap);
  SH_SCN_CHECK(s, ms->depth <= cap && ms->high_water <= cap,
               "%s: depth %u, high water %u over capacity %u", who, ms->depth, ms->high_water,
               cap);
}

/*
 * A producer's notice stack: puts items 0..n-1 to `to` with sh_put, one at
 * a time; each put waits until the one before was admitted. A put that
 * finds room completes at once and the stack re-enters straight away (a
 * state with nothing pending resumes at once), so a run of such puts is at
 * most n re-entries: n must stay well under the core's re-entry bound
 * (1024). Re-entering also recycles the completed future, so a producer
 * holds at most two futures at a time. `hook` (optional) sees each put
 * right after the call: `waits` when it did not complete at once.
 */
typedef struct put_locals {
  sh_future *f;
  uint32_t next;
} put_locals;

enum { PUT_SENT = 1 };
/* Items one put_loop may send: well under the re-entry bound. */
#define PUT_MAX_ITEMS 512

typedef void (*put_hook)(sh_actor *self, uint32_t seq, bool waits);

static sh_yield put_loop(sh_actor *self, sh_stack *st, const sh_addr *to, uint32_t n,
                         put_hook hook, atomic_uint *left) {
  sh_scn *s = sh_scn_of(self);
  put_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == PUT_SENT &&
      !SH_SCN_CHECK(s, sh_future_error(l->f) == 0, "producer %u: put %u failed: %d",
                    sh_scn_id(self), l->next - 1, sh_future_error(l->f))) {
    kl_give_up(self);
    return sh_return(st, NULL);
  }
  if (l->next == n) return sh_scn_round_end(st, false, left);
  uint32_t seq = l->next++;
  kl_item *it = sh_msg_new(kl_item, .from = sh_scn_id(self), .seq = seq);
  l->f = it != NULL ? sh_put(st, to, &it->hdr, SH_FOREVER) : NULL;
  if (!SH_SCN_CHECK(s, l->f != NULL, "producer %u: put %u not made", sh_scn_id(self), seq)) {
    kl_give_up(self);
    return sh_return(st, NULL);
  }
  if (hook != NULL) hook(self, seq, !sh_future_done(l->f));
  return sh_suspend(st, PUT_SENT);
}

/* ==== bounded_pipeline ========================================================
 *
 * PL_PRODUCERS producers put PL_ITEMS items each, as fast as they are let,
 * to one consumer that burns CPU on each item, handles PL_PER_RUN per run,
 * and whose notice mailbox holds PL_CAP. Checks:
 *   - every item received exactly once, each producer's in order;
 *   - the mailbox never over capacity (depth and high water, sampled by the
 *     consumer and read again at the end);
 *   - memory bounded: pool_outstanding, sampled by the consumer, stays
 *     under PL_POOL_BOUND, which does not grow with the number of items.
 * That senders had to wait (stats.suspended > 0) is not required: on a
 * schedule where the consumer's worker keeps taking items as fast as the
 * producers' worker puts them, the mailbox never fills; only the bound is
 * a guarantee.
 */
#define PL_PRODUCERS 3
#define PL_ITEMS 200
#define PL_CAP 8
#define PL_PER_RUN 2
#define PL_BURN 300
#define PL_SAMPLE_EVERY 8
/* Pooled objects alive at once (messages made on workers, stacks, futures):
 *   - the consumer's mailbox: at most PL_CAP items admitted and not taken;
 *   - the consumer's running stack and its item: 2 (a stack that does not
 *     suspend ends in its run, so earlier ones are gone);
 *   - per producer, at most 6: its stack and start notice, two futures (the
 *     one it just made and the completed one recycled at its next entry),
 *     and a waiter holding one item (a waiter travels back as an event,
 *     itself);
 *   - slack for the statistics' own skew on a real machine: the per-worker
 *     counts are read one after another while objects move between pools.
 * Nothing else is allocated from the pools in this scenario, so the bound
 * holds whatever the number of items; without back-pressure the mailbox
 * alone would hold up to PL_PRODUCERS * PL_ITEMS. */
#define PL_SLACK 16
#define PL_POOL_BOUND (PL_CAP + 2 + PL_PRODUCERS * 6 + PL_SLACK)
_Static_assert(PL_POOL_BOUND * 4 < PL_PRODUCERS * PL_ITEMS, "the bound must be far below the items");
_Static_assert(PL_ITEMS <= PUT_MAX_ITEMS, "put_loop's re-entries");

typedef struct pl_world {
  const sh_addr *consumer;
  /* The consumer's, one handler at a time; read by verify after the join. */
  uint32_t next[PL_PRODUCERS];
  uint32_t received, samples;
  int64_t max_outstanding;
  uint64_t sink;
  atomic_uint left; /* producers to finish + items to receive; 0 ends the run */
} pl_world;

static sh_yield pl_producer(sh_actor *self, sh_stack *st) {
  pl_world *wd = sh_scn_state(sh_scn_of(self));
  return put_loop(self, st, wd->consumer, PL_ITEMS, NULL, &wd->left);
}

/* The consumer's look at its own mailbox and at the system's memory. */
static void pl_sample(sh_actor *self, pl_world *wd) {
  sh_scn *s = sh_scn_of(self);
  sh_mailbox_stats ms = kl_box_stats(s, sh_self(self), SH_NOTICE);
  kl_check_bounded(s, "consumer", &ms, PL_CAP);
  sh_stats st;
  sh_system_stats(sh_actor_system(self), &st);
  /* Signed: a skewed read on a real machine may come out low, even below
   * zero, and must not wrap into a false alarm. */
  int64_t out = (int64_t)st.pool_outstanding;
  SH_SCN_CHECK(s, out <= PL_POOL_BOUND, "%lld pooled objects after %u items, bound %d",
               (long long)out, wd->received, PL_POOL_BOUND);
  if (out > wd->max_outstanding) wd->max_outstanding = out;
  wd->samples++;
}

static sh_yield pl_consumer(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  pl_world *wd = sh_scn_state(s);
  const kl_item *it = sh_stack_msg_as(st, kl_item);
  kl_item_in_order(s, "consumer", wd->next, PL_PRODUCERS, it);
  wd->sink ^= kl_burn(wd->sink + it->seq, PL_BURN);
  if (++wd->received % PL_SAMPLE_EVERY == 0) pl_sample(self, wd);
  return sh_scn_round_end(st, false, &wd->left);
}

static const sh_actor_class pl_producer_class = {
    .name = "pipeline_producer",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(put_locals),
    .init = sh_scn_actor_init,
    .notice = pl_producer,
};

static const sh_actor_class pl_consumer_class = {
    .name = "pipeline_consumer",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = pl_consumer,
    .max_per_run = PL_PER_RUN,
    .notice_capacity = PL_CAP,
};

static int pl_setup(sh_scn *s, sh_system *sys) {
  pl_world *wd = sh_scn_state(s);
  atomic_store(&wd->left, PL_PRODUCERS + PL_PRODUCERS * PL_ITEMS);
  uint32_t workers = sh_scn_workers(s);
  int rc = sh_scn_spawn_on(s, sys, &pl_consumer_class, 0, 0, &wd->consumer);
  /* The producers on every worker, the consumer's own included. */
  for (uint32_t i = 0; i < PL_PRODUCERS && rc == 0; i++) {
    const sh_addr *p;
    rc = sh_scn_spawn_on(s, sys, &pl_producer_class, i, (i + 1) % workers, &p);
    if (rc == 0) rc = sh_scn_kick(p);
  }
  return rc;
}

static void pl_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  pl_world *wd = sh_scn_state(s);
  SH_SCN_CHECK_EQ(s, wd->received, PL_PRODUCERS * PL_ITEMS, "items received");
  for (uint32_t i = 0; i < PL_PRODUCERS; i++)
    SH_SCN_CHECK_EQ(s, wd->next[i], PL_ITEMS, "items of a producer received");
  SH_SCN_CHECK_EQ(s, wd->samples, PL_PRODUCERS * PL_ITEMS / PL_SAMPLE_EVERY, "samples");
  /* Each put is a future. */
  SH_SCN_CHECK_EQ(s, st->asks, PL_PRODUCERS * PL_ITEMS, "asks (puts)");
  sh_mailbox_stats ms = kl_box_stats(s, wd->consumer, SH_NOTICE);
  kl_check_bounded(s, "consumer at the end", &ms, PL_CAP);
  SH_SCN_CHECK(s, ms.waiting == 0, "%u senders still waiting", ms.waiting);
  SH_SCN_CHECK_EQ(s, ms.refused, 0, "puts refused");
}

static const sh_scenario bounded_pipeline = {
    .name = "bounded_pipeline",
    .summary = "fast producers, slow consumer, capacity 8: in order, bounded depth and memory",
    .workers = 2,
    .state_size = sizeof(pl_world),
    .setup = pl_setup,
    .verify = pl_verify,
};
SH_SCENARIO(bounded_pipeline);

/* ==== bounded_fifo ============================================================
 *
 * FF_PRODUCERS producers on worker 0 put FF_ITEMS items each to a consumer
 * on another worker whose notice mailbox holds FF_CAP. With stealing off,
 * the producers' handlers run one after another on worker 0, so the order
 * in which their puts start to wait is the order of their calls. A put that
 * did not complete at once is queued at the gate; its producer then takes
 * the next ticket, in the same handler, before any other producer runs: so
 * tickets number the waiters in queue order. The gate admits waiters first
 * come first served, and the consumer itself, one take at a time, puts each
 * admitted waiter's item in its own mailbox: the items that waited must
 * reach the consumer in ticket order. Items that found room carry no ticket
 * and may come anywhere in between.
 *
 * The ticket is written to a table after the put returns, while the item
 * may already be with the consumer on another worker, so the consumer only
 * logs the order of arrival and verify compares, after the join. Also:
 * every item exactly once, each producer's in order, and one ticket per
 * wait the gate counted (stats.suspended).
 */
#define FF_PRODUCERS 6
#define FF_ITEMS 40
#define FF_CAP 1
#define FF_BURN 300
#define FF_TOTAL (FF_PRODUCERS * FF_ITEMS)
_Static_assert(FF_ITEMS <= PUT_MAX_ITEMS, "put_loop's re-entries");

typedef struct ff_world {
  const sh_addr *consumer;
  /* Ticket of each item (0: it did not wait). Each written once by its
   * producer; read by verify after the join. */
  uint32_t ticket[FF_PRODUCERS][FF_ITEMS];
  /* relaxed: only worker 0 draws (the producers run there one at a time);
   * atomic so that a read elsewhere would still be defined. */
  atomic_uint tickets;
  /* The consumer's, one handler at a time; read by verify after the join. */
  uint32_t next[FF_PRODUCERS];
  struct {
    uint32_t from, seq;
  } log[FF_TOTAL]; /* arrivals, in order */
  uint32_t received;
  uint64_t sink;
  atomic_uint left; /* producers to finish + items to receive */
} ff_world;

static void ff_ticket(sh_actor *self, uint32_t seq, bool waits) {
  ff_world *wd = sh_scn_state(sh_scn_of(self));
  if (waits)
    wd->ticket[sh_scn_id(self)][seq] =
        atomic_fetch_add_explicit(&wd->tickets, 1, memory_order_relaxed) + 1;
}

static sh_yield ff_producer(sh_actor *self, sh_stack *st) {
  ff_world *wd = sh_scn_state(sh_scn_of(self));
  return put_loop(self, st, wd->consumer, FF_ITEMS, ff_ticket, &wd->left);
}

static sh_yield ff_consumer(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  ff_world *wd = sh_scn_state(s);
  const kl_item *it = sh_stack_msg_as(st, kl_item);
  if (kl_item_in_order(s, "consumer", wd->next, FF_PRODUCERS, it) &&
      SH_SCN_CHECK(s, wd->received < FF_TOTAL, "consumer: more than %d items", FF_TOTAL)) {
    wd->log[wd->received].from = it->from;
    wd->log[wd->received].seq = it->seq;
  }
  wd->received++;
  wd->sink ^= kl_burn(wd->sink + it->seq, FF_BURN);
  return sh_scn_round_end(st, false, &wd->left);
}

static const sh_actor_class ff_producer_class = {
    .name = "fifo_producer",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(put_locals),
    .init = sh_scn_actor_init,
    .notice = ff_producer,
};

static const sh_actor_class ff_consumer_class = {
    .name = "fifo_consumer",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = ff_consumer,
    .notice_capacity = FF_CAP,
};

/* No steals: the producers must never run on two workers. */
static void ff_configure(sh_scn *s, sh_config *cfg) {
  (void)s;
  cfg->steal_floor = UINT32_MAX;
}

static int ff_setup(sh_scn *s, sh_system *sys) {
  ff_world *wd = sh_scn_state(s);
  atomic_store(&wd->left, FF_PRODUCERS + FF_TOTAL);
  int rc = sh_scn_spawn_on(s, sys, &ff_consumer_class, 0, 1 % sh_scn_workers(s), &wd->consumer);
  for (uint32_t i = 0; i < FF_PRODUCERS && rc == 0; i++) {
    const sh_addr *p;
    rc = sh_scn_spawn_on(s, sys, &ff_producer_class, i, 0, &p);
    if (rc == 0) rc = sh_scn_kick(p);
  }
  return rc;
}

static void ff_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  ff_world *wd = sh_scn_state(s);
  if (!SH_SCN_CHECK_EQ(s, wd->received, FF_TOTAL, "items received")) return;
  uint32_t last = 0, waited = 0;
  for (uint32_t i = 0; i < FF_TOTAL; i++) {
    uint32_t t = wd->ticket[wd->log[i].from][wd->log[i].seq];
    if (t == 0) continue;
    waited++;
    SH_SCN_CHECK(s, t > last, "item %u of producer %u (ticket %u) arrived after ticket %u",
                 wd->log[i].seq, wd->log[i].from, t, last);
    last = t;
  }
  SH_SCN_CHECK_EQ(s, waited, atomic_load(&wd->tickets), "tickets arrived");
  sh_mailbox_stats ms = kl_box_stats(s, wd->consumer, SH_NOTICE);
  kl_check_bounded(s, "consumer", &ms, FF_CAP);
  SH_SCN_CHECK_EQ(s, ms.suspended, waited, "waits the gate counted");
}

static const sh_scenario bounded_fifo = {
    .name = "bounded_fifo",
    .summary = "6 producers on one worker, capacity 1: waiting puts admitted in FIFO order",
    .workers = 2,
    .state_size = sizeof(ff_world),
    .configure = ff_configure,
    .setup = ff_setup,
    .verify = ff_verify,
};
SH_SCENARIO(bounded_fifo);

