/*
 * Futures: making, completing and freeing them, and the ways they end
 * early (timeouts, the house's stop, the stack's end).
 *
 * Ownership. A future belongs to its stack from birth to free: pending in
 * its pending list, then completed in its completed list until the handler
 * has seen it (stack.c recycles it). While pending it is also an entry of
 * its house's table, so that an answer, a timeout or a waiter's return can
 * find it by id; only the house's runner touches either.
 */
#include "actor/future.h"
#include "base/atomic.h"

#include <string.h>

#include "base/check.h"
#include "base/model.h"
#include "actor/gate.h"
#include "actor/house.h"
#include "mem/mem.h"
#include "mem/msg.h"
#include "actor/stack.h"
#include "time/timer.h"
#include "sched/worker.h"

sh_future *sh_future_new(sh_stack *st) {
  /* Made by a handler invocation (epochs count from 1): recycle_seen
   * (stack.c) tells the futures an invocation has seen by their epoch. */
  SH_ASSERT(st->epoch > 0);
  /* The house's table gets its buckets with its first ask (futtable.h). */
  if (sh_futtable_reserve(&st->house->futures) != 0) return NULL;
  sh_future *f = sh_mem_alloc(sizeof(*f));
  if (f == NULL) return NULL;
  memset(f, 0, sizeof(*f));
  f->stack = st;
  f->node.id = ++st->house->next_ask_id;
  f->epoch = st->epoch;
  sh_list_push_front(&st->pending, &f->link);
  st->npending++;
  st->made++;
  return f;
}

void sh_future_track(sh_future *f) {
  sh_house *h = f->stack->house;
  sh_count(h->sys, SH_C_ASKS);
  sh_futtable_push(&h->futures, &f->node);
}

static void cancel_timer(sh_future *f) {
  if (f->timer == NULL) return;
  sh_timer_cancel_node(sh_worker_current(), f->timer);
  f->timer = NULL;
}

/* A future lets go of its owner as it goes. */
static void release(sh_future *f) {
  if (f->owner != NULL) f->owner->ops->unhold(f->owner);
  sh_mem_free(f);
}

void sh_future_unmake(sh_future *f) {
  sh_stack *st = f->stack;
  SH_ASSERT(!f->done && f->waiter == NULL);
  cancel_timer(f);
  sh_list_remove(&f->link);
  st->npending--;
  st->made--;
  release(f);
}

sh_msg *sh_future_reclaim(sh_future *f) {
  sh_waiter *w = f->waiter;
  if (w == NULL) return NULL;
  /* Made for f (send.c waiter_new): its return finds f by this id. */
  SH_ASSERT(w->sender == f->stack->house && w->id == sh_future_id(f));
  f->waiter = NULL;
  sh_house *t = w->target;
  if (!sh_gate_cancel(t->gate_mem[sh_req((sh_box)w->box)], w)) return NULL;
  sh_msg *m = w->msg;
  w->msg = NULL;
  sh_msg_free(&w->hdr);
  return m;
}

void sh_future_free(sh_future *f) {
  /* A completed future holds no timer: its outcome, whichever came first,
   * cancelled its timeout (or was the timeout). A timeout left armed could
   * fire after the free, and the cancel below would touch a freed node. */
  SH_INVARIANT(!f->done || f->timer == NULL);
  if (f->waiter != NULL) sh_msg_free(sh_future_reclaim(f));
  cancel_timer(f);
  sh_msg_free(f->reply);
  release(f);
}

/* Records f's outcome; the stack resumes later (sh_future_complete) or, if
 * it is running, sees it when its handler returns. */
static void record(sh_future *f, sh_msg *reply, int error) {
  sh_stack *st = f->stack;
  SH_ASSERT(!f->done && st->npending > 0);
  if (f->waiter != NULL) {
    /* Completed while waiting for room (a timeout, the asker stopped): a
     * put hands its notice back, an ask's was never sent. */
    sh_msg *back = sh_future_reclaim(f);
    if (back != NULL && f->put && reply == NULL)
      reply = back;
    else
      sh_msg_free(back);
  }
  f->done = true;
  sh_count(st->house->sys, SH_C_ASKS_RESOLVED);
  f->reply = reply;
  f->error = error;
  cancel_timer(f);
  sh_list_remove(&f->link);
  sh_list_push_front(&st->completed, &f->link);
  st->npending--;
  st->fresh_done++;
  if (st->running && error != 0) st->failed_now++;
}

void sh_future_end_now(sh_future *f, sh_msg *back, int error) {
  sh_count(f->stack->house->sys, SH_C_ASKS);
  record(f, back, error);
}

void sh_future_complete(sh_future *f, sh_msg *reply, int error) {
  record(f, reply, error);
  sh_stack_wake(f->stack);
}

sh_future *sh_future_find(sh_house *h, uint64_t id) {
  sh_ftnode *n = sh_futtable_find(&h->futures, id);
  return n != NULL ? sh_future_of_node(n) : NULL;
}

static sh_future *pop(sh_house *h, uint64_t id) {
  sh_ftnode *n = sh_futtable_pop(&h->futures, id);
  return n != NULL ? sh_future_of_node(n) : NULL;
}

void sh_future_answer(sh_house *h, sh_msg *m) {
  /* From the reply or exception mailbox: a reply, an exception (a reply
   * type too), or a refused ask's own message carrying its refusal. */
  SH_ASSERT(m->type->kind == SH_REPLY || (m->internal & SH_MSG_REFUSAL));
  sh_future *f = pop(h, m->id);
  SH_MODEL_NOTE(SH_MODEL_ANSWER_IN, h, m->id, f != NULL);
  if (f == NULL) {
    sh_count(h->sys, SH_C_REPLIES_UNKNOWN);
    sh_msg_free(m);
    return;
  }
  sh_count(h->sys, SH_C_DELIVERED);
  SH_TRACE_MSG(SH_TRACE_REPLY, h->seq, m, SH_TRACE_FLOW(h->seq, m->id));
  if (sh_msg_is_exception(m)) {
    int err = m->error;
    sh_msg_free(m);
    sh_future_complete(f, NULL, err);
  } else {
    sh_future_complete(f, m, 0);
  }
}

/* f is no longer kept past its house's stop. */
bool sh_future_resolve(sh_house *h, uint64_t id, sh_msg *reply, int error) {
  /* An outcome is a reply, or an error (a negative errno) without one. */
  SH_ASSERT(error <= 0 && (reply == NULL || error == 0));
  sh_future *f = pop(h, id);
  if (f == NULL) {
    sh_msg_free(reply);
    return false;
  }
  sh_future_complete(f, reply, error);
  return true;
}

static void unkeep(sh_house *h, sh_future *f) {
  if (!f->node.kept) return;
  f->node.kept = false;
  SH_ASSERT(h->stop_kept > 0);
  h->stop_kept--;
}

/* A stack waiter came back from a gate (its header is the event): ends
 * the put it waited for, or fails the ask it held when refused. */
static void waiter_back(sh_house *h, sh_msg *m) {
  sh_waiter *w = (sh_waiter *)m;
  int err = w->hdr.error;
  /* Back at the house of the future it was made for, admitted (0) or
   * refused (a negative errno). */
  SH_ASSERT(w->sender == h && err <= 0);
  sh_future *f = sh_future_find(h, w->id);
  sh_msg *back = NULL;
  /* A refused ask's message goes with its waiter: it never reached its target. */
  if (err != 0 && w->msg != NULL && w->msg->type->kind == SH_ASK)
    SH_MODEL_NOTE(SH_MODEL_ASK_WITHDRAWN, h, w->id, 0);
  if (f != NULL) {
    /* f no longer waits for its waiter. */
    f->waiter = NULL;
    f->returning = false;
    unkeep(h, f);
    /* An admitted ask goes on waiting for its reply; anything else ends. */
    if (f->put || err != 0) {
      pop(h, w->id);
      if (f->put) {
        back = w->msg; /* NULL when admitted: the gate pushed it */
        w->msg = NULL;
      }
    } else {
      f = NULL;
    }
  }
  /* No future left (it timed out or its stack ended): nothing to tell; the
   * waiter's drop frees a refused message it still holds. */
  sh_msg_free(&w->hdr);
  if (f != NULL) sh_future_complete(f, back, err);
}

const sh_event_type sh_waiter_type = {
    {"sh_waiter", sizeof(sh_waiter), SH_NOTICE, SH_MSG_RUNTIME, sh_waiter_drop, NULL}, waiter_back};

/* f ends early (a timeout, its house stops). True when it must not: a put
 * whose waiter the gate already popped waits for the waiter's return, which
 * says whether the notice got in (an ask ends either way: its reply, if
 * any, comes as unknown). Else a waiter still queued is taken back: *back
 * is a put's notice, handed back (an ask's is freed). */
static bool ends_by_return(sh_future *f, sh_msg **back) {
  /* Still pending: taken from the table, where only pending ones are. */
  SH_ASSERT(!f->done);
  *back = NULL;
  if (f->waiter != NULL) {
    sh_msg *m = sh_future_reclaim(f);
    if (m == NULL)
      f->returning = true;
    else if (f->put)
      *back = m;
    else
      sh_msg_free(m);
  }
  return f->put && f->returning;
}

void sh_future_fail_all(sh_house *h) {
  sh_ftnode *n;
  /* Bounded: each turn ends a future (the stopped house makes no new ones:
   * its sends and sleeps fail at once) or marks it kept, which pop_any skips. */
  uint32_t turns = sh_futtable_count(&h->futures);
  while ((n = sh_futtable_pop_any(&h->futures)) != NULL) {
    SH_ASSERT(turns-- > 0);
    sh_future *f = sh_future_of_node(n);
    sh_msg *back;
    if (ends_by_return(f, &back)) {
      f->node.kept = true;
      h->stop_kept++;
      /* Its outcome is the return's now, not a timeout's. */
      cancel_timer(f);
      sh_futtable_push(&h->futures, &f->node);
      continue;
    }
    /* The end of the ask's flow in a trace, as a reply or a timeout is. */
    SH_TRACE(SH_TRACE_REPLY, h->seq, "ESHUTDOWN", SH_TRACE_FLOW(h->seq, sh_future_id(f)));
    sh_future_complete(f, back, -ESHUTDOWN);
  }
}

/* Future f's timeout fired (f still in h's table): completes it with
 * -ETIMEDOUT, unless it is a put whose waiter the gate already popped (the
 * waiter's return, on its way, says whether the notice got in). */
static void time_out(sh_house *h, sh_future *f) {
  /* Its timer was armed for its own house (send.c arm): the event came
   * back there. */
  SH_ASSERT(f->stack->house == h);
  sh_msg *back;
  if (ends_by_return(f, &back)) return;
  pop(h, sh_future_id(f));
  if (f->sleep) {
    sh_future_complete(f, back, 0);
    return;
  }
  sh_count(h->sys, SH_C_ASKS_TIMED_OUT);
  SH_TRACE(SH_TRACE_TIMEOUT, h->seq, "timeout", SH_TRACE_FLOW(h->seq, sh_future_id(f)));
  sh_future_owner *o = f->owner;
  if (o == NULL || o->ops->expired == NULL) {
    sh_future_complete(f, back, -ETIMEDOUT);
    return;
  }
  /* The owner acts on the timeout (a connect gives its socket back now,
   * not when the network gives up on it). Held across the completion,
   * which may run the stack and free the future. */
  o->ops->hold(o);
  sh_future_complete(f, back, -ETIMEDOUT);
  o->ops->expired(o);
  o->ops->unhold(o);
}

/* An ask's timeout reached its house: its future, if the answer did not
 * come first. */
static void timeout_event(sh_house *h, sh_msg *m) {
  sh_timer *t = (sh_timer *)m;
  /* An ask of this house's, whose ids grow for its whole life (house.h):
   * never 0, never past the last one made. */
  SH_ASSERT(t->id != 0 && t->id <= h->next_ask_id);
  sh_future *f = sh_future_find(h, t->id);
  /* Not f's timer any more: the answer came first, or f was kept past a
   * stop for its waiter's return, which decides its outcome; the timer had
   * fired already and could not be cancelled. */
  if (f != NULL && f->timer == t) {
    f->timer = NULL; /* this node is the event; it is freed below, not cancelled */
    time_out(h, f);
  }
  sh_mem_free(t);
}

/* Named as an actor timer's event is: traces show both as sh_timer. */
const sh_event_type sh_future_timeout_type = {
    {"sh_timer", sizeof(sh_timer), SH_NOTICE, SH_MSG_RUNTIME, NULL, NULL}, timeout_event};

void sh_future_forget(sh_future *f) {
  sh_house *h = f->stack->house;
  /* Forgetting resolves the ask (sh_stats: each ask resolved once). */
  sh_count(h->sys, SH_C_ASKS_RESOLVED);
  unkeep(h, f); /* a late return finds no future and frees itself */
  sh_ftnode *n = sh_futtable_pop(&h->futures, sh_future_id(f));
  SH_ASSERT(n == &f->node || n == NULL);
  sh_future_free(f);
}

/* ---- the public accessors ---------------------------------------------- */

bool sh_future_done(const sh_future *f) { return f != NULL && f->done; }
int sh_future_error(const sh_future *f) {
  SH_FROM_USER();
  if (f == NULL) return -EINVAL;
  return f->done ? f->error : -EINPROGRESS;
}
sh_msg *sh_future_msg(const sh_future *f) { return f != NULL && f->done ? f->reply : NULL; }
sh_msg *sh_future_take(sh_future *f) {
  SH_FROM_USER();
  if (f == NULL || !f->done) return NULL;
  /* A failed future holds no reply but a put's notice, handed back. */
  SH_ASSERT(f->reply == NULL || f->error == 0 || f->put);
  sh_msg *m = f->reply;
  f->reply = NULL;
  return m;
}
