/*
 * Bounded mailboxes and the outside-thread bridge (in the manner of Kilim's
 * bounded mailboxes: blocking, non-blocking and waiting puts): four
 * scenarios.
 *
 *   bounded_pipeline  fast producers, a slow consumer with a small notice
 *                     mailbox: back-pressure keeps memory bounded;
 *   bounded_fifo      many producers on a capacity-1 mailbox: waiting
 *                     senders get room in the order they began to wait;
 *   bounded_stop      senders waiting on a full mailbox when its actor
 *                     stops: each fails with -ESHUTDOWN, nothing is lost
 *                     or doubled;
 *   bridge_steal      outside threads asking and sending through bridges
 *                     while the workers steal from each other.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>

#include <stackhouse/probe.h>

#include <stackhouse/scenario.h>

/* ---- shared ------------------------------------------------------------------ */

/* An item: the seq-th notice of producer `from`. */
typedef struct kl_item {
  sh_msg hdr;
  uint32_t from, seq;
} kl_item;
static SH_MSG_DEFINE(kl_item, SH_NOTICE, 0);

/* CPU work per item, as in stealing.c: xorshift steps the compiler keeps. */
static uint64_t burn(uint64_t x, uint32_t steps) {
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
static void give_up(sh_actor *self) { sh_scn_done(sh_scn_of(self), sh_actor_system(self)); }

/* A consumer's checks on an item: a known producer, and from each
 * producer the items come in the order put (next[from] is the seq due). */
static bool item_in_order(sh_scn *s, const char *who, uint32_t *next, uint32_t producers,
                          const kl_item *it) {
  if (!SH_SCN_CHECK(s, it->from < producers, "%s: item from unknown producer %u", who, it->from))
    return false;
  bool ok = SH_SCN_CHECK(s, it->seq == next[it->from], "%s: item %u of producer %u when %u was due",
                         who, it->seq, it->from, next[it->from]);
  next[it->from] = it->seq + 1;
  return ok;
}

/* The mailbox figures of instance 0; a failed read is a failed check. */
static sh_mailbox_stats box_stats(sh_scn *s, const sh_addr *a, sh_msg_kind kind) {
  sh_mailbox_stats ms = {0};
  int rc = sh_mailbox_stats_get(a, 0, kind, &ms);
  SH_SCN_CHECK(s, rc == 0, "sh_mailbox_stats_get: %d", rc);
  return ms;
}

/* A bounded mailbox never holds more than its capacity. */
static void check_bounded(sh_scn *s, const char *who, const sh_mailbox_stats *ms, uint32_t cap) {
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
    give_up(self);
    return sh_return(st, NULL);
  }
  if (l->next == n) return sh_scn_round_end(st, false, left);
  uint32_t seq = l->next++;
  kl_item *it = sh_msg_new(kl_item, .from = sh_scn_id(self), .seq = seq);
  l->f = it != NULL ? sh_put(st, to, &it->hdr, SH_FOREVER) : NULL;
  if (!SH_SCN_CHECK(s, l->f != NULL, "producer %u: put %u not made", sh_scn_id(self), seq)) {
    give_up(self);
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
  sh_mailbox_stats ms = box_stats(s, sh_self(self), SH_NOTICE);
  check_bounded(s, "consumer", &ms, PL_CAP);
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
  item_in_order(s, "consumer", wd->next, PL_PRODUCERS, it);
  wd->sink ^= burn(wd->sink + it->seq, PL_BURN);
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
  sh_mailbox_stats ms = box_stats(s, wd->consumer, SH_NOTICE);
  check_bounded(s, "consumer at the end", &ms, PL_CAP);
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
  if (item_in_order(s, "consumer", wd->next, FF_PRODUCERS, it) &&
      SH_SCN_CHECK(s, wd->received < FF_TOTAL, "consumer: more than %d items", FF_TOTAL)) {
    wd->log[wd->received].from = it->from;
    wd->log[wd->received].seq = it->seq;
  }
  wd->received++;
  wd->sink ^= burn(wd->sink + it->seq, FF_BURN);
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
  sh_mailbox_stats ms = box_stats(s, wd->consumer, SH_NOTICE);
  check_bounded(s, "consumer", &ms, FF_CAP);
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

/* ==== bounded_stop ============================================================
 *
 * A consumer C (notice capacity SP_CAP, ask capacity 1) stopped while
 * senders wait for room. Setup sends C SP_PRE items and then a barrier
 * notice (exactly SP_CAP messages: all fit). C handles the items, then the
 * barrier's stack asks a holder H and waits; from then C takes nothing. H's
 * stack asks C in turn (its ask takes C's one ask slot and stays in the
 * mailbox: C takes no asks either) and kicks an asker A, whose ask to C
 * must wait for room. Meanwhile SP_PRODUCERS producers put items to C until
 * a put waits; C never takes one of theirs, so SP_CAP of them fill the
 * mailbox and each producer ends with one put waiting (each has more items
 * than fit). Every sender whose send began to wait kicks a stopper S; S
 * stops C once the gates show everyone waiting: A waits (so C is held for
 * good), every producer waits and the notice mailbox is full. Nothing can
 * change after that but the stop. Then:
 *   - every waiting put fails with -ESHUTDOWN and hands its item back
 *     (sh_future_take); a put after the stop fails at once, likewise;
 *   - A's ask fails with -ESHUTDOWN, and so does H's (answered by the
 *     stopped C); C's barrier stack's ask fails with -ESHUTDOWN too (the
 *     asker stopped), or gets H's answer (0), which H sends as soon as the
 *     stopped C refused its ask: a run takes a reply that arrives while it
 *     refuses C's queued messages ahead of them, so the answer may reach
 *     C's barrier stack before the run's stop work fails it;
 *   - before the stop, sh_notice_try to the full mailbox is -EAGAIN with the
 *     item still S's, and sh_notice is -EAGAIN with the item freed; after
 *     it, sh_notice_try is -ESHUTDOWN with the item still S's;
 *   - every item is freed exactly once (its type's drop hook), and each
 *     ends one way: received by C, handed back, dropped with C's mailbox
 *     (exactly SP_CAP), or refused by sh_notice (one): nothing lost, nothing
 *     doubled.
 */
#define SP_PRODUCERS 3
#define SP_CAP 4
#define SP_PRE (SP_CAP - 1)
#define SP_ITEMS (SP_CAP + 1) /* per producer: one more than C's mailbox holds */
/* Items: setup's, the producers' (each at most SP_ITEMS, and one after the
 * stop), and S's two. */
#define SP_MAX_ITEMS (SP_PRE + SP_PRODUCERS * (SP_ITEMS + 1) + 2)

/* An item's fate, bits of stop_world.fate. */
enum { F_RECEIVED = 1, F_BACK = 2, F_REFUSED = 4, F_FREED = 8 };

typedef struct sp_world sp_world;

/* An item the world follows to its end through its type's drop hook. */
typedef struct sp_item {
  sh_msg hdr;
  sp_world *w;
  uint32_t id;
} sp_item;

struct sp_world {
  sh_scn *s;
  const sh_addr *c, *h, *a, *stopper;
  /* relaxed: the ids only have to be distinct. */
  atomic_uint items;
  /* Each item's F_* bits: set by whoever handles it (C, a producer, S, the
   * drop hook on any thread) with relaxed fetch_or, read by verify after
   * the join. */
  atomic_uchar fate[SP_MAX_ITEMS];
  atomic_bool stopped; /* S's, relaxed: read by S and by verify after the join */
  /* Producers, A, H and C's barrier stack, each when it has seen the stop. */
  atomic_uint left;
};

static void sp_item_drop(sh_msg *m) {
  sp_item *it = (sp_item *)m;
  unsigned was = atomic_fetch_or_explicit(&it->w->fate[it->id], F_FREED, memory_order_relaxed);
  SH_SCN_CHECK(it->w->s, !(was & F_FREED), "item %u freed twice", it->id);
}
static SH_MSG_DEFINE_DROP(sp_item, SH_NOTICE, 0, sp_item_drop);

/* C's barrier notice: while its stack waits for H, C takes nothing. */
typedef struct sp_hold {
  sh_msg hdr;
} sp_hold;
static SH_MSG_DEFINE(sp_hold, SH_NOTICE, SH_MSG_BARRIER);

static sp_item *sp_item_new(sp_world *w) {
  uint32_t id = atomic_fetch_add_explicit(&w->items, 1, memory_order_relaxed);
  if (!SH_SCN_CHECK(w->s, id < SP_MAX_ITEMS, "more than %d items", SP_MAX_ITEMS)) return NULL;
  return sh_msg_new(sp_item, .w = w, .id = id);
}

static void sp_mark(sp_world *w, const sp_item *it, unsigned bit) {
  atomic_fetch_or_explicit(&w->fate[it->id], (unsigned char)bit, memory_order_relaxed);
}

static void sp_one_less(sh_actor *self) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  sh_scn_count_down(w->s, sh_actor_system(self), &w->left);
}

/* A send of self's began to wait for room: S may find everyone waiting. */
static void sp_waits(sh_actor *self) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  if (!SH_SCN_CHECK(w->s, sh_scn_kick(w->stopper) == 0, "kick of the stopper failed"))
    give_up(self);
}

/* ---- C --------------------------------------------------------------------------- */

enum { C_RELEASED = 1 };

static sh_yield sp_c_notice(sh_actor *self, sh_stack *st) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  sh_msg *m = sh_stack_msg(st);
  if (sh_msg_is(m, &sp_item_type)) {
    sp_mark(w, (sp_item *)m, F_RECEIVED);
    return sh_return(st, NULL);
  }
  sh_future **f = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    *f = sh_scn_ask_num(st, w->h, 0, SH_FOREVER);
    if (SH_SCN_CHECK(w->s, *f != NULL, "C: ask to the holder not made"))
      return sh_suspend(st, C_RELEASED);
    give_up(self);
    return sh_return(st, NULL);
  }
  int err = sh_future_error(*f);
  SH_SCN_CHECK(w->s, err == -ESHUTDOWN || err == 0, "C: hold ended with %d, want %d or 0", err,
               -ESHUTDOWN);
  sp_one_less(self);
  return sh_return(st, NULL);
}

/* Never runs: the only asks C gets come while it is held. */
static sh_yield sp_c_ask(sh_actor *self, sh_stack *st) {
  SH_SCN_CHECK(sh_scn_of(self), false, "C took an ask while held");
  return sh_scn_answer(st, 0);
}

/* ---- H, A and the producers -------------------------------------------------------- */

enum { H_ANSWERED = 1, A_ANSWERED = 1, P_PUT = 1 };

/* H's stack, for C's ask: asks C back (admitted at once into C's empty ask
 * mailbox, where it stays), then lets A ask. */
static sh_yield sp_h_ask(sh_actor *self, sh_stack *st) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  sh_future **f = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    *f = sh_scn_ask_num(st, w->c, 1, SH_FOREVER);
    if (SH_SCN_CHECK(w->s, *f != NULL && !sh_future_done(*f), "H: ask to C not pending") &&
        SH_SCN_CHECK(w->s, sh_scn_kick(w->a) == 0, "H: kick of A failed"))
      return sh_suspend(st, H_ANSWERED);
    give_up(self);
    return sh_throw(st, -EPROTO);
  }
  SH_SCN_CHECK(w->s, sh_future_error(*f) == -ESHUTDOWN, "H: ask to C ended with %d, want %d",
               sh_future_error(*f), -ESHUTDOWN);
  sp_one_less(self);
  return sh_scn_answer(st, 0);
}

/* A's ask finds C's one ask slot taken by H's: it waits for room. */
static sh_yield sp_a_notice(sh_actor *self, sh_stack *st) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  sh_future **f = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    *f = sh_scn_ask_num(st, w->c, 2, SH_FOREVER);
    if (SH_SCN_CHECK(w->s, *f != NULL && !sh_future_done(*f), "A: ask to C not waiting")) {
      sp_waits(self);
      return sh_suspend(st, A_ANSWERED);
    }
    give_up(self);
    return sh_return(st, NULL);
  }
  SH_SCN_CHECK(w->s, sh_future_error(*f) == -ESHUTDOWN, "A: ask to C ended with %d, want %d",
               sh_future_error(*f), -ESHUTDOWN);
  sp_one_less(self);
  return sh_return(st, NULL);
}

typedef struct sp_put_locals {
  sh_future *f;
  sp_item *item; /* what f put: compared with what a failed put hands back */
  uint32_t sent;
} sp_put_locals;

/* The put of `it` has failed with -ESHUTDOWN: it must hand `it` back. */
static void sp_take_back(sh_actor *self, sh_future *f, sp_item *it) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  SH_SCN_CHECK(w->s, sh_future_error(f) == -ESHUTDOWN, "producer %u: put ended with %d, want %d",
               sh_scn_id(self), sh_future_error(f), -ESHUTDOWN);
  sh_msg *back = sh_future_take(f);
  if (!SH_SCN_CHECK(w->s, back == &it->hdr, "producer %u: failed put handed back %s",
                    sh_scn_id(self), back == NULL ? "nothing" : "another message")) {
    sh_msg_free(back);
    return;
  }
  sp_mark(w, it, F_BACK);
  sh_msg_free(back);
}

/* After the stop: a put to C fails at once, handing its item back. */
static void sp_put_after_stop(sh_actor *self, sh_stack *st) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  sp_item *it = sp_item_new(w);
  sh_future *f = it != NULL ? sh_put(st, w->c, &it->hdr, SH_FOREVER) : NULL;
  if (!SH_SCN_CHECK(w->s, f != NULL && sh_future_done(f), "producer %u: put after the stop %s",
                    sh_scn_id(self), f == NULL ? "not made" : "did not fail at once"))
    return;
  sp_take_back(self, f, it);
}

/* Puts items to C until one fails (the stop); each waits for the one before. */
static sh_yield sp_producer(sh_actor *self, sh_stack *st) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  sp_put_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == P_PUT && sh_future_error(l->f) != 0) {
    sp_take_back(self, l->f, l->item);
    sp_put_after_stop(self, st);
    sp_one_less(self);
    return sh_return(st, NULL);
  }
  if (!SH_SCN_CHECK(w->s, l->sent < SP_ITEMS, "producer %u: all %d items admitted",
                    sh_scn_id(self), SP_ITEMS) ||
      (l->item = sp_item_new(w)) == NULL) {
    give_up(self);
    return sh_return(st, NULL);
  }
  l->sent++;
  l->f = sh_put(st, w->c, &l->item->hdr, SH_FOREVER);
  if (!SH_SCN_CHECK(w->s, l->f != NULL, "producer %u: put not made", sh_scn_id(self))) {
    give_up(self);
    return sh_return(st, NULL);
  }
  if (!sh_future_done(l->f)) sp_waits(self);
  return sh_suspend(st, P_PUT);
}

/* ---- S --------------------------------------------------------------------------- */

/* Everyone waits: A for room in C's ask mailbox (H's ask holds the slot,
 * and A asks only once C is held), every producer for room in the full
 * notice mailbox. */
static bool sp_all_waiting(sp_world *w) {
  sh_mailbox_stats a = box_stats(w->s, w->c, SH_ASK);
  sh_mailbox_stats n = box_stats(w->s, w->c, SH_NOTICE);
  if (a.waiting != 1 || n.waiting != SP_PRODUCERS || n.depth != SP_CAP) return false;
  SH_SCN_CHECK(w->s, a.depth == 1, "C's ask mailbox holds %u, want H's ask", a.depth);
  check_bounded(w->s, "C's notices", &n, SP_CAP);
  check_bounded(w->s, "C's asks", &a, 1);
  return true;
}

/* The sends that cannot wait, before the stop: refused for want of room
 * (the mailbox is full and senders wait). The sh_notice_try item stays S's
 * and is tried again after the stop. */
static sp_item *sp_refusals(sh_actor *self) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  sp_item *keep = sp_item_new(w), *lost = sp_item_new(w);
  if (keep == NULL || lost == NULL) {
    sh_msg_free(keep != NULL ? &keep->hdr : NULL);
    sh_msg_free(lost != NULL ? &lost->hdr : NULL);
    return NULL;
  }
  int rc = sh_notice_try(w->c, &keep->hdr);
  SH_SCN_CHECK(w->s, rc == -EAGAIN, "S: sh_notice_try to the full mailbox: %d", rc);
  sp_mark(w, lost, F_REFUSED);
  rc = sh_notice(w->c, &lost->hdr); /* frees it on -EAGAIN */
  SH_SCN_CHECK(w->s, rc == -EAGAIN, "S: sh_notice to the full mailbox: %d", rc);
  return keep;
}

static void sp_stop_c(sh_actor *self) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  sp_item *keep = sp_refusals(self);
  atomic_store_explicit(&w->stopped, true, memory_order_relaxed);
  SH_SCN_CHECK(w->s, sh_stop(w->c) == 0, "S: sh_stop failed");
  /* The stop refused every waiting sender on the spot. */
  sh_mailbox_stats n = box_stats(w->s, w->c, SH_NOTICE);
  SH_SCN_CHECK(w->s, n.waiting == 0, "%u senders still waiting after the stop", n.waiting);
  if (keep == NULL) return;
  int rc = sh_notice_try(w->c, &keep->hdr);
  SH_SCN_CHECK(w->s, rc == -ESHUTDOWN, "S: sh_notice_try to the stopped C: %d", rc);
  sp_mark(w, keep, F_BACK);
  sh_msg_free(&keep->hdr);
}

static sh_yield sp_stopper(sh_actor *self, sh_stack *st) {
  sp_world *w = sh_scn_state(sh_scn_of(self));
  if (!atomic_load_explicit(&w->stopped, memory_order_relaxed) && sp_all_waiting(w))
    sp_stop_c(self);
  return sh_return(st, NULL);
}

/* ---- the run ------------------------------------------------------------------------ */

static const sh_actor_class sp_c_class = {
    .name = "stop_consumer",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(sh_future *),
    .init = sh_scn_actor_init,
    .notice = sp_c_notice,
    .ask = sp_c_ask,
    .notice_capacity = SP_CAP,
    .ask_capacity = 1,
};
static const sh_actor_class sp_h_class = {
    .name = "stop_holder",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(sh_future *),
    .init = sh_scn_actor_init,
    .ask = sp_h_ask,
};
static const sh_actor_class sp_a_class = {
    .name = "stop_asker",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(sh_future *),
    .init = sh_scn_actor_init,
    .notice = sp_a_notice,
};
static const sh_actor_class sp_p_class = {
    .name = "stop_producer",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(sp_put_locals),
    .init = sh_scn_actor_init,
    .notice = sp_producer,
};
static const sh_actor_class sp_s_class = {
    .name = "stop_stopper",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = sp_stopper,
};

/* SP_PRE items, then the hold: SP_CAP messages, all fit. */
static int sp_fill(sp_world *w) {
  for (uint32_t i = 0; i < SP_PRE; i++) {
    sp_item *it = sp_item_new(w);
    if (it == NULL) return -ENOMEM;
    int rc = sh_notice_try(w->c, &it->hdr);
    if (rc != 0) {
      sh_msg_free(&it->hdr);
      return rc;
    }
  }
  sp_hold *h = sh_msg_new(sp_hold);
  if (h == NULL) return -ENOMEM;
  int rc = sh_notice_try(w->c, &h->hdr);
  if (rc != 0) sh_msg_free(&h->hdr);
  return rc;
}

static int sp_setup(sh_scn *s, sh_system *sys) {
  sp_world *w = sh_scn_state(s);
  uint32_t workers = sh_scn_workers(s);
  w->s = s;
  atomic_store(&w->left, SP_PRODUCERS + 3);
  int rc = sh_scn_spawn_on(s, sys, &sp_c_class, 0, 0, &w->c);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &sp_h_class, 0, 1 % workers, &w->h);
  if (rc == 0) rc = sh_scn_spawn(s, sys, &sp_a_class, 0, 1, &w->a);
  if (rc == 0) rc = sh_scn_spawn(s, sys, &sp_s_class, 0, 1, &w->stopper);
  if (rc == 0) rc = sp_fill(w);
  if (rc == 0)
    rc = sh_scn_spawn_each(s, sys, &sp_p_class, SP_PRODUCERS,
                           SH_SCN_EACH_PINNED | SH_SCN_EACH_KICK, NULL);
  return rc;
}

static void sp_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  sp_world *w = sh_scn_state(s);
  SH_SCN_CHECK(s, atomic_load(&w->stopped), "C was never stopped");
  uint32_t n = atomic_load(&w->items), count[F_FREED] = {0};
  for (uint32_t i = 0; i < n && i < SP_MAX_ITEMS; i++) {
    unsigned f = atomic_load(&w->fate[i]);
    unsigned end = f & (unsigned)~F_FREED;
    SH_SCN_CHECK(s, f & F_FREED, "item %u never freed", i);
    SH_SCN_CHECK(s, end == 0 || end == F_RECEIVED || end == F_BACK || end == F_REFUSED,
                 "item %u ended two ways (%#x)", i, f);
    count[end]++;
  }
  /* end 0: freed with nothing else done to it, dropped with C's mailbox. */
  SH_SCN_CHECK_EQ(s, count[F_RECEIVED], SP_PRE, "items received");
  SH_SCN_CHECK_EQ(s, count[0], SP_CAP, "items dropped with the mailbox");
  SH_SCN_CHECK_EQ(s, count[F_REFUSED], 1, "items refused");
  /* Each producer: the waiting put and the one after the stop; S's try. */
  SH_SCN_CHECK_EQ(s, count[F_BACK], 2 * SP_PRODUCERS + 1, "items handed back");
  SH_SCN_CHECK_EQ(s, n, SP_PRE + SP_CAP + 2 * SP_PRODUCERS + 2, "items made");
  sh_mailbox_stats ms = box_stats(s, w->c, SH_NOTICE);
  /* S's two sends refused for want of room; the try after the stop is not one. */
  SH_SCN_CHECK_EQ(s, ms.refused, 2, "refusals counted");
}

static const sh_scenario bounded_stop = {
    .name = "bounded_stop",
    .summary = "senders waiting on a full mailbox when it stops: -ESHUTDOWN, items handed back",
    .workers = 2,
    .state_size = sizeof(sp_world),
    .setup = sp_setup,
    .verify = sp_verify,
};
SH_SCENARIO(bounded_stop);

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
  r->sink ^= burn(r->sink + hops, BS_BURN);
  atomic_fetch_add_explicit(&w->hops, 1, memory_order_relaxed);
  if (hops == 0) {
    bs_one_less(w);
    return sh_return(st, NULL);
  }
  bs_token *t = sh_msg_new(bs_token, .hops = hops - 1);
  int rc = t != NULL ? sh_notice(w->ring[(r->a.id + 1) % BS_RING], &t->hdr) : -ENOMEM;
  if (!SH_SCN_CHECK(r->a.s, rc == 0, "ring %u: token not passed: %d", r->a.id, rc)) give_up(self);
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
  item_in_order(s, "sink", w->sink_next, BS_THREADS, sh_stack_msg_as(st, kl_item));
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
  sh_mailbox_stats ms = box_stats(s, w->sink, SH_NOTICE);
  check_bounded(s, "sink", &ms, BS_SINK_CAP);
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
