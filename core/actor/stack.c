/*
 * Stacks: running a handler invocation, deciding when it runs again, and
 * how it ends (sh_return, sh_throw, sh_batch_reply) and what its asker
 * hears.
 *
 * A handler invocation runs with st->running set; futures that complete
 * during it (an ask to a stopped actor fails at once) are only recorded
 * (future.c). After the handler returns SH_SUSPEND the stack runs again at
 * once when its wait is already over, otherwise it waits for the house to
 * deliver replies, exceptions or timeouts, which wake it (sh_stack_wake).
 * A batch ask stack answers each ask of its batch, with copies of one
 * reply where the handler gave one for all.
 */
#include "actor/stack.h"

#include <fiu-local.h>
#include <string.h>

#include "actor/future.h"
#include "actor/house.h"
#include "base/atomic.h"
#include "base/check.h"
#include "base/faults.h"
#include "mem/mem.h"
#include "mem/msg.h"

/* Invocations in a row whose futures all failed at once: a handler that
 * keeps asking a stopped actor is stopped, not spun forever. */
#define SH_STACK_MAX_FAILING 1024

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

sh_stack *sh_stack_new(sh_house *h, sh_stack_kind kind, uint32_t batch_cap) {
  /* Entries for a batch stack only, as many as its house batches. */
  bool batch = kind == SH_STACK_BATCH_ASK || kind == SH_STACK_BATCH_NOTICE;
  SH_ASSERT(batch ? batch_cap >= 1 && batch_cap <= h->max_batch : batch_cap == 0);
  sh_fault_return_on("sh/stack/new", NULL);
  size_t locals = align16(h->cls->locals_size);
  size_t size = sizeof(sh_stack) + locals + (size_t)batch_cap * sizeof(sh_batch_entry);
  sh_stack *st = sh_mem_alloc(size);
  if (st == NULL) return NULL;
  memset(st, 0, size);
  st->kind = kind;
  st->house = h;
  sh_list_init(&st->pending);
  sh_list_init(&st->completed);
  if (batch_cap > 0) st->batch = (sh_batch_entry *)(void *)(st->locals + locals);
  sh_list_push_front(&h->stacks, &st->link);
  return st;
}

/* ---- accessors ------------------------------------------------------- */

int sh_stack_state(const sh_stack *st) { return st->state; }
void *sh_stack_locals(sh_stack *st) { return st->locals; }
sh_actor *sh_stack_actor(const sh_stack *st) { return st->house->actor; }
sh_msg *sh_stack_msg(const sh_stack *st) { return st->msg; }
size_t sh_stack_batch_len(const sh_stack *st) { return st->nbatch; }
sh_msg *sh_stack_batch_msg(const sh_stack *st, size_t i) {
  SH_FROM_USER();
  return i < st->nbatch ? st->batch[i].msg : NULL;
}

sh_yield sh_suspend(sh_stack *st, int next_state) {
  SH_FROM_USER();
  /* From st's own handler, whose return it is (invoke reads it). */
  SH_ASSERT(st->running);
  st->next_state = next_state;
  st->any = false;
  return SH_SUSPEND;
}

sh_yield sh_suspend_any(sh_stack *st, int next_state) {
  SH_FROM_USER();
  SH_ASSERT(st->running); /* as sh_suspend */
  st->next_state = next_state;
  st->any = true;
  return SH_SUSPEND;
}

/* ---- running --------------------------------------------------------- */

static bool wait_over(const sh_stack *st) {
  /* The count the wait decides on is the pending list's length (every
   * link and unlink of it counts): none counted, none linked. */
  SH_INVARIANT((st->npending == 0) == sh_list_empty(&st->pending));
  return st->npending == 0 || (st->any && st->fresh_done > 0);
}

/* Recycles the completed futures made by earlier invocations: they completed
 * before this invocation began, so it has seen them. The ones this
 * invocation made (even if already complete) stay for the next. Bounded by
 * the completed list: the walk unlinks only the node it stands on, and
 * freeing a future touches no stack's list, so it reaches the head. (Not
 * counted: the stack keeps no count of that list, which would cost every
 * completion a store.) */
static void recycle_seen(sh_stack *st) {
  sh_list *l = sh_list_first(&st->completed);
  while (l != NULL) {
    sh_list *next = sh_list_next(&st->completed, l);
    sh_future *f = sh_future_of_link(l);
    /* Completed (record moved it here): out of its house's table, so
     * freeing it leaves nothing there to find it. */
    SH_INVARIANT(f->done);
    if (f->epoch < st->epoch) {
      sh_list_remove(l);
      sh_future_free(f);
    }
    l = next;
  }
}

static void finish(sh_stack *st) {
  sh_house *h = st->house;
  sh_stack_sink *sink = st->sink;
  if (st->deferred) {
    sh_list_remove(&st->ready_link);
    st->deferred = false;
  }
  sh_list *l;
  /* Bounded by the stack's futures: each turn frees one. */
  while ((l = sh_list_pop_front(&st->pending)) != NULL) {
    SH_ASSERT(st->npending > 0);
    st->npending--;
    sh_future_forget(sh_future_of_link(l));
  }
  SH_ASSERT(st->npending == 0);
  while ((l = sh_list_pop_front(&st->completed)) != NULL) sh_future_free(sh_future_of_link(l));
  sh_stack_pay_refusals(st);
  sh_msg_free(st->msg);
  for (uint32_t i = 0; i < st->nbatch; i++) sh_msg_free(st->batch[i].msg);
  if (st->barrier) {
    SH_ASSERT(h->barrier);
    h->barrier = false;
  }
  sh_list_remove(&st->link);
  sh_mem_free(st);
  /* Last: what its maker does with the result (a channel writes it) may
   * run other stacks. */
  if (sink != NULL) sink->ops->end(sink);
}

void sh_stack_discard(sh_stack *st) {
  st->done = true;
  finish(st);
}

static sh_stack_fn handler_of(const sh_stack *st) {
  /* A channel's request stack reports how it ended to its channel (its
   * sink, set before it runs): without one its result would be lost. */
  SH_ASSERT(st->kind != SH_STACK_CHANNEL || st->sink != NULL);
  const sh_actor_class *c = st->house->cls;
  switch (st->kind) {
  case SH_STACK_NOTICE: return c->notice;
  case SH_STACK_ASK: return c->ask;
  case SH_STACK_BATCH_NOTICE: return c->batch_notice;
  case SH_STACK_BATCH_ASK: return c->batch_ask;
  case SH_STACK_CHANNEL: return c->channel;
  default: return NULL;
  }
}

/* One handler invocation; true when the stack must run again at once. */
static bool invoke(sh_stack *st) {
  sh_stack_fn fn = handler_of(st);
  /* A deferred stack runs from its house's ready list only, which unmarks
   * it first: run by anything else, it would run twice. */
  SH_ASSERT(fn != NULL && !st->running && !st->done && !st->deferred);
  st->epoch++;
  st->fresh_done = 0;
  st->made = 0;
  st->failed_now = 0;
  st->running = true;
  sh_yield y = SH_USER(fn(st->house->actor, st));
  st->running = false;
  st->failing = st->made > 0 && st->failed_now == st->made ? st->failing + 1 : 0;
  if (y == SH_RETURN && !st->done) sh_return(st, NULL);
  if (st->done) return false;
  bool moved = st->next_state != st->state;
  st->state = st->next_state;
  /* The futures this invocation already saw complete are done with when it
   * waits for all (or moves on). A resumable state in place keeps them: the
   * handler is still counting its fan-out. */
  if (moved || !st->any) recycle_seen(st);
  if (st->npending == 0 && st->made == 0) {
    /* Suspended with nothing to wait for: it would never resume. */
    sh_throw(st, -EDEADLK);
    return false;
  }
  return wait_over(st);
}

static void defer(sh_stack *st) {
  st->deferred = true;
  sh_list_push_back(&st->house->ready, &st->ready_link);
}

void sh_stack_run(sh_stack *st) {
  uint32_t quota = st->house->max_per_run;
  /* Bounded by the quota: past it a still-ready stack is deferred. */
  for (uint32_t i = 1; invoke(st); i++) {
    if (st->failing >= SH_STACK_MAX_FAILING) {
      sh_throw(st, -ELOOP);
      break;
    }
    if (i >= quota) {
      defer(st);
      return;
    }
  }
  /* Left waiting, it waits on a pending future, whose completion wakes it
   * (sh_stack_wake): nothing else would run it again. */
  SH_ASSERT(st->done || st->npending > 0);
  if (st->done) finish(st);
}

uint32_t sh_stack_run_ready(sh_house *h, uint32_t budget) {
  uint32_t n = 0;
  sh_list *l;
  /* Bounded by the budget (a stack deferred again goes to the tail). */
  while (n < budget && (l = sh_list_pop_front(&h->ready)) != NULL) {
    sh_stack *st = (sh_stack *)(void *)((char *)l - offsetof(sh_stack, ready_link));
    SH_ASSERT(st->deferred);
    st->deferred = false;
    n++;
    sh_stack_run(st);
  }
  return n;
}

void sh_stack_wake(sh_stack *st) {
  /* A finished stack is freed at once (sh_stack_run): one woken done can
   * only be inside its handler, whose return finishes it. */
  SH_ASSERT(st->running || !st->done);
  /* A deferred stack runs from the ready list, never twice. */
  if (!st->running && !st->done && !st->deferred && wait_over(st)) sh_stack_run(st);
}

static bool is_reply(const sh_msg *m) { return m != NULL && m->type->kind == SH_REPLY; }

/* Refuses the ask of batch entry e, or of an ask stack. Without memory for
 * an exception the ask's own message carries the refusal, but only once the
 * stack finishes (sh_stack_pay_refusals): until its handler returns, the
 * handler may still read the message, which the asker frees. */
static void refuse_entry(sh_batch_entry *e, int error) {
  if (!sh_house_refuse(e->reply_to, e->ask_id, error)) e->owed = error;
}

static void refuse_stack(sh_stack *st, int error) {
  if (!sh_house_refuse(st->reply_to, st->ask_id, error)) st->owed = error;
}

void sh_stack_pay_refusals(sh_stack *st) {
  /* Owed only by an ask stack, a refusal: a negative errno. */
  SH_ASSERT(st->owed <= 0 && (st->owed == 0 || st->kind == SH_STACK_ASK));
  if (st->owed != 0) {
    sh_house_refuse_in(st->reply_to, st->ask_id, st->owed, st->msg);
    st->msg = NULL;
  }
  for (uint32_t i = 0; i < st->nbatch; i++) {
    sh_batch_entry *e = &st->batch[i];
    if (e->owed == 0) continue;
    sh_house_refuse_in(e->reply_to, e->ask_id, e->owed, e->msg);
    e->msg = NULL;
  }
}

/* A copy of reply for one more asker of a batch; NULL when it cannot be copied. */
static sh_msg *copy_reply(const sh_msg *reply) {
  SH_ASSERT(reply->type->kind == SH_REPLY); /* sh_return let only a reply through */
  if (reply->type->drop != NULL) return NULL; /* owns resources: a shallow copy would double-free */
  sh_msg *c = sh_msg_alloc(reply->type);
  if (c == NULL) return NULL;
  return sh_msg_fill(c, reply, reply->type->size);
}

/* Answers every ask of the batch not answered yet: with copies of reply
 * (the last one gets reply itself), or with `error` when reply is NULL. A
 * reply that cannot be copied (its type owns resources, or no memory) fails
 * the asks it could not reach with -EINVAL / -ENOMEM. */
static void answer_batch(sh_stack *st, sh_msg *reply, int error) {
  uint32_t last = st->nbatch;
  for (uint32_t i = 0; i < st->nbatch; i++)
    if (!st->batch[i].answered) last = i;
  /* Bounded by the batch (at most the house's max_batch entries). */
  SH_ASSERT(st->nbatch <= st->house->max_batch);
  for (uint32_t i = 0; i < st->nbatch; i++) {
    sh_batch_entry *e = &st->batch[i];
    if (e->answered) continue;
    e->answered = true;
    if (reply == NULL) {
      refuse_entry(e, error);
    } else if (i == last) {
      sh_house_reply(e->reply_to, e->ask_id, reply);
      reply = NULL;
    } else {
      sh_msg *r = copy_reply(reply);
      if (r != NULL)
        sh_house_reply(e->reply_to, e->ask_id, r);
      else
        refuse_entry(e, reply->type->drop != NULL ? -EINVAL : -ENOMEM);
    }
  }
  sh_msg_free(reply); /* no ask was left to answer */
}

sh_yield sh_return(sh_stack *st, sh_msg *reply) {
  SH_FROM_USER();
  SH_ASSERT(st != NULL && !st->done);
  st->done = true;
  switch (st->kind) {
  case SH_STACK_ASK:
    if (is_reply(reply)) {
      sh_house_reply(st->reply_to, st->ask_id, reply);
    } else {
      refuse_stack(st, reply == NULL ? -ENODATA : -EINVAL);
      sh_msg_free(reply);
    }
    break;
  case SH_STACK_BATCH_ASK:
    if (reply != NULL && !is_reply(reply)) {
      sh_msg_free(reply);
      reply = NULL;
    }
    answer_batch(st, reply, -ENODATA);
    break;
  default:
    /* Its maker's (a channel writes it in its turn); nobody to answer for
     * a notice. */
    if (st->sink != NULL)
      st->sink->ops->result(st->sink, reply, 0);
    else
      sh_msg_free(reply);
    break;
  }
  return SH_RETURN;
}

sh_yield sh_throw(sh_stack *st, int error) {
  SH_FROM_USER();
  SH_ASSERT(st != NULL && !st->done);
  if (error >= 0) error = -EPROTO;
  st->done = true;
  if (st->kind == SH_STACK_ASK) refuse_stack(st, error);
  if (st->kind == SH_STACK_BATCH_ASK) answer_batch(st, NULL, error);
  if (st->sink != NULL) st->sink->ops->result(st->sink, NULL, error);
  return SH_RETURN;
}

int sh_batch_reply(sh_stack *st, size_t i, sh_msg *reply) {
  SH_FROM_USER();
  if (st == NULL || st->kind != SH_STACK_BATCH_ASK || i >= st->nbatch || !is_reply(reply) ||
      st->batch[i].answered || st->done) {
    sh_msg_free(reply);
    return -EINVAL;
  }
  /* An ask batch's every entry has its asker (batch_add, dispatch.c). */
  SH_ASSERT(st->batch[i].reply_to != NULL);
  st->batch[i].answered = true;
  sh_house_reply(st->batch[i].reply_to, st->batch[i].ask_id, reply);
  return 0;
}

