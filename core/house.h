/*
 * ActorHouse: the runtime's side of one actor. Five MPSC mailboxes, the CAS
 * state machine that decides who schedules the house, the actor's promise
 * table, its barrier state and its timers.
 *
 * States (CAS transitions):
 *   CREATED -> MOUNTING      spawned; waiting in the owner's mounting FIFO
 *   MOUNTING -> WAITING      the owner ran the mount hook
 *   WAITING -> READY         a put found it waiting and queued it (one winner)
 *   READY -> SCHEDULED       a worker took it from a run queue
 *   SCHEDULED -> RUNNING     handlers are running (one runner at a time)
 *   RUNNING -> READY         it ran out of budget with messages left: requeued
 *   RUNNING -> WAITING       nothing left; then re-check: a put that saw
 *                            RUNNING did not queue it, so the runner must
 */
#ifndef SH_HOUSE_H
#define SH_HOUSE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

#include "mailbox.h"
#include "promise.h"

typedef enum sh_house_state {
  SH_CREATED = 0,
  SH_MOUNTING = 1,
  SH_WAITING = 2,
  SH_READY = 3,
  SH_SCHEDULED = 4,
  SH_RUNNING = 5,
  SH_OUTSIDE = 6, /* a bridge's house (bridge.h): never scheduled; a put wakes its thread */
} sh_house_state;

/* Mailboxes in dispatch order. */
typedef enum sh_box {
  SH_BOX_REPLY = 0,
  SH_BOX_EXCEPTION = 1,
  SH_BOX_ASK = 2,
  SH_BOX_NOTICE = 3,
  SH_BOX_EVENT = 4,
  SH_BOXES = 5,
} sh_box;

/* Priority thresholds (decided at enqueue). */
#define SH_HIGH_REPLIES 2
#define SH_HIGH_EVENTS 4

struct sh_worker;
struct sh_timer;

typedef struct sh_house {
  /* Shared between threads. */
  _Atomic int state;          /* sh_house_state */
  atomic_bool high;           /* queue in the high sub-queue */
  atomic_bool stopped;
  struct sh_house *qnext;     /* run queue link, owned by the queue holding it */
  sh_mailbox mb[SH_BOXES];

  /* Immutable after spawn. */
  uint32_t owner;             /* worker index */
  uint64_t seq;               /* creation number: deterministic ordering */
  sh_system *sys;
  const sh_actor_class *cls;
  sh_actor *actor;
  uint32_t max_per_run, max_batch;
  struct sh_house *all_next;  /* the system's list of houses */
  struct sh_gate *gate[SH_BOXES]; /* bounded ask / notice mailboxes; NULL: unbounded */
  /* The greatest backlog seen when a run began; the runner writes it,
   * sh_mailbox_stats_get reads it (relaxed: a metric). */
  atomic_uint high_water[SH_BOXES];

  /* Only the current runner touches these. */
  sh_dispatcher futures;
  uint64_t next_ask_id;
  uint64_t next_timer_id;
  bool barrier;               /* a barrier stack is running */
  bool mounted;
  bool stop_done;             /* the stop hook ran */
  uint32_t stop_kept;         /* futures kept past the stop for their waiter's return */
  sh_stack *stacks;           /* live stacks (for shutdown) */
  sh_stack *ready, *ready_tail; /* deferred stacks, ready to run again (stack.h) */
  struct sh_timer *timers;    /* live actor timers (cancel by id) */
} sh_house;

/* Initialises the shared part of a zeroed house: state, mailboxes, flags. */
void sh_house_init(sh_house *h, sh_system *sys, const sh_actor_class *c, sh_house_state state);
/* Puts m into mailbox box and makes the house ready if it was waiting. Never
 * refuses (replies and events must always get through). Any thread. */
void sh_house_put(sh_house *h, sh_box box, sh_msg *m);
/* Makes a waiting house ready (queues it on its owner). Any thread. */
void sh_house_poke(sh_house *h);
/* Whether there is something the house can handle now. */
bool sh_house_has_work(const sh_house *h);
/* Runs the house on worker w (w may be a thief): handlers for up to
 * max_per_run messages, then requeue or wait. The house is SCHEDULED. */
void sh_house_run(struct sh_worker *w, sh_house *h);
/* The owner's mount step: runs the mount hook, then lets messages flow. */
void sh_house_mount(struct sh_worker *w, sh_house *h);
/* Answers ask `id` of house `to` with reply / with an exception. NULL `to`
 * (nobody to answer) frees the reply. */
void sh_house_reply(sh_house *to, uint64_t id, sh_msg *reply);
void sh_house_refuse(sh_house *to, uint64_t id, int error);
/* Frees the house and everything it still holds (the system is stopped). */
void sh_house_destroy(sh_house *h);
/* Marks the house stopped and refuses every sender waiting for room in its
 * bounded mailboxes. Any thread. */
void sh_house_stop(sh_house *h);


#endif
