/*
 * Futures: the outcome of one ask (or one sh_put) a stack made, which the
 * stack suspends on. A future is owned by its stack (its pending or
 * completed list) and, while pending, is also an entry of its house's
 * future table (futtable.h), keyed by the ask id its reply will carry.
 * It completes once, with a reply, an error, or a timeout; the stack
 * resumes when its wait is over (stack.h).
 *
 * A future whose send waits for room at a full mailbox holds a waiter
 * (gate.h) until the gate decides; the waiter's return (an event to the
 * house) ends a put and lets an admitted ask go on waiting for its reply.
 */
#ifndef SH_FUTURE_H
#define SH_FUTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

#include "actor/futtable.h"
#include "base/list.h"
#include "mem/msg.h"

struct sh_house;
struct sh_timer;
struct sh_waiter;

/* What holds a future besides its stack, for a layer above (a channel its
 * asks', sends' and connect's, net/): the future keeps it from being
 * freed until the future is, and tells it when the future timed out. Set
 * by the owner; the futures code calls it and knows nothing else of it. */
typedef struct sh_future_owner sh_future_owner;
typedef struct sh_future_owner_ops {
  void (*hold)(sh_future_owner *o);
  void (*unhold)(sh_future_owner *o);
  /* The future timed out, and completed with -ETIMEDOUT (held across); or
   * NULL: nothing to do. */
  void (*expired)(sh_future_owner *o);
} sh_future_owner_ops;
struct sh_future_owner {
  const sh_future_owner_ops *ops;
};

struct sh_future {
  sh_ftnode node;              /* the house's table; node.kept: see sh_future_fail_all */
  sh_list link;               /* the stack's pending or completed list */
  sh_stack *stack;
  sh_msg *reply;              /* owned until taken */
  struct sh_timer *timer;     /* its timeout, NULL when none or gone */
  struct sh_waiter *waiter;   /* queued at a full mailbox's gate, NULL when not */
  uint32_t epoch;             /* the stack invocation that made it */
  int32_t error;
  bool done;
  bool put;                   /* sh_put's: done once the notice is in the mailbox */
  bool returning;             /* its waiter was popped: the waiter's return decides */
  bool sleep;                 /* sh_sleep's: its timeout is its success */
  /* Held until the future is freed (a channel future's channel, so that
   * the stack that reads its outcome may still call on it), or NULL. */
  sh_future_owner *owner;
};

static inline sh_future *sh_future_of_node(sh_ftnode *n) {
  return (sh_future *)(void *)((char *)n - offsetof(sh_future, node));
}
static inline sh_future *sh_future_of_link(sh_list *l) {
  return (sh_future *)(void *)((char *)l - offsetof(sh_future, link));
}
static inline uint64_t sh_future_id(const sh_future *f) { return f->node.id; }
/* f holds o from now until it is freed. */
static inline void sh_future_own(sh_future *f, sh_future_owner *o) {
  f->owner = o;
  o->ops->hold(o);
}

/* A new pending future of st (linked in its pending list, not yet in the
 * house's table), or NULL when out of memory. The caller sends, then
 * tracks it, fails it at once, or unmakes it. */
sh_future *sh_future_new(sh_stack *st);
/* The send went out (or waits for room): f joins its house's table, where
 * its answer will find it, and counts as an ask. */
void sh_future_track(sh_future *f);
/* The send's outcome is known at once (a put with room, or a failure that
 * ends the ask): f counts as an ask and completes with `error` (and
 * `back`, a put's notice handed back), inside the handler that made it. */
void sh_future_end_now(sh_future *f, sh_msg *back, int error);
/* The send was not made after all (a _try that found no room): f is freed
 * as if it never existed. */
void sh_future_unmake(sh_future *f);
/* f gives up its waiter: the waiting message when the waiter was still
 * queued (the caller owns it again), else NULL (the gate popped it: its
 * return is on the way and frees it). */
sh_msg *sh_future_reclaim(sh_future *f);
/* The future of ask `id` of house h, or NULL. */
sh_future *sh_future_find(struct sh_house *h, uint64_t id);
/* The house got the outcome of future f (a reply, an error or a timeout;
 * f already out of the table): records it and resumes the stack if its
 * wait is over. Takes ownership of reply. */
void sh_future_complete(sh_future *f, sh_msg *reply, int error);
/* A reply or exception for ask `id` reached house h: completes its future,
 * or counts the reply as unknown (the ask timed out or was forgotten).
 * Takes ownership of m. */
void sh_future_answer(struct sh_house *h, sh_msg *m);
/* The outcome of future `id` of house h, from elsewhere than a reply (a
 * channel's response or close): completes it if it is still pending and
 * returns true; else frees reply and returns false (its stack ended, or
 * it failed or timed out first). */
bool sh_future_resolve(struct sh_house *h, uint64_t id, sh_msg *reply, int error);
/* A stack waiter (gate.h) comes back from a gate as an event of this type
 * (its header), on which its future ends the put it waited for, or fails
 * the ask it held when refused; its drop (sh_waiter_drop) frees a message
 * the waiter still holds. */
extern const sh_event_type sh_waiter_type;
/* The type of an ask's timeout (sh_timer_ask): its node is the event on
 * which the future, if its answer did not come first, completes with
 * -ETIMEDOUT. */
extern const sh_event_type sh_future_timeout_type;
/* The house stops: every pending future fails with -ESHUTDOWN (its stack
 * resumes to see it), except puts whose waiter the gate already popped:
 * those are kept (node.kept, h->stop_kept) until the waiter's return. */
void sh_future_fail_all(struct sh_house *h);
/* Its stack ended with f still pending: the ask is given up (a late reply
 * is counted as unknown), f freed. */
void sh_future_forget(sh_future *f);
/* Frees a completed future and what it still holds. */
void sh_future_free(sh_future *f);

#endif
