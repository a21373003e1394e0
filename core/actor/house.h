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
 *
 * Generations. A house outlives its actor: when a stopped actor has nothing
 * left (no message, stack, future or timer), its runner retires the house
 * (dispatch.c) and it goes back to a worker's free list (hstore.h) for the
 * next spawn. `life` holds the generation and the stopped bit; an address
 * names a house and a generation (addr.h). A send checks the generation
 * (send.h) and tags its message with it, so a message that raced with the
 * retirement and lands in the house's next life is refused by the runner,
 * never handled by the newer actor. Houses are memory of their system,
 * returned to malloc only by sh_system_free, so an old address never
 * touches freed memory.
 */
#ifndef SH_HOUSE_H
#define SH_HOUSE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

#include "base/atomic.h"
#include "base/check.h"
#include "actor/futtable.h"
#include "actor/gate.h"
#include "sched/housequeue.h"
#include "base/list.h"
#include "actor/mailbox.h"
#include "mem/msg.h"

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
typedef enum sh_box {
  SH_BOX_REPLY,
  SH_BOX_EXCEPTION,
  SH_BOX_ASK,
  SH_BOX_NOTICE,
  SH_BOX_EVENT,
  SH_BOXES
} sh_box;

/* `life`: generation << 2 | vacant << 1 | stopped. Vacant: retired and
 * not yet taken by a spawn (the last actor's figures are still there). A
 * generation fits SH_GEN_BITS (what an address carries); a house whose
 * generation would pass SH_GEN_MAX is never reused, so no address ever
 * names two actors. */
#define SH_GEN_BITS 23
#define SH_GEN_MAX ((1u << SH_GEN_BITS) - 1)
#define SH_LIFE_STOPPED 1u
#define SH_LIFE_VACANT 2u
static inline uint32_t sh_life(uint32_t gen, bool stopped) {
  return gen << 2 | (stopped ? 1u : 0u);
}
static inline uint32_t sh_life_gen(uint32_t life) { return life >> 2; }

/* A message in an ask or notice mailbox carries, in its `internal` word, the
 * generation it was sent to and whether it holds a slot of a bounded
 * mailbox (the take gives the slot back to that gate). */
#define SH_MSG_SLOT (1u << 31)
/* A message in a reply or exception mailbox with this bit in `internal` is
 * an exception carried in a refused ask's own message: with no memory for an
 * exception of its own, a refusal still reaches the asker
 * (sh_house_refuse_with). */
#define SH_MSG_REFUSAL (1u << 30)
_Static_assert(SH_GEN_MAX < SH_MSG_REFUSAL, "a generation tag leaves the two flag bits free");

/* Whether answer m fails its future: an exception, or a refusal carried in
 * the asked message (SH_MSG_REFUSAL). */
static inline bool sh_msg_is_exception(const sh_msg *m) {
  return m->type == &sh_exception_type || (m->internal & SH_MSG_REFUSAL) != 0;
}

/* The ask and notice mailboxes are the only ones with gates and figures:
 * their per-house arrays are indexed by sh_req(box). */
#define SH_REQ_BOXES 2
static inline unsigned sh_req(sh_box box) { return (unsigned)box - SH_BOX_ASK; }

/* Priority thresholds (decided at enqueue). */
#define SH_HIGH_REPLIES 2
#define SH_HIGH_EVENTS 4

struct sh_sleeper;

/* Bytes of actor struct a house holds itself (see small_actor). */
#define SH_HOUSE_SMALL_ACTOR 64u

typedef struct sh_house {
  /* Three cache lines (mailbox.h): producers', the runner's, and both. */
  sh_mailboxes mb;

  /* Shared between threads: read by every send, written now and then (a
   * state change, a spawn, a stop). A line of its own, with the gates: the
   * runner's writes to the fields below never make a sender miss here. */
  _Alignas(64) _Atomic int state; /* sh_house_state */
  atomic_bool high;           /* queue in the high sub-queue */
  /* Where this generation's notices go: SH_BOX_ASK for an ordered class.
   * Atomic: a sender that raced with a retirement may read it while the
   * next spawn sets it (its message is then refused anyway). */
  _Atomic uint8_t notice_box;
  _Atomic uint32_t life;      /* generation, vacant, stopped (file comment) */
  sh_hq_link qlink;           /* run queue link, owned by the queue holding it */
  /* The bounded ask / notice mailboxes' gates of this generation; NULL:
   * unbounded. Atomic: a sender that raced with a retirement may read it
   * while the next spawn sets it (acquire: the gate's contents). */
  sh_gate *_Atomic gate[SH_REQ_BOXES];

  /* Set by the spawn of each generation, before the house is published. */
  uint32_t owner;             /* worker index */
  uint64_t seq;               /* creation number: deterministic ordering */
  sh_system *sys;             /* for the house's whole life, all generations */
  const sh_actor_class *cls;
  sh_actor *actor;
  uint32_t max_per_run, max_batch;
  bool pinned;                /* placed by sh_spawn_on: never follows (house.c) */
  struct sh_house *free_next; /* in a free list (hstore.h) */
  /* Gate memory, kept across generations: a slot taken in one generation
   * is given back to the same object in the next (SH_MSG_SLOT). */
  sh_gate *gate_mem[SH_REQ_BOXES];
  struct sh_sleeper *outside; /* OUTSIDE houses: the bridge thread to wake */
  /* The greatest backlog seen when a run began; the runner writes it,
   * sh_mailbox_stats_get reads it (relaxed: a metric). */
  atomic_uint high_water[SH_REQ_BOXES];

  /* Only the current runner touches these. */
  sh_futtable futures;      /* pending futures by ask id (future.h) */
  uint64_t next_ask_id;
  uint64_t next_timer_id;
  bool barrier;               /* a barrier stack is running */
  bool vacant;                /* retired: no actor; a run refuses what came */
  bool mounted;
  bool stop_done;             /* the stop hook ran */
  uint32_t stop_kept;         /* futures kept past the stop for their waiter's return */
  sh_list stacks;             /* live stacks (sh_stack.link), for shutdown */
  sh_list ready;              /* deferred stacks, ready to run again (stack.h) */
  sh_list timers;             /* live actor timers (sh_timer.actor_link), cancel by id */
  /* What a layer above attaches to the house (an IO actor's channels,
   * net/): the house is not retired while any is left, and the actor's
   * stop calls close_attached, which the one who attached them set. */
  sh_list attached;
  void (*close_attached)(struct sh_house *h);

  /* The rest of the stride: an actor whose struct fits lives here, with no
   * allocation of its own (hstore.h). */
  _Alignas(16) unsigned char small_actor[SH_HOUSE_SMALL_ACTOR];
} sh_house;

/* The runtime's memory per idle actor, beyond the user's struct: houses sit
 * in slabs at a stride of whole SH_HOUSE_ALIGN units (hstore.c), and the
 * budget is two of them. A new field takes room from small_actor. */
_Static_assert(sizeof(sh_house) == 512, "sh_house must fill its 512-byte stride exactly");
_Static_assert(SH_BOXES == SH_MAILBOXES, "one mailbox per sh_box");

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
  sh_msg *m = sh_mailbox_take(&h->mb, box);
  if (m == NULL || box < SH_BOX_ASK || box > SH_BOX_NOTICE || !(m->internal & SH_MSG_SLOT))
    return m;
  m->internal &= ~SH_MSG_SLOT;
  sh_gate *g = h->gate_mem[sh_req(box)];
  SH_ASSERT(g != NULL); /* a slot was taken at a gate, whose memory outlives the generation */
  if (sh_gate_release(g)) sh_house_hand_off(g);
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
/* With an exception of its own: false when there is no memory for one (true
 * too when there is nobody to answer). */
bool sh_house_refuse(sh_house *to, uint64_t id, int error);
/* With the refused ask's own message, `carrier`, which belongs to `to` now
 * (SH_MSG_REFUSAL): after sh_house_refuse found no memory. */
void sh_house_refuse_in(sh_house *to, uint64_t id, int error, sh_msg *carrier);
/* `carrier` (the refused ask's message, or NULL) holds the exception when no
 * memory is left for one of its own: an ask is answered even then. true:
 * carrier was used, and belongs to `to` now. */
bool sh_house_refuse_with(sh_house *to, uint64_t id, int error, sh_msg *carrier);
/* Marks generation `gen` of the house stopped and refuses every sender
 * waiting for room in its bounded mailboxes; nothing when the house is in
 * another generation. Any thread. */
void sh_house_stop(sh_house *h, uint32_t gen);
/* Closes the gates of generation gen and refuses their waiters (a spawn
 * that failed after its gates opened). */
void sh_house_close_gates(sh_house *h, uint32_t gen);
/* Whether no sender waits at either gate. */
bool sh_house_gates_empty(const sh_house *h);
/* Frees every message left in h's mailboxes, when nothing pushes any more
 * (sh_system_free, or a bridge that was never registered). */
void sh_house_free_messages(sh_house *h);
/* Whether generation gen lives and is not stopped. acquire: a fast look for
 * the send path and the handlers; the exact decisions are the gate's
 * (closed under its lock) and the runner's (the generation tag). */
static inline bool sh_house_live(const sh_house *h, uint32_t gen) {
  return sh_atomic_load(&h->life, memory_order_acquire) == sh_life(gen, false);
}
static inline bool sh_house_stopped(const sh_house *h) {
  return sh_atomic_load(&h->life, memory_order_acquire) & SH_LIFE_STOPPED;
}
/* The house's current generation. Its runner, or the spawn that made it. */
static inline uint32_t sh_house_gen(const sh_house *h) {
  return sh_life_gen(sh_atomic_load(&h->life, memory_order_relaxed));
}
/* The gate of box in this generation, or NULL. */
static inline sh_gate *sh_house_gate(const sh_house *h, sh_box box) {
  return sh_atomic_load(&h->gate[sh_req(box)], memory_order_acquire);
}

#endif
