/*
 * A house run: takes messages from the mailboxes in dispatch order (reply,
 * exception, ask, notice, event) up to the house's budget and hands each
 * to what handles it: a new stack (or a batch stack) for an ask or a
 * notice, the future it answers for a reply or an exception, the timer or
 * the waiter it carries for an event. The order holds for every take, not
 * only for what was there when the run began: before each take the run
 * looks whether a mailbox above has a message (one that came while a
 * handler ran) and goes back up for it. A barrier holds asks and notices
 * back; once the house is stopped, seen before each take, it refuses them,
 * and a batch not started yet with them. Then the house settles (house.c).
 * An ordered class's notices come in its ask mailbox (send.h): each message
 * taken there goes to the handler of its kind, in the order taken.
 */
#include "actor/dispatch.h"

#include "base/atomic.h"
#include "base/check.h"
#include "base/model.h"
#include "actor/future.h"
#include "actor/house.h"
#include "actor/hstore.h"
#include "mem/msg.h"
#include "actor/stack.h"
#include "sched/system.h"
#include "time/timer.h"
#include "sched/worker.h"

/* Events handled per run even when the budget is spent. */
#define SH_EVENT_SHARE 16u

/* Looked at before every take of an ask or a notice, not once per run: a
 * stop that lands while a handler runs lets that handler finish, but
 * nothing queued may start after it (sh_stop), and a run can go on for
 * many handlers. seq_cst: as the settle's look (house.c), the stop
 * handshake; the run's last look decides its stop work. One load each,
 * with no write: cheap next to a take. */
static bool stopped(const sh_house *h) {
  return sh_atomic_load(&h->life, memory_order_seq_cst) & SH_LIFE_STOPPED;
}

/* Whether m was sent to an earlier generation of the house (it raced with
 * the retirement, house.h): it is refused, never handled. */
static bool stale(const sh_house *h, const sh_msg *m) {
  /* The take gave a slot back and cleared its bit (house.h), and a request
   * never carries a refusal: the tag is the generation alone, compared whole. */
  SH_ASSERT(!(m->internal & (SH_MSG_SLOT | SH_MSG_REFUSAL)));
  return m->internal != sh_house_gen(h);
}

static bool is_barrier(const sh_house *h, const sh_msg *m) {
  if (m->type->flags & SH_MSG_BARRIER) return true;
  return h->cls->barrier != NULL && SH_USER(h->cls->barrier(h->actor, m));
}

static void refuse_msg(sh_house *h, sh_msg *m, int error) {
  (void)h;
  if (m->type->kind == SH_ASK && sh_house_refuse_with(m->sender, m->id, error, m)) return;
  sh_msg_free(m);
}

static void dispatch_single(sh_house *h, sh_msg *m) {
  /* A barrier holds the request mailboxes back (next_box), and a batch is
   * never one: no request starts while a barrier stack lives. */
  SH_ASSERT(!h->barrier);
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

/* A stopped house answers asks with -ESHUTDOWN and drops notices. The run
 * read the stop flag (before each take: a stop that lands while a handler
 * runs lets it finish, and nothing queued starts after it), or m came for
 * an earlier generation, or the house is retired. */
static void on_refused(sh_house *h, sh_msg *m) {
  SH_MODEL_NOTE(SH_MODEL_DECIDE, &h->mb.head[0], m->internal, SH_MODEL_REFUSED);
  sh_count(h->sys, SH_C_DROPPED_STOPPED);
  refuse_msg(h, m, -ESHUTDOWN);
}

typedef struct batcher {
  sh_house *h;
  sh_stack_kind kind;
  sh_stack_fn fn;
  sh_filter_fn filter;
  sh_stack *st;
  sh_msg_kind takes; /* the kind it batches (0: none) */
  bool mixed;        /* an ordered class's ask mailbox: notices come too */
} batcher;

/* The batcher of asks or notices. */
static batcher batcher_of(sh_house *h, sh_msg_kind kind, bool mixed) {
  /* Only requests are batched: a message of another kind in a request
   * mailbox (an ordered one's kinds come from its messages) is a bug. */
  SH_ASSERT(kind == SH_ASK || kind == SH_NOTICE);
  const sh_actor_class *c = h->cls;
  if (kind == SH_ASK)
    return (batcher){h, SH_STACK_BATCH_ASK, c->batch_ask, c->batch_ask_filter, NULL, kind, mixed};
  return (batcher){h, SH_STACK_BATCH_NOTICE, c->batch_notice, c->batch_notice_filter, NULL, kind,
                   mixed};
}

/* The batcher of a request mailbox (none for the others: fn is NULL). */
static batcher batcher_for(sh_house *h, sh_box box) {
  if (box == SH_BOX_ASK) return batcher_of(h, SH_ASK, h->cls->ordered);
  if (box == SH_BOX_NOTICE) return batcher_of(h, SH_NOTICE, false);
  return (batcher){h, SH_STACK_NOTICE, NULL, NULL, NULL, 0, false};
}

/* A batch that never started, once its house stopped: refused as the
 * messages would have been had they been taken after the stop. Counted
 * dropped, not delivered: its handler never saw them. */
static void batch_refuse(sh_house *h, sh_stack *st) {
  /* Never run (epoch 0): its handler answered nothing, so each ask is
   * refused here, once. */
  SH_ASSERT(st->epoch == 0 &&
            (st->kind == SH_STACK_BATCH_ASK || st->kind == SH_STACK_BATCH_NOTICE));
  sh_count_n(h->sys, SH_C_DROPPED_STOPPED, st->nbatch);
  for (uint32_t i = 0; i < st->nbatch; i++) {
    sh_batch_entry *e = &st->batch[i];
    if (e->msg->type->kind == SH_ASK &&
        sh_house_refuse_with(e->reply_to, e->ask_id, -ESHUTDOWN, e->msg))
      e->msg = NULL; /* it carries the refusal now */
  }
  sh_stack_discard(st); /* frees the messages */
}

static void batch_flush(batcher *b) {
  sh_stack *st = b->st;
  if (st == NULL) return;
  /* Made with its first message (batch_add), flushed when full. */
  SH_ASSERT(st->nbatch >= 1 && st->nbatch <= b->h->max_batch);
  b->st = NULL;
  bool stop = stopped(b->h);
  SH_MODEL_NOTE(SH_MODEL_DECIDE, &b->h->mb.head[0], SH_MODEL_BATCH, stop ? SH_MODEL_REFUSED : 0);
  if (stop) {
    batch_refuse(b->h, st);
    return;
  }
  /* Counted when handed over, not when taken into the batch. */
  sh_count_n(b->h->sys, SH_C_DELIVERED, st->nbatch);
  sh_stack_run(st);
}

/* Adds m to the batch being built; false when it must go alone. */
static bool batch_add(batcher *b, sh_msg *m) {
  sh_house *h = b->h;
  if (b->fn == NULL || b->filter == NULL || is_barrier(h, m) || !SH_USER(b->filter(h->actor, m)))
    return false;
  if (b->st == NULL) {
    b->st = sh_stack_new(h, b->kind, h->max_batch);
    if (b->st == NULL) {
      sh_count(h->sys, SH_C_DELIVERED);
      refuse_msg(h, m, -ENOMEM); /* it belongs to a batch: never to the single handler */
      return true;
    }
  }
  /* The stack has room for max_batch entries, and a full batch was flushed
   * at once (below). */
  SH_ASSERT(b->st->nbatch < h->max_batch);
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

/* An ask or a notice to its handler: into the batch being built, or alone
 * once that batch went first (arrival order). An ordered class's asks and
 * notices come mixed, in the order sent: a message of the other kind ends
 * the batch being built, which goes first, and batches of its own kind
 * begin. */
static void deliver(batcher *b, sh_msg *m) {
  /* Read live, of this generation (take_from). */
  SH_MODEL_NOTE(SH_MODEL_DECIDE, &b->h->mb.head[0], m->internal, 0);
  /* Only an ordered class's ask mailbox holds both kinds (send.h
   * sh_send_box); the others hold their own. */
  SH_ASSERT(b->mixed || m->type->kind == b->takes);
  if (m->type->flags & SH_MSG_RUNTIME) {
    /* The runtime's own notice (an accepted connection, which becomes the
     * actor's channel): its type's handler takes it; the actor's handlers
     * hear of it through what that makes, never as this notice. */
    batch_flush(b);
    sh_count(b->h->sys, SH_C_DELIVERED);
    sh_event_run(b->h, m);
    return;
  }
  if (b->mixed && m->type->kind != b->takes) {
    batch_flush(b);
    *b = batcher_of(b->h, m->type->kind, true);
  }
  if (batch_add(b, m)) return;
  batch_flush(b);
  sh_count(b->h->sys, SH_C_DELIVERED);
  dispatch_single(b->h, m);
}

static void on_answer(sh_house *h, sh_msg *m) { sh_future_answer(h, m); }

/* An answer or an event for a retired house: nobody waits for it. */
static void on_late(sh_house *h, sh_msg *m) {
  SH_SOMETIMES(m->type->kind == SH_REPLY, "dispatch: a reply to a retired house dropped");
  if (m->type->kind == SH_REPLY || sh_msg_is_exception(m)) sh_count(h->sys, SH_C_REPLIES_UNKNOWN);
  sh_msg_free(m);
}

/* Where a run is in the mailboxes reply..notice. */
typedef struct walk {
  sh_house *h;
  sh_box box;     /* the mailbox of the last take (its batch is being built) */
  unsigned stuck; /* mailboxes whose counted message a take could not reach */
  bool ready_ran; /* deferred stacks had their turn */
  batcher b;      /* the batch being built from box */
} walk;

static bool is_request(sh_box box) { return box == SH_BOX_ASK || box == SH_BOX_NOTICE; }

/* The highest mailbox, reply..notice, with a message to take now, or
 * SH_BOX_EVENT when there is none. A barrier holds both request mailboxes
 * back (not once the actor stopped: they are refused then). The runner is
 * the mailboxes' only consumer, so a look at their counts is cheap and what
 * it sees stays there. relaxed: a message pushed before the running handler
 * returned is seen (the handler's return is ordered after it); one pushed
 * concurrently is seen a take later at worst, and no order tells those
 * apart. A stuck mailbox is not looked at again this run: the run would
 * bounce on it. *end: the mailbox the look stopped before. */
static sh_box next_box(const walk *w, sh_box *end) {
  const sh_house *h = w->h;
  /* The walk by index is the dispatch order (house.h), and each mailbox
   * walked has its bit in the stuck mask. */
  _Static_assert(SH_BOX_REPLY == 0 && SH_BOX_EXCEPTION == 1 && SH_BOX_ASK == 2 &&
                     SH_BOX_NOTICE == 3 && SH_BOX_EVENT == 4,
                 "mailboxes in dispatch order, events last");
  *end = h->barrier && !stopped(h) ? SH_BOX_ASK : SH_BOX_EVENT;
  for (sh_box b = SH_BOX_REPLY; b < *end; b++)
    if (!(w->stuck & 1u << b) && sh_mailbox_size(&h->mb, b) > 0) return b;
  return SH_BOX_EVENT;
}

/* Takes from `box` next. A batch being built from another mailbox goes
 * first: its messages were taken before whatever the run moves for. */
static void walk_to(walk *w, sh_box box) {
  if (box == w->box) return;
  /* Only a request mailbox builds batches (batcher_for). */
  SH_ASSERT(w->b.st == NULL || is_request(w->box));
  batch_flush(&w->b);
  w->box = box;
  w->b = batcher_for(w->h, box);
}

/* Takes a message of box and hands it on: 1, or 0 when a take could not
 * reach the counted message. */
static uint32_t take_from(walk *w, sh_box box) {
  sh_house *h = w->h;
  walk_to(w, box);
  sh_msg *m = sh_house_take(h, box);
  if (m == NULL) {
    /* Counted but not linked yet (a producer half-way, mailbox.c). Marked
     * once, as next_box looks at it no more: at most four times a run. */
    SH_ASSERT(!(w->stuck & 1u << box));
    SH_SOMETIMES(true, "dispatch: a counted message not linked yet (a push half-way)");
    SH_MODEL_NOTE(SH_MODEL_STUCK, &h->mb.head[box], 0, box);
    w->stuck |= 1u << box;
    return 0;
  }
  SH_TRACE_MSG(SH_TRACE_DELIVER, h->seq, m, 0);
  if (!is_request(box))
    on_answer(h, m);
  else if (stopped(h) || stale(h, m)) {
    SH_SOMETIMES(!stopped(h), "dispatch: a request to an earlier generation refused");
    on_refused(h, m);
  } else {
    deliver(&w->b, m);
  }
  return 1;
}

/* Replies, exceptions, asks and notices up to the budget, each take from
 * the highest mailbox that has a message: what arrives during the run goes
 * ahead of the lower mailboxes, as what was there when it began does.
 * Deferred stacks run once, before the first request (continuations before
 * new work, as replies are); a stack deferred during the run waits for the
 * next. Bounded: each turn takes a message (n + 1), runs the ready stacks
 * once (n + at least 1), or marks a mailbox stuck (at most four times:
 * take_from); n ends at most at the budget (dispatch.h). */
static uint32_t drain_in_order(sh_house *h, uint32_t budget) {
  walk w = {.h = h, .box = SH_BOX_REPLY, .b = batcher_for(h, SH_BOX_REPLY)};
  uint32_t n = 0;
  while (n < budget) {
    sh_box end;
    sh_box box = next_box(&w, &end);
    SH_MODEL_NOTE(SH_MODEL_LOOK, &h->mb.head[0], end, box);
    if (box >= SH_BOX_ASK && !w.ready_ran) {
      w.ready_ran = true;
      if (!sh_list_empty(&h->ready)) {
        walk_to(&w, SH_BOX_EVENT);
        uint32_t ran = sh_stack_run_ready(h, budget - n);
        SH_ASSERT(ran >= 1 && ran <= budget - n);
        SH_MODEL_NOTE(SH_MODEL_READY_RAN, &h->mb.head[0], ran, 0);
        n += ran;
        continue;
      }
    }
    if (box == SH_BOX_EVENT) break;
    n += take_from(&w, box);
  }
  batch_flush(&w.b);
  SH_ASSERT(n <= budget);
  return n;
}

/* Events: timers, ticks, ask timeouts, senders' waiters coming back from a
 * gate, a channel's readiness. Each is of the runtime's own type, which
 * carries its handler (msg.h). */
static void on_event(sh_house *h, sh_msg *m) {
  SH_ASSERT(m->type->flags & SH_MSG_RUNTIME);
  sh_event_run(h, m);
}

/* Takes up to `limit` events and handles each. */
static uint32_t drain_events(sh_house *h, uint32_t limit) {
  /* A retired house's events are dropped (run_vacant): their handlers
   * would reach an actor that is gone. */
  SH_ASSERT(!h->vacant);
  uint32_t n = 0;
  while (n < limit) {
    sh_msg *m = sh_house_take(h, SH_BOX_EVENT);
    if (m == NULL) break;
    n++;
    SH_TRACE_MSG(SH_TRACE_DELIVER, h->seq, m, 0);
    on_event(h, m);
  }
  return n;
}

/* The greatest backlog of the request mailboxes, seen as a run begins (the
 * runner is their only writer). relaxed: a metric. */
static void note_high_water(sh_house *h) {
  _Static_assert(SH_BOX_NOTICE - SH_BOX_ASK + 1 == SH_REQ_BOXES, "sh_req indexes high_water");
  for (int b = SH_BOX_ASK; b <= SH_BOX_NOTICE; b++) {
    uint32_t n = sh_mailbox_size(&h->mb, b);
    if (n > sh_atomic_load(&h->high_water[sh_req(b)], memory_order_relaxed))
      sh_atomic_store(&h->high_water[sh_req(b)], n, memory_order_relaxed);
  }
}

/* Every pending ask of this actor fails (its stacks resume and see it),
 * then the stop hook runs, once, after the last handler: a hook that frees
 * the actor's resources is never followed by a handler using them. New asks
 * and sleeps from a stopped house fail at once (send.c), so the loop is
 * bounded by the futures pending when it starts. */
static void finish_stop(sh_worker *w, sh_house *h) {
  if (!h->mounted) return;
  if (!sh_list_empty(&h->attached)) h->close_attached(h);
  sh_timer_cancel_all(w, h);
  sh_future_fail_all(h);
  /* The stacks it resumed made no future that waits (a stopped house's
   * sends and sleeps fail at once): the table holds the kept ones alone. */
  SH_ASSERT(sh_futtable_count(&h->futures) == h->stop_kept);
  /* Stacks deferred to a later run (stack.h) are still to end, and futures
   * kept for their waiter's return: the hook waits for them all. */
  if (!h->stop_done && sh_list_empty(&h->ready) && sh_futtable_count(&h->futures) == 0) {
    h->stop_done = true;
    if (h->cls->stop != NULL) SH_USER_VOID(h->cls->stop(h->actor));
  }
}

/* Whether a stopped actor is done with: nothing left that could run it
 * again or that its house would have to keep. */
static bool done_with(const sh_house *h) {
  /* The stop hook ran after the last handler (finish_stop), and a stopped
   * house starts no stack: none outlives the hook. */
  SH_ASSERT(!h->stop_done || sh_list_empty(&h->stacks));
  if (!h->stop_done || !sh_list_empty(&h->stacks) || !sh_list_empty(&h->timers) ||
      sh_futtable_count(&h->futures) != 0 || !sh_list_empty(&h->attached))
    return false;
  for (int b = 0; b < SH_BOXES; b++)
    if (sh_mailbox_nonempty(&h->mb, b)) return false;
  /* A stop may still be refusing waiters at the gates: it pokes us after. */
  return sh_house_gates_empty(h);
}

/* A retired house has no actor: what still arrives (a send that raced with
 * the retirement, a late answer) is refused or dropped. */
static uint32_t run_vacant(sh_house *h) {
  /* Retired with nothing left (done_with): no stack or future of the last
   * actor meets what still arrives. */
  SH_ASSERT(sh_list_empty(&h->stacks) && sh_futtable_count(&h->futures) == 0);
  uint32_t taken = 0;
  for (sh_box b = 0; b < SH_BOXES; b++) {
    sh_msg *m;
    /* Bounded by the budget; settle runs it again for the rest. */
    for (uint32_t n = 0; n < h->max_per_run && (m = sh_house_take(h, b)) != NULL; n++, taken++)
      (is_request(b) ? on_refused : on_late)(h, m);
  }
  return taken;
}

void sh_dispatch_run(sh_worker *w, sh_house *h) {
  SH_ASSERT(sh_atomic_load(&h->state, memory_order_relaxed) == SH_SCHEDULED);
  /* relaxed: only the runner that took it from a queue writes RUNNING. */
  sh_atomic_store(&h->state, SH_RUNNING, memory_order_relaxed);
  if (h->vacant) {
    uint32_t n = run_vacant(h);
    sh_house_settle(h);
    if (n == 0) sh_plat_yield_cpu(); /* a producer half-way: see below */
    return;
  }
  sh_count(h->sys, SH_C_RUNS);
  if (w->index != h->owner) sh_count(h->sys, SH_C_STEALS);
  SH_TRACE(SH_TRACE_RUN, h->seq, h->cls->name, 0);
  note_high_water(h);
  SH_MODEL_NOTE(SH_MODEL_RUN, &h->mb.head[0], h->max_per_run, 0);

  uint32_t budget = h->max_per_run;
  uint32_t n = drain_in_order(h, budget);
  /* Events come last in the order but always get a share, so a flood of
   * asks or notices cannot hold back the actor's timers and timeouts. */
  uint32_t left = budget - n;
  n += drain_events(h, left > SH_EVENT_SHARE ? left : SH_EVENT_SHARE);
  bool stop = stopped(h);
  if (stop) finish_stop(w, h);
  SH_MODEL_NOTE(SH_MODEL_RUN_END, &h->mb.head[0], 0, 0);
  SH_TRACE(SH_TRACE_RUN_END, h->seq, h->cls->name, 0);
  if (stop && done_with(h)) sh_hstore_retire(h, !sh_system_is_shut(h->sys));
  sh_house_settle(h);
  /* A run that found a counted message it could not take: a producer was
   * paused between swapping the mailbox's head and linking its message, and
   * the message before it is unreachable until it links (mailbox.c). settle
   * keeps the house ready, so without this the worker would run it again
   * and again, spinning on a producer that may need this very CPU. */
  if (n == 0 && !stop) sh_plat_yield_cpu();
}

