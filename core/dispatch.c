/*
 * A house run: takes messages from the mailboxes in dispatch order (reply,
 * exception, ask, notice, event) up to the house's budget and hands each
 * to what handles it: a new stack (or a batch stack) for an ask or a
 * notice, the future it answers for a reply or an exception, the timer or
 * the waiter it carries for an event. A barrier holds asks and notices
 * back; a stopped house refuses them. Then the house settles (house.c).
 */
#include "dispatch.h"

#include "check.h"
#include "future.h"
#include "gate.h"
#include "house.h"
#include "hstore.h"
#include "mem.h"
#include "msg.h"
#include "stack.h"
#include "timer.h"
#include "worker.h"

/* Events handled per run even when the budget is spent. */
#define SH_EVENT_SHARE 16u

static bool stopped(const sh_house *h) {
  /* seq_cst: as the settle's look (house.c): the stop handshake. */
  return atomic_load_explicit(&h->life, memory_order_seq_cst) & SH_LIFE_STOPPED;
}

/* Whether m was sent to an earlier generation of the house (it raced with
 * the retirement, house.h): it is refused, never handled. */
static bool stale(const sh_house *h, const sh_msg *m) { return m->internal != sh_house_gen(h); }

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

/* A stopped house answers asks with -ESHUTDOWN and drops notices. */
static void on_refused(sh_house *h, sh_msg *m) {
  sh_count(h->sys, SH_C_DROPPED_STOPPED);
  refuse_msg(h, m, -ESHUTDOWN);
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
  /* Capture who to answer now, while the message is certainly alive: read
   * after the batch is recycled, sender and id would belong to whatever
   * reused the memory. */
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
    sh_msg *m = sh_house_take(h, box);
    if (m == NULL) break;
    n++;
    if (stale(h, m)) {
      on_refused(h, m);
      continue;
    }
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

static void on_answer(sh_house *h, sh_msg *m) { sh_future_answer(h, m); }

/* An answer or an event for a retired house: nobody waits for it. */
static void on_late(sh_house *h, sh_msg *m) {
  if (m->type->kind == SH_REPLY) sh_count(h->sys, SH_C_REPLIES_UNKNOWN);
  sh_msg_free(m);
}

/* Takes up to `budget` messages of one mailbox and hands each to fn. */
static uint32_t drain_box(sh_house *h, sh_box box, uint32_t budget,
                          void (*fn)(sh_house *h, sh_msg *m)) {
  uint32_t n = 0;
  while (n < budget) {
    sh_msg *m = sh_house_take(h, box);
    if (m == NULL) break;
    n++;
    SH_TRACE(SH_TRACE_DELIVER, h->seq, m->type->name, 0);
    fn(h, m);
  }
  return n;
}

/* Events: timers, ticks, and senders' waiters coming back from a gate. */
static void on_event(sh_house *h, sh_msg *m) {
  if (m->type == &sh_waiter_type) {
    sh_future_waiter_back(h, (sh_waiter *)m);
    return;
  }
  if (m->type == &sh_timer_type && ((sh_timer *)m)->kind == SH_TIMER_ASK) {
    /* An ask's timeout: its future, if the answer did not come first. */
    sh_timer *t = (sh_timer *)m;
    sh_future *f = sh_future_find(h, t->id);
    /* Not f's timer any more: the answer came first, or f was kept past a
     * stop for its waiter's return (future.c), which decides its outcome;
     * the timer had fired already and could not be cancelled. */
    if (f != NULL && f->timer == t) {
      f->timer = NULL; /* this node is the event; it is freed below, not cancelled */
      sh_future_time_out(h, f);
    }
    sh_mem_free(t);
    return;
  }
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
  sh_future_fail_all(h);
  /* Stacks deferred to a later run (stack.h) are still to end, and futures
   * kept for their waiter's return: the hook waits for them all. */
  if (!h->stop_done && sh_list_empty(&h->ready) && sh_dispatcher_count(&h->futures) == 0) {
    h->stop_done = true;
    if (h->cls->stop != NULL) h->cls->stop(h->actor);
  }
}

/* Whether a stopped actor is done with: nothing left that could run it
 * again or that its house would have to keep. */
static bool done_with(const sh_house *h) {
  if (!h->stop_done || !sh_list_empty(&h->stacks) || !sh_list_empty(&h->timers) ||
      sh_dispatcher_count(&h->futures) != 0)
    return false;
  for (int b = 0; b < SH_BOXES; b++)
    if (sh_mailbox_nonempty(&h->mb[b])) return false;
  return true;
}

/* A retired house has no actor: what still arrives (a send that raced with
 * the retirement, a late answer) is refused or dropped. */
static void run_vacant(sh_house *h) {
  for (sh_box b = 0; b < SH_BOXES; b++)
    drain_box(h, b, h->max_per_run, b == SH_BOX_ASK || b == SH_BOX_NOTICE ? on_refused : on_late);
}

void sh_dispatch_run(sh_worker *w, sh_house *h) {
  SH_ASSERT(atomic_load_explicit(&h->state, memory_order_relaxed) == SH_SCHEDULED);
  /* relaxed: only the runner that took it from a queue writes RUNNING. */
  atomic_store_explicit(&h->state, SH_RUNNING, memory_order_relaxed);
  if (h->vacant) {
    run_vacant(h);
    sh_house_settle(h);
    return;
  }
  sh_count(h->sys, SH_C_RUNS);
  if (w->index != h->owner) sh_count(h->sys, SH_C_STEALS);
  SH_TRACE(SH_TRACE_RUN, h->seq, h->cls->name, 0);
  note_high_water(h);

  uint32_t budget = h->max_per_run;
  uint32_t n = drain_box(h, SH_BOX_REPLY, budget, on_answer);
  n += drain_box(h, SH_BOX_EXCEPTION, budget - n, on_answer);
  /* Continuations before new work, as replies are. */
  if (!sh_list_empty(&h->ready)) n += sh_stack_run_ready(h, budget - n);
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
  if (stop && done_with(h)) sh_hstore_retire(h);
  sh_house_settle(h);
  /* A run that found a counted message it could not take: a producer was
   * paused between swapping the mailbox's head and linking its message, and
   * the message before it is unreachable until it links (mailbox.c). settle
   * keeps the house ready, so without this the worker would run it again
   * and again, spinning on a producer that may need this very CPU. */
  if (n == 0 && !stop) sh_plat_yield_cpu();
}

