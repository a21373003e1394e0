/*
 * ActorHouse: mailboxes, the scheduling state machine and dispatch.
 *
 * The put/settle handshake. A producer links its message, counts it (puts++,
 * seq_cst) and then reads the state (seq_cst); the runner, when it finds
 * nothing to do, stores WAITING (seq_cst) and then reads the counts again
 * (seq_cst). Under sequential consistency at least one of them sees the
 * other's write, so a message is never left in a waiting house: either the
 * producer sees WAITING and queues the house, or the runner sees the count
 * and does (for the last producer to count, every message is linked). This
 * is why "has messages" is settled after the drain from fresh reads, never
 * by a flag cleared after draining (the original bug 2).
 */
#include "house.h"

#include <assert.h>
#include <stdlib.h>

#include "bridge.h"
#include "gate.h"
#include "msg.h"
#include "stack.h"
#include "system.h"
#include "timer.h"
#include "worker.h"

/* Events handled per run even when the budget is spent. */
#define SH_EVENT_SHARE 16u

static bool stopped(const sh_house *h) {
  /* seq_cst: sh_stop's store of `stopped` and its poke's load of the state
   * form a store-load handshake with settle's store of WAITING and its load
   * of `stopped`; with release/acquire both sides could miss each other and
   * leave a stopped house waiting with its stop work undone. */
  return atomic_load_explicit(&h->stopped, memory_order_seq_cst);
}

/* What the runner knows of its house, taken while it still owns it: after
 * settle stores WAITING another worker may own the house, so the re-check
 * must read nothing but this view and atomics. */
typedef struct work_view {
  uint32_t taken[SH_BOXES];
  bool held;      /* a barrier holds asks and notices back */
  bool ready;     /* deferred stacks wait to run again */
  bool owes_stop; /* mounted, and the stop hook or pending-ask failures due */
} work_view;

static work_view view_of(const sh_house *h) {
  work_view v;
  for (int b = 0; b < SH_BOXES; b++) v.taken[b] = h->mb[b].taken;
  v.held = h->barrier;
  v.ready = h->ready != NULL;
  /* Stop work: futures to fail, or the hook once every future ended. Futures
   * kept for their waiter's return are not work: that return pokes us. */
  uint32_t futures = sh_dispatcher_count(&h->futures);
  v.owes_stop = h->mounted && (futures > h->stop_kept || (!h->stop_done && futures == 0));
  return v;
}

static bool view_has_work(const sh_house *h, const work_view *v) {
  bool stop = stopped(h);
  if (v->ready || (stop && v->owes_stop)) return true;
  for (int b = 0; b < SH_BOXES; b++) {
    if (v->held && !stop && (b == SH_BOX_ASK || b == SH_BOX_NOTICE)) continue;
    /* seq_cst: the load half of the put/settle handshake (file comment). */
    if (sh_mailbox_backlog((uint32_t)atomic_load_explicit(&h->mb[b].puts, memory_order_seq_cst),
                           v->taken[b]) > 0)
      return true;
  }
  return false;
}

bool sh_house_has_work(const sh_house *h) {
  work_view v = view_of(h);
  return view_has_work(h, &v);
}

void sh_house_init(sh_house *h, sh_system *sys, const sh_actor_class *c, sh_house_state state) {
  atomic_init(&h->state, (int)state);
  /* A new actor has no pending promise: high priority (seed 001's rule). */
  atomic_init(&h->high, true);
  atomic_init(&h->stopped, false);
  for (int b = 0; b < SH_BOXES; b++) {
    sh_mailbox_init(&h->mb[b]);
    atomic_init(&h->high_water[b], 0);
  }
  h->sys = sys;
  h->cls = c;
}

void sh_house_poke(sh_house *h) {
  /* seq_cst: the load half of the put/settle handshake (file comment). */
  int s = atomic_load_explicit(&h->state, memory_order_seq_cst);
  SH_YIELD("house.poke");
  if (s != SH_WAITING) {
    /* A bridge's thread is its house's runner: wake it instead. The put's
     * seq_cst count is the waker's store in the bridge's handshake. */
    if (s == SH_OUTSIDE) sh_bridge_wake((sh_bridge *)h);
    return;
  }
  /* One winner among concurrent producers (and the runner's re-check). */
  if (atomic_compare_exchange_strong_explicit(&h->state, &s, SH_READY, memory_order_seq_cst,
                                              memory_order_seq_cst))
    sh_worker_enqueue(h);
}

void sh_house_put(sh_house *h, sh_box box, sh_msg *m) {
  if (box != SH_BOX_EVENT) sh_count(h->sys, SH_C_SENT);
  uint32_t n = sh_mailbox_put(&h->mb[box], m);
  /* Priority is decided at enqueue: a producer may raise it, only the owner
   * lowers it (settle). relaxed: a hint read when the house is queued. */
  if ((box == SH_BOX_REPLY && n > SH_HIGH_REPLIES) || (box == SH_BOX_EVENT && n > SH_HIGH_EVENTS))
    atomic_store_explicit(&h->high, true, memory_order_relaxed);
  sh_house_poke(h);
}

/* The runner's take from a mailbox: a bounded mailbox gets the slot back.
 * Inline: on every message's path. */
static inline sh_msg *take(sh_house *h, sh_box box) {
  sh_msg *m = sh_mailbox_take(&h->mb[box]);
  if (m != NULL && h->gate[box] != NULL) sh_gate_release(h->gate[box]);
  return m;
}

void sh_house_stop(sh_house *h) {
  sh_gate *ask = h->gate[SH_BOX_ASK], *notice = h->gate[SH_BOX_NOTICE];
  /* The gates close before `stopped` is published: a runner that sees it
   * drains the mailboxes, and each take would otherwise hand the freed
   * slot to a waiter, whose put would succeed only for its message to be
   * dropped. */
  if (ask != NULL) sh_gate_close(ask);
  if (notice != NULL) sh_gate_close(notice);
  /* seq_cst: the store half of the stop handshake with settle (see
   * stopped()); the poke below is its load half. */
  atomic_store_explicit(&h->stopped, true, memory_order_seq_cst);
  /* Waiters hear it now, not when the house next runs; after `stopped`,
   * so that a woken sender that tries again is refused at once. */
  if (ask != NULL) sh_gate_refuse(ask);
  if (notice != NULL) sh_gate_refuse(notice);
  sh_house_poke(h);
}

void sh_house_reply(sh_house *to, uint64_t id, sh_msg *reply) {
  if (to == NULL) {
    sh_msg_free(reply);
    return;
  }
  reply->id = id;
  reply->sender = NULL;
  sh_house_put(to, SH_BOX_REPLY, reply);
}

void sh_house_refuse(sh_house *to, uint64_t id, int error) {
  if (to == NULL) return;
  sh_msg *e = sh_msg_alloc(&sh_exception_type);
  /* Out of memory: the asker's timeout, or shutdown, ends its wait. */
  if (e == NULL) return;
  e->id = id;
  e->error = error;
  sh_house_put(to, SH_BOX_EXCEPTION, e);
}

static void update_priority(sh_house *h) {
  for (int b = 0; b < SH_BOXES; b++) sh_mailbox_publish(&h->mb[b]);
  bool high = sh_mailbox_size(&h->mb[SH_BOX_REPLY]) > SH_HIGH_REPLIES ||
              sh_mailbox_size(&h->mb[SH_BOX_EVENT]) > SH_HIGH_EVENTS ||
              sh_dispatcher_count(&h->futures) == 0;
  atomic_store_explicit(&h->high, high, memory_order_relaxed);
}

/* After a run or a mount: requeue, or wait with the race re-check. */
static void settle(sh_house *h) {
  update_priority(h);
  work_view v = view_of(h);
  if (view_has_work(h, &v)) {
    /* release: whoever pops it next sees our writes (the queue lock orders
     * them too); no other thread can claim a house that is not WAITING. */
    atomic_store_explicit(&h->state, SH_READY, memory_order_release);
    sh_worker_enqueue(h);
    return;
  }
  /* seq_cst: the store half of the handshake (file comment). From here a
   * producer may queue the house and another worker run it. */
  atomic_store_explicit(&h->state, SH_WAITING, memory_order_seq_cst);
  SH_YIELD("house.settle");
  if (view_has_work(h, &v)) sh_house_poke(h);
}

void sh_house_mount(sh_worker *w, sh_house *h) {
  (void)w;
  int s = SH_CREATED;
  /* acq_rel: the mounting queue's lock already orders the spawner's writes
   * before us; the CAS documents the one legal transition and would catch a
   * house mounted twice (the assert). Producers never touch CREATED. */
  atomic_compare_exchange_strong_explicit(&h->state, &s, SH_MOUNTING, memory_order_acq_rel,
                                          memory_order_acquire);
  assert(atomic_load_explicit(&h->state, memory_order_relaxed) == SH_MOUNTING);
  h->mounted = true;
  if (h->cls->mount != NULL) h->cls->mount(h->actor);
  settle(h);
}

/* ---- dispatch -------------------------------------------------------- */

static bool is_barrier(const sh_house *h, const sh_msg *m) {
  if (m->type->flags & SH_MSG_BARRIER) return true;
  return h->cls->barrier != NULL && h->cls->barrier(h->actor, m);
}

static void refuse_msg(sh_house *h, sh_msg *m, int error) {
  (void)h;
  if (m->type->kind == SH_ASK) sh_house_refuse(m->sender, m->id, error);
  sh_msg_free(m);
}

static void dispatch_single(sh_house *h, sh_msg *m) {
  bool ask = m->type->kind == SH_ASK;
  sh_stack_fn fn = ask ? h->cls->ask : h->cls->notice;
  if (fn == NULL) {
    refuse_msg(h, m, -ENOTSUP);
    return;
  }
  sh_stack *st = sh_stack_new(h, ask ? SH_STACK_ASK : SH_STACK_NOTICE, 0);
  if (st == NULL) {
    refuse_msg(h, m, -ENOMEM);
    return;
  }
  st->msg = m;
  if (ask) {
    st->reply_to = m->sender;
    st->ask_id = m->id;
  }
  if (is_barrier(h, m)) {
    st->barrier = true;
    h->barrier = true;
  }
  sh_stack_run(st);
}

typedef struct batcher {
  sh_house *h;
  sh_stack_kind kind;
  sh_stack_fn fn;
  sh_filter_fn filter;
  sh_stack *st;
} batcher;

static void batch_flush(batcher *b) {
  sh_stack *st = b->st;
  if (st == NULL) return;
  b->st = NULL;
  sh_stack_run(st);
}

/* Adds m to the batch being built; false when it must go alone. */
static bool batch_add(batcher *b, sh_msg *m) {
  sh_house *h = b->h;
  if (b->fn == NULL || b->filter == NULL || is_barrier(h, m) || !b->filter(h->actor, m))
    return false;
  if (b->st == NULL) {
    b->st = sh_stack_new(h, b->kind, h->max_batch);
    if (b->st == NULL) {
      refuse_msg(h, m, -ENOMEM); /* it belongs to a batch: never to the single handler */
      return true;
    }
  }
  /* Capture who to answer now, while the message is certainly alive (the
   * original read sender and id after recycling the envelopes: bug 3). */
  sh_batch_entry *e = &b->st->batch[b->st->nbatch++];
  e->msg = m;
  e->reply_to = m->type->kind == SH_ASK ? m->sender : NULL;
  e->ask_id = m->id;
  if (b->st->nbatch == h->max_batch) batch_flush(b);
  return true;
}

/* Asks or notices, in order, up to the budget; stops at a barrier. */
static uint32_t drain_requests(sh_house *h, sh_box box, uint32_t budget) {
  bool ask = box == SH_BOX_ASK;
  batcher b = {h, ask ? SH_STACK_BATCH_ASK : SH_STACK_BATCH_NOTICE,
               ask ? h->cls->batch_ask : h->cls->batch_notice,
               ask ? h->cls->batch_ask_filter : h->cls->batch_notice_filter, NULL};
  uint32_t n = 0;
  while (n < budget && !h->barrier) {
    sh_msg *m = take(h, box);
    if (m == NULL) break;
    n++;
    SH_TRACE(SH_TRACE_DELIVER, h->seq, m->type->name, 0);
    sh_count(h->sys, SH_C_DELIVERED);
    if (batch_add(&b, m)) continue;
    /* Keep arrival order: what was batched before this message goes first. */
    batch_flush(&b);
    dispatch_single(h, m);
  }
  batch_flush(&b);
  return n;
}

static void handle_reply(sh_house *h, sh_msg *m, bool exception) {
  sh_future *f = sh_dispatcher_pop(&h->futures, m->id);
  if (f == NULL) {
    sh_count(h->sys, SH_C_REPLIES_UNKNOWN);
    sh_msg_free(m);
    return;
  }
  sh_count(h->sys, SH_C_DELIVERED);
  SH_TRACE(SH_TRACE_REPLY, h->seq, m->type->name, SH_TRACE_FLOW(h->seq, m->id));
  if (exception) {
    int err = m->error;
    sh_msg_free(m);
    sh_stack_complete(f, NULL, err);
  } else {
    sh_stack_complete(f, m, 0);
  }
}

static void on_reply(sh_house *h, sh_msg *m) { handle_reply(h, m, false); }
static void on_exception(sh_house *h, sh_msg *m) { handle_reply(h, m, true); }

/* A stopped house answers asks with -ESHUTDOWN and drops notices. */
static void on_refused(sh_house *h, sh_msg *m) {
  sh_count(h->sys, SH_C_DROPPED_STOPPED);
  refuse_msg(h, m, -ESHUTDOWN);
}

/* Takes up to `budget` messages of one mailbox and hands each to fn. */
static uint32_t drain_box(sh_house *h, sh_box box, uint32_t budget,
                          void (*fn)(sh_house *h, sh_msg *m)) {
  uint32_t n = 0;
  while (n < budget) {
    sh_msg *m = take(h, box);
    if (m == NULL) break;
    n++;
    SH_TRACE(SH_TRACE_DELIVER, h->seq, m->type->name, 0);
    fn(h, m);
  }
  return n;
}

/* Events: timers, ticks, and senders' waiters coming back from a gate. */
static void on_event(sh_house *h, sh_msg *m) {
  if (m->type == &sh_waiter_type)
    sh_stack_waiter_back(h, (sh_waiter *)m);
  else
    sh_timer_event(h, m);
}

/* The greatest backlog of the request mailboxes, seen as a run begins (the
 * runner is their only writer). relaxed: a metric. */
static void note_high_water(sh_house *h) {
  for (int b = SH_BOX_ASK; b <= SH_BOX_NOTICE; b++) {
    uint32_t n = sh_mailbox_size(&h->mb[b]);
    if (n > atomic_load_explicit(&h->high_water[b], memory_order_relaxed))
      atomic_store_explicit(&h->high_water[b], n, memory_order_relaxed);
  }
}

/* Every pending ask of this actor fails (its stacks resume and see it),
 * then the stop hook runs, once, after the last handler: a hook that frees
 * the actor's resources is never followed by a handler using them. New asks
 * from a stopped house fail at once (sh_ask), so the loop is bounded by the
 * promises pending when it starts. */
static void finish_stop(sh_worker *w, sh_house *h) {
  if (!h->mounted) return;
  sh_timer_cancel_all(w, h);
  sh_stack_fail_all(h);
  /* Stacks deferred to a later run (stack.h) are still to end, and futures
   * kept for their waiter's return: the hook waits for them all. */
  if (!h->stop_done && h->ready == NULL && sh_dispatcher_count(&h->futures) == 0) {
    h->stop_done = true;
    if (h->cls->stop != NULL) h->cls->stop(h->actor);
  }
}

void sh_house_run(sh_worker *w, sh_house *h) {
  assert(atomic_load_explicit(&h->state, memory_order_relaxed) == SH_SCHEDULED);
  /* relaxed: only the runner that took it from a queue writes RUNNING. */
  atomic_store_explicit(&h->state, SH_RUNNING, memory_order_relaxed);
  sh_count(h->sys, SH_C_RUNS);
  if (w->index != h->owner) sh_count(h->sys, SH_C_STEALS);
  SH_TRACE(SH_TRACE_RUN, h->seq, h->cls->name, 0);
  note_high_water(h);

  uint32_t budget = h->max_per_run;
  uint32_t n = drain_box(h, SH_BOX_REPLY, budget, on_reply);
  n += drain_box(h, SH_BOX_EXCEPTION, budget - n, on_exception);
  /* Continuations before new work, as replies are. */
  if (h->ready != NULL) n += sh_stack_run_ready(h, budget - n);
  if (stopped(h)) {
    n += drain_box(h, SH_BOX_ASK, budget - n, on_refused);
    n += drain_box(h, SH_BOX_NOTICE, budget - n, on_refused);
  } else {
    n += drain_requests(h, SH_BOX_ASK, budget - n);
    n += drain_requests(h, SH_BOX_NOTICE, budget - n);
  }
  /* Events come last in the order but always get a share, so a flood of
   * asks or notices cannot hold back the actor's timers and timeouts. */
  uint32_t left = budget - n;
  n += drain_box(h, SH_BOX_EVENT, left > SH_EVENT_SHARE ? left : SH_EVENT_SHARE, on_event);
  bool stop = stopped(h);
  if (stop) finish_stop(w, h);
  SH_TRACE(SH_TRACE_RUN_END, h->seq, h->cls->name, 0);
  settle(h);
  /* A run that found a counted message it could not take: a producer was
   * paused between swapping the mailbox's head and linking its message, and
   * the message before it is unreachable until it links (mailbox.c). settle
   * keeps the house ready, so without this the worker would run it again
   * and again, spinning on a producer that may need this very CPU. */
  if (n == 0 && !stop) sh_plat_yield_cpu();
}

void sh_house_destroy(sh_house *h) {
  while (h->stacks != NULL) sh_stack_discard(h->stacks);
  for (int b = 0; b < SH_BOXES; b++) {
    sh_msg *m;
    while ((m = sh_mailbox_take(&h->mb[b])) != NULL) sh_msg_free(m);
  }
  sh_dispatcher_destroy(&h->futures);
  sh_gate_free(h->gate[SH_BOX_ASK]);
  sh_gate_free(h->gate[SH_BOX_NOTICE]);
  free(h->actor);
  free(h);
}
