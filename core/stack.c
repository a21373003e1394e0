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

#include "gate.h"
#include "house.h"
#include "msg.h"
#include "promise.h"
#include "system.h"
#include "timer.h"
#include "worker.h"

/* Invocations in a row whose futures all failed at once: a handler that
 * keeps asking a stopped actor is stopped, not spun forever. */
#define SH_STACK_MAX_FAILING 1024

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

/* ---- waiting for room (gate.h) ---------------------------------------- */

/* f forgets its waiter. Returns the waiting message when the waiter was
 * still queued (the caller owns the message again); NULL when the gate had
 * popped it: the waiter is on its way back as an event and frees itself
 * there (sh_stack_waiter_back). */
static sh_msg *waiter_reclaim(sh_future *f) {
  sh_waiter *w = f->waiter;
  if (w == NULL) return NULL;
  f->waiter = NULL;
  if (!sh_gate_cancel(w->target->gate[w->box], w)) return NULL;
  sh_msg *m = w->msg;
  w->msg = NULL;
  sh_msg_free(&w->hdr);
  return m;
}

/* stack_send to a bounded mailbox. */
static int gated_send(sh_future *f, sh_house *t, sh_box box, sh_msg *m, sh_gate *g) {
  int rc = sh_gate_try(g);
  if (rc == 0) {
    sh_house_put(t, box, m);
    return 0;
  }
  if (rc == -ESHUTDOWN) return rc;
  fiu_return_on("sh/gate/waiter", -ENOMEM);
  sh_waiter *w = (sh_waiter *)(void *)sh_msg_alloc(&sh_waiter_type);
  if (w == NULL) return -ENOMEM;
  atomic_init(&w->state, SH_WAITER_IDLE);
  w->msg = m;
  w->target = t;
  w->box = box;
  w->sender = f->stack->house;
  w->id = f->id;
  /* From here the gate may pop w on another thread; its return is handled
   * by this house's runner, which is us, after this handler. */
  rc = sh_gate_enter(g, w);
  if (rc == -EINPROGRESS) {
    f->waiter = w;
    return rc;
  }
  w->msg = NULL;
  sh_msg_free(&w->hdr);
  if (rc == 0) sh_house_put(t, box, m);
  return rc;
}

/* Sends m (its sender and id set) to mailbox `box` of t for future f: at
 * once when there is room (0), else f's waiter queues at the gate
 * (-EINPROGRESS). -ESHUTDOWN (the gate closed) and -ENOMEM leave m the
 * caller's. Inline: an unbounded mailbox, the common case, costs one test. */
static inline int stack_send(sh_future *f, sh_house *t, sh_box box, sh_msg *m) {
  sh_gate *g = t->gate[box];
  if (g == NULL) {
    sh_house_put(t, box, m);
    return 0;
  }
  return gated_send(f, t, box, m, g);
}

static void future_free(sh_future *f) {
  if (f->waiter != NULL) sh_msg_free(waiter_reclaim(f));
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
  if (f->waiter != NULL) {
    /* Completed while waiting for room (a timeout, the asker stopped): a
     * put hands its notice back, an ask's was never sent. */
    sh_msg *back = waiter_reclaim(f);
    if (back != NULL && f->put && reply == NULL)
      reply = back;
    else
      sh_msg_free(back);
  }
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
  if (st->running && error != 0) st->failed_now++;
}

void sh_stack_complete(sh_future *f, sh_msg *reply, int error) {
  sh_stack *st = f->stack;
  record(f, reply, error);
  /* A deferred stack runs from the ready list, never twice. */
  if (!st->running && !st->done && !st->deferred && wait_over(st)) sh_stack_run(st);
}

/* A new future of st, pending (counted as an ask), or NULL. */
static sh_future *future_new(sh_stack *st) {
  sh_future *f = sh_mem_alloc(sizeof(*f));
  if (f == NULL) return NULL;
  memset(f, 0, sizeof(*f));
  sh_house *h = st->house;
  f->stack = st;
  f->id = ++h->next_ask_id;
  f->epoch = st->epoch;
  list_push(&st->pending, f);
  st->npending++;
  st->made++;
  sh_count(h->sys, SH_C_ASKS);
  return f;
}

static bool is_stopped(const sh_house *h) {
  /* acquire: a fast refusal only; a send that misses a concurrent stop is
   * refused by the stopped house's gate or answered -ESHUTDOWN by it. */
  return atomic_load_explicit(&h->stopped, memory_order_acquire);
}

/* The ask to house t. `slot`: sh_ask_try already took a slot of t's bounded
 * ask mailbox for it; a failure gives the slot back. */
static sh_future *ask_to(sh_stack *st, sh_house *t, sh_msg *m, uint32_t timeout_ms, bool slot) {
  sh_house *h = st->house;
  sh_future *f = future_new(st);
  int rc = f == NULL ? -ENOMEM : 0;
  /* A stopping asker fails its own new asks too: its pending promises are
   * being failed and must not be refilled (its own flag it reads in program
   * order, no race). */
  if (rc == 0 && (is_stopped(t) || is_stopped(h))) {
    sh_count(h->sys, SH_C_SENT);
    sh_count(h->sys, SH_C_DROPPED_STOPPED);
    rc = -ESHUTDOWN;
  }
  if (rc == 0 && timeout_ms > 0) {
    sh_worker *w = sh_worker_current();
    /* Off a worker there is no wheel: asks are made from stacks, which run on workers. */
    assert(w != NULL);
    /* Armed now: the timeout covers the wait for room as well as for the reply. */
    f->timer = sh_timer_ask(w, h, f->id, (uint64_t)timeout_ms * 1000000ull);
    /* Without its timeout the ask could wait forever: fail it instead. */
    if (f->timer == NULL) rc = -ENOMEM;
  }
  if (rc == 0) {
    m->sender = h;
    m->id = f->id;
    SH_TRACE(SH_TRACE_ASK, h->seq, m->type->name, SH_TRACE_FLOW(h->seq, f->id));
    if (slot) {
      slot = false;
      sh_house_put(t, SH_BOX_ASK, m);
    } else {
      rc = stack_send(f, t, SH_BOX_ASK, m);
    }
  }
  if (slot) sh_gate_release(t->gate[SH_BOX_ASK]);
  if (rc == 0 || rc == -EINPROGRESS) {
    sh_dispatcher_push(&h->futures, f);
    return f;
  }
  sh_msg_free(m);
  if (f != NULL) record(f, NULL, rc);
  return f;
}

static bool ask_usable(const sh_stack *st, const sh_addr *to, const sh_msg *m) {
  return st != NULL && to != NULL && m != NULL && m->type->kind == SH_ASK && !st->done;
}

sh_future *sh_ask(sh_stack *st, const sh_addr *to, sh_msg *m, uint32_t timeout_ms) {
  if (!ask_usable(st, to, m)) {
    sh_msg_free(m);
    return NULL;
  }
  return ask_to(st, sh_addr_pick(to), m, timeout_ms, false);
}

int sh_ask_try(sh_stack *st, const sh_addr *to, sh_msg *m, uint32_t timeout_ms, sh_future **out) {
  if (!ask_usable(st, to, m) || out == NULL) return -EINVAL;
  sh_house *t = sh_addr_pick(to);
  sh_gate *g = t->gate[SH_BOX_ASK];
  bool slot = false;
  if (g != NULL && !is_stopped(t)) {
    int rc = sh_gate_try(g);
    if (rc == -EAGAIN) {
      sh_gate_refused(g);
      return rc;
    }
    /* Closed (the target is stopping): sh_ask's refusal, a failed future. */
    slot = rc == 0;
  }
  *out = ask_to(st, t, m, timeout_ms, slot);
  return *out != NULL ? 0 : -ENOMEM;
}

sh_future *sh_put(sh_stack *st, const sh_addr *to, sh_msg *m, uint32_t timeout_ms) {
  if (st == NULL || to == NULL || m == NULL || m->type->kind != SH_NOTICE || st->done) {
    sh_msg_free(m);
    return NULL;
  }
  sh_house *h = st->house;
  sh_future *f = future_new(st);
  if (f == NULL) {
    sh_msg_free(m);
    return NULL;
  }
  f->put = true;
  sh_house *t = sh_addr_pick(to);
  m->sender = NULL;
  m->id = 0;
  int rc = is_stopped(t) || is_stopped(h) ? -ESHUTDOWN : stack_send(f, t, SH_BOX_NOTICE, m);
  if (rc != -EINPROGRESS) {
    /* Done at once: sent, or refused with the notice handed back. */
    record(f, rc == 0 ? NULL : m, rc);
    return f;
  }
  if (timeout_ms > 0) {
    f->timer = sh_timer_ask(sh_worker_current(), h, f->id, (uint64_t)timeout_ms * 1000000ull);
    if (f->timer == NULL) {
      sh_msg *back = waiter_reclaim(f);
      /* Popped already: its return (sh_stack_waiter_back) completes the put. */
      if (back != NULL) {
        record(f, back, -ENOMEM);
        return f;
      }
    }
  }
  sh_dispatcher_push(&h->futures, f);
  return f;
}

/* f is no longer kept past its house's stop. */
static void unkeep(sh_house *h, sh_future *f) {
  if (!f->kept) return;
  f->kept = false;
  h->stop_kept--;
}

/* f's waiter came back: f no longer waits for it. */
static void returned(sh_house *h, sh_future *f) {
  f->waiter = NULL;
  f->returning = false;
  unkeep(h, f);
}

void sh_stack_waiter_back(sh_house *h, sh_waiter *w) {
  int err = w->hdr.error;
  sh_future *f = sh_dispatcher_find(&h->futures, w->id);
  sh_msg *back = NULL;
  if (f != NULL) {
    returned(h, f);
    /* An admitted ask goes on waiting for its reply; anything else ends. */
    if (f->put || err != 0) {
      sh_dispatcher_pop(&h->futures, w->id);
      if (f->put) {
        back = w->msg; /* NULL when admitted: the gate put it */
        w->msg = NULL;
      }
    } else {
      f = NULL;
    }
  }
  /* No future left (it timed out or its stack ended): nothing to tell; the
   * waiter's drop frees a refused message it still holds. */
  sh_msg_free(&w->hdr);
  if (f != NULL) sh_stack_complete(f, back, err);
}

/* f ends early (a timeout, its house stops). True when it must not: a put
 * whose waiter the gate already popped waits for the waiter's return, which
 * says whether the notice got in (an ask ends either way: its reply, if
 * any, comes as unknown). Else a waiter still queued is taken back: *back
 * is a put's notice, handed back (an ask's is freed). */
static bool ends_by_return(sh_future *f, sh_msg **back) {
  *back = NULL;
  if (f->waiter != NULL) {
    sh_msg *m = waiter_reclaim(f);
    if (m == NULL)
      f->returning = true;
    else if (f->put)
      *back = m;
    else
      sh_msg_free(m);
  }
  return f->put && f->returning;
}

void sh_stack_fail_all(sh_house *h) {
  sh_future *f;
  /* Bounded: each turn ends a future (the stopped house makes no new ones:
   * its sends fail at once) or marks it kept, which pop_any skips. */
  while ((f = sh_dispatcher_pop_any(&h->futures)) != NULL) {
    sh_msg *back;
    if (ends_by_return(f, &back)) {
      f->kept = true;
      h->stop_kept++;
      /* Its outcome is the return's now, not a timeout's. */
      if (f->timer != NULL) {
        sh_timer_cancel_node(sh_worker_current(), f->timer);
        f->timer = NULL;
      }
      sh_dispatcher_push(&h->futures, f);
      continue;
    }
    /* The end of the ask's flow in a trace, as a reply or a timeout is. */
    SH_TRACE(SH_TRACE_REPLY, h->seq, "ESHUTDOWN", SH_TRACE_FLOW(h->seq, f->id));
    sh_stack_complete(f, back, -ESHUTDOWN);
  }
}

void sh_stack_time_out(sh_house *h, sh_future *f) {
  sh_msg *back;
  if (ends_by_return(f, &back)) return;
  sh_dispatcher_pop(&h->futures, f->id);
  sh_count(h->sys, SH_C_ASKS_TIMED_OUT);
  SH_TRACE(SH_TRACE_TIMEOUT, h->seq, "timeout", SH_TRACE_FLOW(h->seq, f->id));
  sh_stack_complete(f, back, -ETIMEDOUT);
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

/* Takes st out of its house's ready list (a deferred stack discarded).
 * Bounded by the list. */
static void ready_unlink(sh_house *h, sh_stack *st) {
  sh_stack *prev = NULL;
  for (sh_stack *s = h->ready; s != NULL; prev = s, s = s->ready_next) {
    if (s != st) continue;
    if (prev != NULL)
      prev->ready_next = s->ready_next;
    else
      h->ready = s->ready_next;
    if (h->ready_tail == s) h->ready_tail = prev;
    break;
  }
  st->deferred = false;
  st->ready_next = NULL;
}

static void finish(sh_stack *st) {
  sh_house *h = st->house;
  sh_future *f;
  if (st->deferred) ready_unlink(h, st);
  while ((f = st->pending) != NULL) {
    /* An ask still out: forget it; its late reply is dropped and counted.
     * Forgetting resolves it (sh_stats: each ask resolved once). */
    sh_count(h->sys, SH_C_ASKS_RESOLVED);
    unkeep(h, f); /* a late return finds no future and frees itself */
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
  st->failed_now = 0;
  st->running = true;
  sh_yield y = fn(st->house->actor, st);
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
  sh_house *h = st->house;
  st->deferred = true;
  st->ready_next = NULL;
  if (h->ready_tail != NULL)
    h->ready_tail->ready_next = st;
  else
    h->ready = st;
  h->ready_tail = st;
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
  if (st->done) finish(st);
}

uint32_t sh_stack_run_ready(sh_house *h, uint32_t budget) {
  uint32_t n = 0;
  /* Bounded by the budget (a stack deferred again goes to the tail). */
  while (n < budget && h->ready != NULL) {
    sh_stack *st = h->ready;
    h->ready = st->ready_next;
    if (h->ready == NULL) h->ready_tail = NULL;
    st->deferred = false;
    st->ready_next = NULL;
    n++;
    sh_stack_run(st);
  }
  return n;
}
