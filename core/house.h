/*
 * ActorHouse: the runtime's side of one actor. Five MPSC mailboxes, the CAS
 * state machine that decides who schedules the house, the actor's future
 * table, its barrier state and its timers. This module pushes messages in,
 * schedules the house and settles it after a run; what a run does with the
 * messages is dispatch.c.
 *
 * States (CAS transitions):
 *   CREATED -> MOUNTING      spawned; waiting in the owner's mounting FIFO
 *   MOUNTING -> WAITING      the owner ran the mount hook
 *   WAITING -> READY         a push found it waiting and queued it (one winner)
 *   READY -> SCHEDULED       a worker took it from a run queue
 *   SCHEDULED -> RUNNING     handlers are running (one runner at a time)
 *   RUNNING -> READY         it ran out of budget with messages left: requeued
 *   RUNNING -> WAITING       nothing left; then it looks again: a push that
 *                            saw RUNNING did not queue it, so the runner must
 * A bridge's house is OUTSIDE for its whole life: never scheduled, a push
 * to it wakes its thread.
 */
#ifndef SH_HOUSE_H
#define SH_HOUSE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

#include "dispatcher.h"
#include "gate.h"
#include "housequeue.h"
#include "list.h"
#include "mailbox.h"

typedef enum sh_house_state {
  SH_CREATED = 0,
  SH_MOUNTING = 1,
  SH_WAITING = 2,
  SH_READY = 3,
  SH_SCHEDULED = 4,
  SH_RUNNING = 5,
  SH_OUTSIDE = 6, /* a bridge's house (bridge.h): never scheduled; a push wakes its thread */
} sh_house_state;

/* Mailboxes in dispatch order (a run takes them in this order). */
typedef enum sh_box { SH_BOX_REPLY, SH_BOX_EXCEPTION, SH_BOX_ASK, SH_BOX_NOTICE, SH_BOX_EVENT, SH_BOXES } sh_box;

/* Priority thresholds (decided at enqueue). */
#define SH_HIGH_REPLIES 2
#define SH_HIGH_EVENTS 4

struct sh_sleeper;

typedef struct sh_house {
  /* Shared between threads. */
  _Atomic int state;          /* sh_house_state */
  atomic_bool high;           /* queue in the high sub-queue */
  atomic_bool stopped;
  sh_hq_link qlink;           /* run queue link, owned by the queue holding it */
  sh_mailbox mb[SH_BOXES];

  /* Immutable after spawn. */
  uint32_t owner;             /* worker index */
  uint64_t seq;               /* creation number: deterministic ordering */
  sh_system *sys;
  const sh_actor_class *cls;
  sh_actor *actor;
  uint32_t max_per_run, max_batch;
  struct sh_house *all_next;  /* the system's list of houses */
  sh_gate *gate[SH_BOXES];    /* bounded ask / notice mailboxes; NULL: unbounded */
  struct sh_sleeper *outside; /* OUTSIDE houses: the bridge thread to wake */
  /* The greatest backlog seen when a run began; the runner writes it,
   * sh_mailbox_stats_get reads it (relaxed: a metric). */
  atomic_uint high_water[SH_BOXES];

  /* Only the current runner touches these. */
  sh_dispatcher futures;      /* pending futures by ask id (future.h) */
  uint64_t next_ask_id;
  uint64_t next_timer_id;
  bool barrier;               /* a barrier stack is running */
  bool mounted;
  bool stop_done;             /* the stop hook ran */
  uint32_t stop_kept;         /* futures kept past the stop for their waiter's return */
  sh_list stacks;             /* live stacks (sh_stack.link), for shutdown */
  sh_list ready;              /* deferred stacks, ready to run again (stack.h) */
  sh_list timers;             /* live actor timers (sh_timer.actor_link), cancel by id */
} sh_house;

static inline sh_house *sh_house_of_link(sh_hq_link *l) {
  return (sh_house *)(void *)((char *)l - offsetof(sh_house, qlink));
}

/* Initialises the shared part of a zeroed house: state, mailboxes, flags,
 * lists. */
void sh_house_init(sh_house *h, sh_system *sys, const sh_actor_class *c, sh_house_state state);
/* Pushes m into mailbox box and makes the house ready if it was waiting.
 * Never refuses: admission (stopped? room?) is the send path's (send.h);
 * replies, exceptions and events always get through. Any thread. */
void sh_house_push(sh_house *h, sh_box box, sh_msg *m);
/* Makes a waiting house ready (queues it on its owner). Any thread. */
void sh_house_poke(sh_house *h);
/* Whether there is something the house can handle now. */
bool sh_house_has_work(const sh_house *h);
/* The house's runner takes the next message of box, or NULL. A bounded
 * mailbox gets the slot back, and hands it to a waiting sender. Inline: on
 * every message's path. */
void sh_house_hand_off(sh_gate *g);
static inline sh_msg *sh_house_take(sh_house *h, sh_box box) {
  sh_msg *m = sh_mailbox_take(&h->mb[box]);
  if (m != NULL && h->gate[box] != NULL && sh_gate_release(h->gate[box]))
    sh_house_hand_off(h->gate[box]);
  return m;
}
/* After a run or a mount: requeue the house, or let it wait (and look once
 * more for work that came meanwhile). The runner, last thing. */
void sh_house_settle(sh_house *h);
/* The owner's mount step: runs the mount hook, then lets messages flow. */
void sh_house_mount(sh_house *h);
/* Answers ask `id` of house `to` with reply / with an exception. NULL `to`
 * (nobody to answer) frees the reply. */
void sh_house_reply(sh_house *to, uint64_t id, sh_msg *reply);
void sh_house_refuse(sh_house *to, uint64_t id, int error);
/* Marks the house stopped and refuses every sender waiting for room in its
 * bounded mailboxes. Any thread. */
void sh_house_stop(sh_house *h);
static inline bool sh_house_stopped(const sh_house *h) {
  /* acquire: a fast look for the send path and the handlers; the exact
   * decisions are the gate's (closed under its lock) and the runner's. */
  return atomic_load_explicit(&h->stopped, memory_order_acquire);
}

#endif
