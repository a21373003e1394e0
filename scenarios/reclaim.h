/*
 * What the reclaim scenarios (reclaim.c: stop_while_sending and
 * stop_while_asked; reclaim_reuse.c: address_reuse) share: their sizes and
 * state, sends of messages that name the actor they are meant for, the
 * victims (stopped, reclaimed, replaced) and the drivers. Defined in
 * reclaim.c.
 */
#ifndef SCN_RECLAIM_H
#define SCN_RECLAIM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/scenario.h>

#define STOP_AT 50u     /* messages the stream's target takes before it stops */
#define SENDERS 4u
#define BURST 4u        /* notices per round of a sender, and one ask */
#define AFTER 16u       /* rounds after the refusal */
#define MAX_ROUNDS 10000u
#define MAX_STREAM 10000000u /* notices of the outside thread: a bound, never reached */
#define ASKERS 3u
#define CHURN 80u       /* newcomers per churner: more than a slab */
#define CYCLES 300u     /* spawn + stop per reuse driver */
#define STEP 16u        /* of them per run */
#define LIVE 32u        /* newcomers a reuse driver keeps alive at the end */

typedef struct world {
  sh_scn *s;
  sh_system *sys;
  atomic_uint left;
  atomic_uint next_id;
  atomic_uint made, freed, freed_handled, handled, refused, asks_ok, asks_failed;
  atomic_uint held, asked, seen_at_stop;
  atomic_bool stop_sent;
  const sh_addr *target, *gate, *lock, *churn[2];
  uint32_t target_id;
  const sh_addr *old[2 * CYCLES];
  uint32_t old_id[2 * CYCLES];
} world;

/* The run's state, from one of its actors. */
world *rec_world_of(const sh_actor *self);

/* A new actor of class c with a fresh id; the id in *id. */
const sh_addr *rec_spawn_new(world *wd, const sh_actor_class *c, uint32_t *id);

/* A notice to actor `id` at `to`: 0, or -ESHUTDOWN when it stopped (counted). */
int rec_notice_to(world *wd, const sh_addr *to, uint32_t id);

/* A notice to an actor known to be stopped: `who` sends it. */
void rec_refused(world *wd, const sh_addr *to, uint32_t id, const char *who);

/* An ask to actor `id` at `to`, from stack st. */
sh_future *rec_ask_to(world *wd, sh_stack *st, const sh_addr *to, uint32_t id);

/* Every message made was freed once; each one handled, once, after. */
void rec_verify_messages(sh_scn *s);

/* Victims: one that lives a round, one whose notice counts down the
 * workload. */
extern const sh_actor_class rec_vic_class, rec_live_class;

/* ---- drivers ------------------------------------------------------------------ */

typedef struct drv {
  sh_scn_actor base;
  uint32_t rounds, after, cycles;
  bool refused;
  const sh_addr *newcomer; /* a sender's, stopped a round later */
} drv;
typedef struct drv_locals { sh_future *f; } drv_locals;

#define DRV_CLASS(nm, notice_)                                                              \
  {.name = nm, .size = sizeof(drv), .locals_size = sizeof(drv_locals),                      \
   .init = sh_scn_actor_init, .notice = notice_}

#endif
