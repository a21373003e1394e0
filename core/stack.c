/*
 * Stacks and futures: the Stack execution model of seed 000 in C.
 *
 * A handler invocation runs with st->running set; futures that complete
 * during it (an ask to a stopped actor fails at once) are only recorded.
 * After the handler returns SH_SUSPEND the stack resumes at once when its
 * wait is already over, otherwise it waits for the house to deliver
 * replies, exceptions or timeouts (sh_stack_complete).
 */
#include "stack.h"

#include <assert.h>
#include <fiu-local.h>
#include <string.h>

#include "house.h"
#include "msg.h"
#include "promise.h"
#include "system.h"
#include "timer.h"
#include "worker.h"

/* Immediate re-entries of one stack in a row; a handler that keeps making
 * asks that fail at once is still bounded. */
#define SH_STACK_MAX_REENTRY 1024

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

sh_stack *sh_stack_new(sh_house *h, sh_stack_kind kind, uint32_t batch_cap) {
  fiu_return_on("sh/stack/new", NULL);
  size_t locals = align16(h->cls->locals_size);
  size_t size = sizeof(sh_stack) + locals + (size_t)batch_cap * sizeof(sh_batch_entry);
  sh_stack *st = sh_mem_alloc(size);
  if (st == NULL) return NULL;
  memset(st, 0, size);
  st->kind = kind;
  st->house = h;
  if (batch_cap > 0) st->batch = (sh_batch_entry *)(void *)(st->locals + locals);
  st->next = h->stacks;
  if (h->stacks != NULL) h->stacks->prev = st;
  h->stacks = st;
  return st;
}

/* ---- futures --------------------------------------------------------- */

static void list_remove(sh_future **head, sh_future *f) {
  if (f->prev != NULL)
    f->prev->next = f->next;
  else
    *head = f->next;
  if (f->next != NULL) f->next->prev = f->prev;
  f->prev = f->next = NULL;
}

static void list_push(sh_future **head, sh_future *f) {
  f->prev = NULL;
  f->next = *head;
  if (*head != NULL) (*head)->prev = f;
  *head = f;
}

static void future_free(sh_future *f) {
  if (f->timer != NULL) sh_timer_cancel_node(sh_worker_current(), f->timer);
  sh_msg_free(f->reply);
  sh_mem_free(f);
}

bool sh_future_done(const sh_future *f) { return f != NULL && f->done; }
int sh_future_error(const sh_future *f) {
  if (f == NULL) return -EINVAL;
  return f->done ? f->error : -EINPROGRESS;
}
sh_msg *sh_future_msg(const sh_future *f) { return f != NULL && f->done ? f->reply : NULL; }
sh_msg *sh_future_take(sh_future *f) {
  if (f == NULL || !f->done) return NULL;
  sh_msg *m = f->reply;
  f->reply = NULL;
  return m;
}

static bool wait_over(const sh_stack *st) {
  return st->npending == 0 || (st->any && st->fresh_done > 0);
}

static void record(sh_future *f, sh_msg *reply, int error) {
  sh_stack *st = f->stack;
  assert(!f->done);
  f->done = true;
  sh_count(st->house->sys, SH_C_ASKS_RESOLVED);
  f->reply = reply;
  f->error = error;
  if (f->timer != NULL) {
    sh_timer_cancel_node(sh_worker_current(), f->timer);
    f->timer = NULL;
  }
  list_remove(&st->pending, f);
  list_push(&st->completed, f);
  st->npending--;
  st->fresh_done++;
}

void sh_stack_complete(sh_future *f, sh_msg *reply, int error) {
  sh_stack *st = f->stack;
  record(f, reply, error);
  if (!st->running && !st->done && wait_over(st)) sh_stack_run(st);
}

sh_future *sh_ask(sh_stack *st, const sh_addr *to, sh_msg *m, uint32_t timeout_ms) {
  if (st == NULL || to == NULL || m == NULL || m->type->kind != SH_ASK || st->done) {
    sh_msg_free(m);
    return NULL;
  }
  sh_house *h = st->house;
  sh_future *f = sh_mem_alloc(sizeof(*f));
  if (f == NULL) {
    sh_msg_free(m);
    return NULL;
  }
  memset(f, 0, sizeof(*f));
  f->stack = st;
  f->id = ++h->next_ask_id;
  f->epoch = st->epoch;
  list_push(&st->pending, f);
  st->npending++;
  st->made++;
  sh_count(h->sys, SH_C_ASKS);

  sh_house *target = sh_addr_pick(to);
  /* acquire: a fast refusal only; an ask that misses a concurrent stop is
   * answered -ESHUTDOWN by the stopped house. A stopping asker fails its own
   * new asks too: its pending promises are being failed and must not be
   * refilled (its own flag it reads in program order, no race). */
  if (atomic_load_explicit(&target->stopped, memory_order_acquire) ||
      atomic_load_explicit(&h->stopped, memory_order_acquire)) {
    sh_count(h->sys, SH_C_SENT);
    sh_count(h->sys, SH_C_DROPPED_STOPPED);
    sh_msg_free(m);
    record(f, NULL, -ESHUTDOWN);
    return f;
  }
  if (timeout_ms > 0) {
    sh_worker *w = sh_worker_current();
    /* Off a worker there is no wheel: asks are made from stacks, which run on workers. */
    assert(w != NULL);
    f->timer = sh_timer_ask(w, h, f->id, (uint64_t)timeout_ms * 1000000ull);
    if (f->timer == NULL) {
      /* Without its timeout the ask could wait forever: fail it instead. */
      sh_msg_free(m);
      record(f, NULL, -ENOMEM);
      return f;
    }
  }
  sh_dispatcher_push(&h->futures, f);
  m->sender = h;
  m->id = f->id;
  SH_TRACE(SH_TRACE_ASK, h->seq, m->type->name, SH_TRACE_FLOW(h->seq, f->id));
  sh_house_put(target, SH_BOX_ASK, m);
  return f;
}

/* ---- answering ------------------------------------------------------- */

static bool is_reply(const sh_msg *m) { return m != NULL && m->type->kind == SH_REPLY; }

/* A copy of reply for one more asker of a batch; NULL when it cannot be copied. */
static sh_msg *copy_reply(const sh_msg *reply) {
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
  for (uint32_t i = 0; i < st->nbatch; i++) {
    sh_batch_entry *e = &st->batch[i];
    if (e->answered) continue;
    e->answered = true;
    if (reply == NULL) {
      sh_house_refuse(e->reply_to, e->ask_id, error);
    } else if (i == last) {
      sh_house_reply(e->reply_to, e->ask_id, reply);
      reply = NULL;
    } else {
      sh_msg *r = copy_reply(reply);
      if (r != NULL)
        sh_house_reply(e->reply_to, e->ask_id, r);
      else
        sh_house_refuse(e->reply_to, e->ask_id, reply->type->drop != NULL ? -EINVAL : -ENOMEM);
    }
  }
  sh_msg_free(reply); /* no ask was left to answer */
}

sh_yield sh_return(sh_stack *st, sh_msg *reply) {
  assert(st != NULL && !st->done);
  st->done = true;
  switch (st->kind) {
  case SH_STACK_ASK:
    if (is_reply(reply)) {
      sh_house_reply(st->reply_to, st->ask_id, reply);
    } else {
      sh_house_refuse(st->reply_to, st->ask_id, reply == NULL ? -ENODATA : -EINVAL);
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
    sh_msg_free(reply); /* nobody to answer for a notice */
    break;
  }
  return SH_RETURN;
}

sh_yield sh_throw(sh_stack *st, int error) {
  assert(st != NULL && !st->done);
  if (error >= 0) error = -EPROTO;
  st->done = true;
  if (st->kind == SH_STACK_ASK) sh_house_refuse(st->reply_to, st->ask_id, error);
  if (st->kind == SH_STACK_BATCH_ASK) answer_batch(st, NULL, error);
  return SH_RETURN;
}

int sh_batch_reply(sh_stack *st, size_t i, sh_msg *reply) {
  if (st == NULL || st->kind != SH_STACK_BATCH_ASK || i >= st->nbatch || !is_reply(reply) ||
      st->batch[i].answered || st->done) {
    sh_msg_free(reply);
    return -EINVAL;
  }
  st->batch[i].answered = true;
  sh_house_reply(st->batch[i].reply_to, st->batch[i].ask_id, reply);
  return 0;
}

/* ---- accessors ------------------------------------------------------- */

int sh_stack_state(const sh_stack *st) { return st->state; }
void *sh_stack_locals(sh_stack *st) { return st->locals; }
sh_actor *sh_stack_actor(const sh_stack *st) { return st->house->actor; }
sh_msg *sh_stack_msg(const sh_stack *st) { return st->msg; }
size_t sh_stack_batch_len(const sh_stack *st) { return st->nbatch; }
sh_msg *sh_stack_batch_msg(const sh_stack *st, size_t i) {
  return i < st->nbatch ? st->batch[i].msg : NULL;
}

sh_yield sh_suspend(sh_stack *st, int next_state) {
  st->next_state = next_state;
  st->any = false;
  return SH_SUSPEND;
}

sh_yield sh_suspend_any(sh_stack *st, int next_state) {
  st->next_state = next_state;
  st->any = true;
  return SH_SUSPEND;
}

/* ---- running --------------------------------------------------------- */

/* Recycles the completed futures made by earlier invocations: they completed
 * before this invocation began, so it has seen them. The ones this
 * invocation made (even if already complete) stay for the next. */
static void recycle_seen(sh_stack *st) {
  sh_future *f = st->completed;
  while (f != NULL) {
    sh_future *next = f->next;
    if (f->epoch < st->epoch) {
      list_remove(&st->completed, f);
      future_free(f);
    }
    f = next;
  }
}

static void finish(sh_stack *st) {
  sh_house *h = st->house;
  sh_future *f;
  while ((f = st->pending) != NULL) {
    /* An ask still out: forget it; its late reply is dropped and counted. */
    sh_future *popped = sh_dispatcher_pop(&h->futures, f->id);
    assert(popped == f || popped == NULL);
    (void)popped;
    list_remove(&st->pending, f);
    future_free(f);
  }
  while ((f = st->completed) != NULL) {
    list_remove(&st->completed, f);
    future_free(f);
  }
  sh_msg_free(st->msg);
  for (uint32_t i = 0; i < st->nbatch; i++) sh_msg_free(st->batch[i].msg);
  if (st->barrier) h->barrier = false;
  if (st->prev != NULL)
    st->prev->next = st->next;
  else
    h->stacks = st->next;
  if (st->next != NULL) st->next->prev = st->prev;
  sh_mem_free(st);
}

void sh_stack_discard(sh_stack *st) {
  st->done = true;
  finish(st);
}

static sh_stack_fn handler_of(const sh_stack *st) {
  const sh_actor_class *c = st->house->cls;
  switch (st->kind) {
  case SH_STACK_NOTICE: return c->notice;
  case SH_STACK_ASK: return c->ask;
  case SH_STACK_BATCH_NOTICE: return c->batch_notice;
  case SH_STACK_BATCH_ASK: return c->batch_ask;
  default: return NULL;
  }
}

/* One handler invocation; true when the stack must run again at once. */
static bool invoke(sh_stack *st) {
  sh_stack_fn fn = handler_of(st);
  assert(fn != NULL);
  st->epoch++;
  st->fresh_done = 0;
  st->made = 0;
  st->running = true;
  sh_yield y = fn(st->house->actor, st);
  st->running = false;
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

void sh_stack_run(sh_stack *st) {
  for (int i = 0; i < SH_STACK_MAX_REENTRY && invoke(st); i++) {
  }
  /* Past the bound a still-ready stack is failed rather than spun forever. */
  if (!st->done && wait_over(st)) sh_throw(st, -ELOOP);
  if (st->done) finish(st);
}
