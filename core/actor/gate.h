/*
 * The admission gate of a bounded mailbox: its capacity, the slots in use,
 * and the FIFO of senders waiting for room.
 *
 * A slot is taken when a message is admitted (before it is put) and given
 * back when the actor takes the message out of the mailbox. A sender that
 * finds no room either gives up (-EAGAIN), or queues a waiter holding its
 * message. When the actor frees a slot and a waiter is queued, the slot
 * goes straight to the first waiter: the actor pushes the waiter's message
 * into the mailbox for it and tells it (hand-off), so waiters get room in
 * FIFO order and a new sender never overtakes a queued one.
 *
 * The gate is a leaf: it decides, under its lock, who gets a slot, and
 * returns the waiters it pops; the caller carries out the verdict (pushes
 * the message, tells the sender: house.c), outside the lock.
 *
 * Two kinds of waiter:
 *   - a stack (sh_ask, sh_put): the waiter is pooled memory owned by the
 *     sender's future while queued; once the gate pops it (admitted or
 *     refused) it travels back to the sender's house as an event (its
 *     header is the event), which completes or releases the future;
 *   - a bridge (an outside thread blocked in sh_bridge_*): the waiter lives
 *     in the bridge; the verdict is its state, and its sleeper is woken.
 * Closing the gate (the actor stops) refuses every waiter with -ESHUTDOWN
 * and every later one.
 */
#ifndef SH_GATE_H
#define SH_GATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

#include "base/list.h"
#include "base/spinlock.h"

struct sh_house;
struct sh_sleeper;

typedef enum sh_waiter_state {
  SH_WAITER_IDLE = 0,     /* not in a gate */
  SH_WAITER_QUEUED = 1,   /* in the gate's FIFO, holding its message */
  SH_WAITER_POPPED = 2,   /* taken out by the gate, its verdict being carried out */
  SH_WAITER_ADMITTED = 3, /* its message is in the mailbox */
  SH_WAITER_REFUSED = 4,  /* the gate closed; the message was not sent */
  SH_WAITER_CANCELLED = 5 /* taken out by its sender (timeout, stop) */
} sh_waiter_state;

typedef struct sh_waiter {
  sh_msg hdr;                   /* stack waiters: the event back to the sender */
  sh_list link;                 /* the gate's FIFO */
  sh_msg *msg;                  /* the message waiting for room */
  struct sh_house *target;
  int box;                      /* sh_box of the target: SH_BOX_ASK or SH_BOX_NOTICE */
  struct sh_house *sender;      /* stack waiters: whose future waits */
  uint64_t id;                  /* stack waiters: the future's id */
  struct sh_sleeper *sleeper;   /* bridge waiters: the thread to wake; NULL for stacks */
  uint32_t gen;                 /* the target's generation (house.h) */
  _Atomic int state;            /* sh_waiter_state */
} sh_waiter;

/* The drop of a stack waiter's type (future.h: sh_waiter_type, the event
 * back to its sender): frees a message the waiter still holds. */
void sh_waiter_drop(sh_msg *m);

typedef struct sh_gate {
  /* Set when the gate's house is spawned (sh_gate_reset), under the lock;
   * cap is read without it (relaxed: it changes only between generations,
   * and a sender of an older generation may read either value). */
  atomic_uint cap;
  uint32_t gen;                   /* the house generation it admits for */
  /* Contended by every sender and the actor: a line of its own. */
  _Alignas(64) atomic_uint used;  /* admitted and not yet taken */
  atomic_uint nwaiters;           /* queued, or entering the queue */
  _Alignas(64) sh_spin lock;      /* guards the FIFO */
  atomic_bool closed;             /* written under the lock */
  sh_list fifo;                   /* sh_waiter.link, first come first */
  /* Metrics: relaxed counters, read by sh_mailbox_stats_get. `queued` is
   * the FIFO's length (nwaiters also counts senders on their way in). */
  atomic_uint queued;
  atomic_uint high_water;
  atomic_uint_fast64_t suspended;
  atomic_uint_fast64_t refused;
} sh_gate;

/* A gate of capacity cap (1..SH_MAX_CAPACITY) for generation gen, or NULL
 * (-ENOMEM). */
sh_gate *sh_gate_new(uint32_t cap, uint32_t gen);
void sh_gate_free(sh_gate *g);
/* Opens a closed gate again for its house's next generation, with capacity
 * cap; no waiter may be queued. Slots still held by messages of an older
 * generation stay counted until those are taken. */
void sh_gate_reset(sh_gate *g, uint32_t cap, uint32_t gen);

/* Takes a slot if one is free and no sender waits ahead: 0, else -EAGAIN;
 * -ESHUTDOWN once the gate is closed. */
int sh_gate_try(sh_gate *g);
/* A sender that will wait: admits w's message now (0: w is not queued), or
 * queues w (-EINPROGRESS), or -ESHUTDOWN when the gate is closed or was
 * reset for a later generation than w's. */
int sh_gate_enter(sh_gate *g, sh_waiter *w);
/* The sender takes w back: true if w was still queued (it is CANCELLED and
 * the sender owns its message again); false when the gate already popped it. */
bool sh_gate_cancel(sh_gate *g, sh_waiter *w);
/* A slot comes back (the actor took a message). True when senders wait:
 * the caller then hands free slots over with sh_gate_pop_admitted. */
bool sh_gate_release(sh_gate *g);
/* The first waiter, given a free slot (its state POPPED: its sender can no
 * longer cancel it); NULL when none waits, no slot is free, or the gate is
 * closed. The caller pushes its message and tells its sender. */
sh_waiter *sh_gate_pop_admitted(sh_gate *g);
/* Stopping the actor, in two steps around publishing `stopped` (house.c):
 * close (of generation gen: nothing when the gate was reset for a later
 * one) admits nobody from then on (a slot freed by the stopped actor's
 * drain must not admit a waiter whose message it would then drop); then
 * every waiter is popped with sh_gate_pop_refused and told -ESHUTDOWN. */
void sh_gate_close(sh_gate *g, uint32_t gen);
/* The first waiter of a gate closed for generation gen (POPPED), or NULL
 * when none is left or the gate was reset for a later generation. */
sh_waiter *sh_gate_pop_refused(sh_gate *g, uint32_t gen);
/* Senders queued (relaxed: a look; after a close only pops change it). */
uint32_t sh_gate_queued(const sh_gate *g);
/* Counts a send refused for want of room. */
void sh_gate_refused(sh_gate *g);
/* Fills the gate's part of *out (capacity, depth, waiting, counters). */
void sh_gate_stats(const sh_gate *g, sh_mailbox_stats *out);

#endif
