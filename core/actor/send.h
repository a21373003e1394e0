/*
 * The send path: how an ask or a notice is admitted into an actor's
 * mailbox. Every send of the API goes through it: sh_notice and
 * sh_notice_try (send.c), sh_ask, sh_ask_try and sh_put (send.c), and the
 * bridge's sends (bridge.c). In order:
 *   1. the target stopped, or the generation its address names is gone
 *      (house.h): -ESHUTDOWN;
 *   2. a bounded mailbox: a free slot, or -EAGAIN (no room, or senders
 *      wait ahead of this one); a closed gate (the target is stopping):
 *      -ESHUTDOWN;
 *   3. the message, tagged with the generation (and whether it holds a
 *      slot), is pushed into the mailbox, which schedules the house.
 * A sender that will wait for room then queues a waiter holding its
 * message (sh_send_wait); the gate hands it a slot in FIFO order.
 * An ordered class's notices go to its ask mailbox (sh_send_box).
 * Replies, exceptions and events are not sends: they are pushed directly
 * (house.h), never refused.
 */
#ifndef SH_SEND_H
#define SH_SEND_H

#include <stackhouse/stackhouse.h>

#include "base/atomic.h"
#include "base/check.h"
#include "actor/gate.h"
#include "actor/house.h"

/* Steps 1-3 for message m (sender and id already set) to mailbox `box`
 * (SH_BOX_ASK or SH_BOX_NOTICE) of generation gen of t: 0 when pushed;
 * -ESHUTDOWN or -EAGAIN leave m the caller's. Inline: an unbounded
 * mailbox, the common case, costs two tests. */
static inline int sh_send_now(sh_house *t, uint32_t gen, sh_box box, sh_msg *m) {
  SH_DEBUG_ASSERT(box == SH_BOX_ASK || box == SH_BOX_NOTICE);
  if (!sh_house_live(t, gen)) return -ESHUTDOWN;
  m->internal = gen;
  sh_gate *g = sh_house_gate(t, box);
  if (g != NULL) {
    int rc = sh_gate_try(g);
    if (rc != 0) return rc;
    m->internal |= SH_MSG_SLOT;
  }
  sh_house_push(t, box, m);
  return 0;
}

/* The mailbox a send of `kind` to t goes to: an ordered class
 * (sh_actor_class.ordered) takes notices into the ask mailbox, whose one
 * FIFO keeps each sender's asks and notices in the order sent. */
/* relaxed: set before the generation's life began (spawn.c); a stale
 * value only misroutes a message its generation tag refuses. */
static inline sh_box sh_send_box(const sh_house *t, sh_msg_kind kind) {
  if (kind == SH_ASK) return SH_BOX_ASK;
  return (sh_box)sh_atomic_load(&t->notice_box, memory_order_relaxed);
}

/* After sh_send_now's -EAGAIN, for a sender that will wait: w (holding
 * the message, its target, generation and box) is admitted now (0: pushed, w not
 * queued), or queued (-EINPROGRESS: the gate will pop it with a verdict),
 * or refused (-ESHUTDOWN: the message is still w's). */
int sh_send_wait(sh_waiter *w);
/* A sender gave up for want of room (-EAGAIN to its caller, or a timeout
 * while it waited): counted in the mailbox's metrics. */
void sh_send_refused(sh_house *t, sh_box box);
/* A send refused because its target (or the sending actor) stopped, whose
 * message the send took: counted as sent and dropped, and freed. */
void sh_send_drop_stopped(sh_system *sys, sh_msg *m);

#endif
