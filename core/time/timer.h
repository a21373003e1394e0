/*
 * Timers with actor semantics on top of each worker's wheel: ask timeouts
 * and actor timers (one-shot and periodic). A timer lives in the wheel of
 * the worker that started it; when it fires, it travels to its actor as an
 * event (the node itself is the event message, so a one-shot fire allocates
 * nothing). Only the actor cancels its timers; a state word decides whether
 * the wheel or the actor side frees the node, so neither ever touches a node
 * the other freed.
 */
#ifndef SH_TIMER_H
#define SH_TIMER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

#include "base/list.h"
#include "mem/msg.h"
#include "time/wheel.h"

struct sh_house;
struct sh_worker;

typedef enum sh_timer_kind {
  SH_TIMER_ASK = 1,   /* an ask's timeout; id = ask id */
  SH_TIMER_ACTOR = 2, /* sh_timer_start; id = timer id */
} sh_timer_kind;

typedef enum sh_timer_state {
  SH_TIMER_PENDING = 0,   /* in a wheel */
  SH_TIMER_FIRED = 1,     /* one-shot: on its way to the actor as an event */
  SH_TIMER_CANCELLED = 2, /* the wheel frees it when it reaches it */
} sh_timer_state;

typedef struct sh_timer {
  sh_msg hdr;                 /* the event, when a one-shot fires */
  sh_wheel_link link;
  struct sh_house *house;
  sh_list actor_link;         /* the house's actor-timer list (actor timers only) */
  uint64_t id;
  uint64_t period_ns;
  void *arg;
  uint32_t wheel_worker;
  sh_timer_kind kind;
  _Atomic int state;
  bool dead;                  /* cancelled after it fired: drop the event */
} sh_timer;

/* A periodic timer's tick: a separate event, the node stays in the wheel. */
typedef struct sh_tick {
  sh_msg hdr;
  uint64_t id;
  void *arg;
} sh_tick;

/* An actor timer's event and a tick: their handlers (timer.c) call the
 * actor's timeout hook. */
extern const sh_event_type sh_timer_type;
extern const sh_event_type sh_tick_type;

/* Starts an ask timeout on the current worker: the node fires as an event
 * of type `ev` (its future's, which handles it: future.h). NULL when out
 * of memory. */
sh_timer *sh_timer_ask(struct sh_worker *w, struct sh_house *h, uint64_t ask_id, uint64_t ns,
                       const sh_event_type *ev);
/* The actor no longer needs t (the reply came first). */
void sh_timer_cancel_node(struct sh_worker *w, sh_timer *t);
/* The worker's wheel reached its time: fire everything due. */
uint32_t sh_timer_advance(struct sh_worker *w, uint64_t now_ns);
/* Cancels every actor timer of h (the actor stops). */
void sh_timer_cancel_all(struct sh_worker *w, struct sh_house *h);
/* After the workers stopped: frees every node left in w's wheel. */
void sh_timer_discard_all(struct sh_worker *w);

#endif
