/*
 * The actors and messages of the reclaimed-actor cases (reclaim_cases.h,
 * which says what the cases check), on the public API only.
 *
 * Victims are the actors that are stopped, reclaimed and replaced; each
 * has an id, and every message of the test carries the id of the actor it
 * is meant for: the victim's handler checks it is its own and was not
 * handled before (CHECK). The messages' drop hook counts every free.
 * Drivers spawn, stop and send, in one role per case. The gate holds the
 * asks it gets until its lock is stopped, then answers each with the
 * number it carries.
 */
#ifndef TESTS_RECLAIM_ACTORS_H
#define TESTS_RECLAIM_ACTORS_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <stackhouse/probe.h>
#include <stackhouse/stackhouse.h>

#include "support/harness.h"

#define RC_WORKERS 2u
#define RC_CHURN 600u      /* live actors a churner spawns: more than a worker keeps free */
#define RC_REUSE 1100u     /* spawn + stop cycles per reuse driver (two of them) */
#define RC_REUSE_STEP 16u  /* of them per run of the driver */
#define RC_REUSE_LIVE 64u  /* actors a reuse driver leaves alive */
#define RC_SENDERS 4u
#define RC_BURST 8u        /* notices per round of a sender, and one ask */
#define RC_STOP_AT 200u    /* messages the target of stop_sending takes before it stops */
#define RC_AFTER 64u       /* rounds a sender goes on after the refusal */
#define RC_MAX_ROUNDS 100000u
#define RC_ASKERS 3u
#define RC_LANES 64u

/* ---- messages: each names the actor it is meant for ------------------------ */

/* freed_into: a counter its drop hook bumps too, for a check that a send
 * freed it (G.freed moves with every other actor's frees). */
typedef struct rc_note {
  sh_msg hdr;
  uint64_t to;
  bool handled;
  atomic_uint *freed_into;
} rc_note;
typedef rc_note rc_ask;
/* Starts a round of an actor of the test. */
typedef struct rc_go { sh_msg hdr; uint32_t n; } rc_go;

static struct {
  atomic_uint left; /* actors still working: the test thread waits for 0 */
  atomic_ullong next_id;
  atomic_ullong made, freed, freed_handled, handled; /* rc_note and rc_ask */
  atomic_ullong refused;                             /* sends that said -ESHUTDOWN */
  atomic_ullong asks_ok, asks_failed;                /* asks to the test's actors */
  atomic_int stopped;                                /* stop hooks */
  atomic_int held;                                   /* the gate's waiting stacks */
  atomic_int asked;                                  /* asks in flight to the stopped actor */
  atomic_uint seen_at_stop; /* messages a self-stopping victim took */
  const sh_addr *victim;    /* the reclaimed actor of the refused case */
  uint64_t victim_id;
  const sh_addr *old[2 * RC_REUSE];
  uint64_t old_id[2 * RC_REUSE];
} G;

static void rc_drop(sh_msg *m) {
  atomic_fetch_add(&G.freed, 1);
  rc_note *n = (rc_note *)m;
  if (n->handled) atomic_fetch_add(&G.freed_handled, 1);
  if (n->freed_into != NULL) atomic_fetch_add(n->freed_into, 1);
}
static SH_MSG_DEFINE_DROP(rc_note, SH_NOTICE, 0, rc_drop);
static SH_MSG_DEFINE_DROP(rc_ask, SH_ASK, 0, rc_drop);
static SH_MSG_DEFINE(rc_go, SH_NOTICE, 0);

static sh_msg *rc_new(const sh_msg_type *t, uint64_t to) {
  rc_note *m = (rc_note *)sh_msg_alloc(t);
  CHECK(m != NULL);
  m->to = to;
  atomic_fetch_add(&G.made, 1);
  return &m->hdr;
}
static sh_msg *rc_note_new(uint64_t to) { return rc_new(&rc_note_type, to); }
static sh_msg *rc_ask_new(uint64_t to) { return rc_new(&rc_ask_type, to); }
/* A message whose free bumps *freed. */
static sh_msg *rc_probe(const sh_msg_type *t, uint64_t to, atomic_uint *freed) {
  sh_msg *m = rc_new(t, to);
  ((rc_note *)m)->freed_into = freed;
  return m;
}

static void rc_kick(const sh_addr *to, uint32_t n) {
  CHECK(sh_notice(to, &sh_msg_new(rc_go, .n = n)->hdr) == 0);
}

/* A send that takes its message: accepted, or refused by a stopped actor. */
static int rc_sent(int rc) {
  CHECK(rc == 0 || rc == -ESHUTDOWN);
  if (rc == -ESHUTDOWN) atomic_fetch_add(&G.refused, 1);
  return rc;
}
/* A send to an actor known to be stopped. */
static void rc_refused(int rc) { CHECK(rc_sent(rc) == -ESHUTDOWN); }

/* The end of an ask to actor `id`: its reply carries that id, or it was
 * refused because the actor stopped. */
static bool rc_answered(const sh_future *f, uint64_t id) {
  int err = sh_future_error(f);
  CHECK(err == 0 || err == -ESHUTDOWN);
  if (err != 0) {
    atomic_fetch_add(&G.asks_failed, 1);
    return false;
  }
  CHECK(sh_future_reply(f, num_reply)->v == (long)id);
  atomic_fetch_add(&G.asks_ok, 1);
  return true;
}

static void rc_done(void) { atomic_fetch_sub(&G.left, 1); }

/* ---- victims: the actors that are stopped, reclaimed and replaced ---------- */

typedef struct rc_cfg {
  uint64_t id;
  uint32_t stop_at;     /* stops itself after this many messages (0: never) */
  const sh_addr *gate;  /* asks it first, with its id, on each message */
  bool counted;         /* counts down `left` when its notice is done */
} rc_cfg;
typedef struct vic { sh_actor base; rc_cfg cfg; uint32_t seen; } vic;
typedef struct vic_locals { sh_future *f; } vic_locals;
TH_CFG_INIT(vic_init, vic, rc_cfg);

/* The message is for this actor, and taken once. */
static void vic_take(sh_actor *self, sh_stack *st) {
  vic *v = (vic *)self;
  rc_note *m = (rc_note *)sh_stack_msg(st);
  CHECK(m->to == v->cfg.id);
  CHECK(!m->handled);
  m->handled = true;
  atomic_fetch_add(&G.handled, 1);
  if (++v->seen == v->cfg.stop_at) CHECK(sh_stop(sh_self(self)) == 0);
}

/* Asks the gate and waits; false once the answer came (or failed). */
static bool vic_gated(sh_actor *self, sh_stack *st) {
  vic *v = (vic *)self;
  vic_locals *l = sh_stack_locals(st);
  if (v->cfg.gate == NULL) return false;
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_ask(st, v->cfg.gate, th_new_ask((long)v->cfg.id), SH_FOREVER);
    CHECK(l->f != NULL);
    return true;
  }
  rc_answered(l->f, v->cfg.id);
  return false;
}

static sh_yield vic_notice(sh_actor *self, sh_stack *st) {
  if (sh_stack_state(st) == SH_START) vic_take(self, st);
  if (vic_gated(self, st)) return sh_suspend(st, 1);
  if (((vic *)self)->cfg.counted) rc_done();
  return sh_return(st, NULL);
}

static sh_yield vic_ask(sh_actor *self, sh_stack *st) {
  if (sh_stack_state(st) == SH_START) vic_take(self, st);
  if (vic_gated(self, st)) return sh_suspend(st, 1);
  vic_locals *l = sh_stack_locals(st);
  if (l->f != NULL && sh_future_failed(l->f)) return sh_throw(st, sh_future_error(l->f));
  return th_reply_with(st, (long)((vic *)self)->cfg.id);
}

static void vic_stop(sh_actor *self) {
  vic *v = (vic *)self;
  if (v->cfg.stop_at != 0) atomic_store(&G.seen_at_stop, v->seen);
  atomic_fetch_add(&G.stopped, 1);
}

static bool vic_one_at_a_time(sh_actor *self, const sh_msg *m) {
  (void)self;
  (void)m;
  return true;
}

#define VIC_CLASS(nm, ...)                                                              \
  {.name = nm, .size = sizeof(vic), .locals_size = sizeof(vic_locals), .init = vic_init, \
   .notice = vic_notice, .ask = vic_ask, .stop = vic_stop, __VA_ARGS__}
static const sh_actor_class vic_class = VIC_CLASS("rc_victim");
/* Every message a barrier: one runs, the others queue. */
static const sh_actor_class vic_barrier_class =
    VIC_CLASS("rc_victim_barrier", .barrier = vic_one_at_a_time);

/* A new victim of class c with a fresh id; its id in *id. */
static const sh_addr *rc_spawn_as(sh_system *sys, const sh_actor_class *c, rc_cfg cfg,
                                  uint64_t *id) {
  cfg.id = atomic_fetch_add(&G.next_id, 1) + 1;
  const sh_addr *a = NULL;
  CHECK(sh_spawn(sys, c, &cfg, 1, &a) == 0);
  *id = cfg.id;
  return a;
}
static const sh_addr *rc_spawn(sh_system *sys, rc_cfg cfg, uint64_t *id) {
  return rc_spawn_as(sys, &vic_class, cfg, id);
}

/* ---- drivers: the actors that spawn, stop and send -------------------------- */

enum { ROLE_CHURN = 1, ROLE_REUSE, ROLE_SEND, ROLE_ASKER, ROLE_LANE };

typedef struct drv_cfg {
  int role;
  uint32_t index;
  const sh_addr *target; /* the actor it sends to (or the gate, churn) */
  uint64_t target_id;
} drv_cfg;
typedef struct drv {
  sh_actor base;
  drv_cfg cfg;
  uint32_t rounds, after, cycles;
  bool refused;
  uint64_t rand;
} drv;
typedef struct drv_locals {
  sh_future *f;
  const sh_addr *child;
  uint64_t child_id;
  uint32_t left;
} drv_locals;
TH_CFG_INIT(drv_init, drv, drv_cfg);

/* Every kind of send an actor makes, to an actor known to be reclaimed:
 * refused, the message freed (or left the caller's, for _try). */
static void drv_send_all_refused(sh_stack *st, const sh_addr *to, uint64_t id) {
  atomic_uint freed = 0;
  rc_refused(sh_notice(to, rc_probe(&rc_note_type, id, &freed)));
  CHECK(atomic_load(&freed) == 1);
  sh_msg *m = rc_probe(&rc_note_type, id, &freed);
  CHECK(sh_notice_try(to, m) == -ESHUTDOWN && atomic_load(&freed) == 1);
  sh_msg_free(m);
  sh_future *f = sh_ask(st, to, rc_probe(&rc_ask_type, id, &freed), SH_FOREVER);
  CHECK(f != NULL && sh_future_error(f) == -ESHUTDOWN && atomic_load(&freed) == 3);
  CHECK(sh_ask_try(st, to, rc_probe(&rc_ask_type, id, &freed), SH_FOREVER, &f) == 0);
  CHECK(sh_future_error(f) == -ESHUTDOWN && atomic_load(&freed) == 4);
  /* A failed put holds its notice, freed with the future (after this). */
  f = sh_put(st, to, rc_note_new(id), SH_FOREVER);
  CHECK(f != NULL && sh_future_error(f) == -ESHUTDOWN && sh_future_msg(f) != NULL);
}

/* Spawns n live victims (on this worker) into the freed houses, each sent
 * a message of its own; a gate makes them wait on it. Counted: each
 * counts down `left` once it is done with that message. */
static void drv_churn(drv *d, uint32_t n, bool counted) {
  rc_cfg cfg = {.gate = d->cfg.target, .counted = counted};
  for (uint32_t i = 0; i < n; i++) {
    uint64_t id;
    const sh_addr *a = rc_spawn(sh_actor_system(&d->base), cfg, &id);
    rc_sent(sh_notice(a, rc_note_new(id)));
  }
}

/* One step of the reuse driver: spawn, send, stop; a send to an older
 * address on the way. Then a send to each of its old addresses. */
static void drv_reuse(drv *d, sh_stack *st) {
  uint32_t base = d->cfg.index * RC_REUSE;
  if (d->rand == 0) d->rand = 0x9e3779b97f4a7c15ull ^ d->cfg.index;
  for (uint32_t i = 0; i < RC_REUSE_STEP && d->cycles < RC_REUSE; i++, d->cycles++) {
    uint64_t id;
    const sh_addr *a = rc_spawn(sh_actor_system(&d->base), (rc_cfg){0}, &id);
    G.old[base + d->cycles] = a;
    G.old_id[base + d->cycles] = id;
    rc_sent(sh_notice(a, rc_note_new(id)));
    CHECK(sh_stop(a) == 0);
    uint32_t k = base + (uint32_t)(th_xorshift(&d->rand) % (d->cycles + 1));
    rc_refused(sh_notice(G.old[k], rc_note_new(G.old_id[k])));
  }
  if (d->cycles < RC_REUSE) {
    rc_kick(sh_self(&d->base), 0);
    return;
  }
  drv_churn(d, RC_REUSE_LIVE, true); /* live actors in reused houses */
  for (uint32_t k = base; k < base + RC_REUSE; k++) {
    rc_refused(sh_notice(G.old[k], rc_note_new(G.old_id[k])));
    if (k % 8 == 0) {
      sh_future *f = sh_ask(st, G.old[k], rc_ask_new(G.old_id[k]), SH_FOREVER);
      CHECK(f != NULL && sh_future_error(f) == -ESHUTDOWN);
    }
  }
  rc_done();
}

/* A round of a sender, before the target refused: a burst and an ask. */
static void drv_send_burst(drv *d, sh_stack *st, drv_locals *l) {
  for (uint32_t i = 0; i < RC_BURST; i++)
    if (rc_sent(sh_notice(d->cfg.target, rc_note_new(d->cfg.target_id))) != 0) d->refused = true;
  l->f = sh_ask(st, d->cfg.target, rc_ask_new(d->cfg.target_id), SH_FOREVER);
  CHECK(l->f != NULL);
}

/* A round after the refusal: a newcomer in a freed house takes its own
 * message, while the old target refuses everything, for good. */
static void drv_send_after(drv *d, sh_stack *st, drv_locals *l) {
  uint64_t id;
  const sh_addr *a = rc_spawn(sh_actor_system(&d->base), (rc_cfg){0}, &id);
  rc_sent(sh_notice(a, rc_note_new(id)));
  rc_refused(sh_notice(d->cfg.target, rc_note_new(d->cfg.target_id)));
  l->f = sh_ask(st, d->cfg.target, rc_ask_new(d->cfg.target_id), SH_FOREVER);
  CHECK(l->f != NULL && sh_future_error(l->f) == -ESHUTDOWN);
  CHECK(sh_stop(a) == 0);
}

static sh_yield drv_send(drv *d, sh_stack *st) {
  drv_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    if (d->refused)
      drv_send_after(d, st, l);
    else
      drv_send_burst(d, st, l);
    return sh_suspend(st, 1);
  }
  if (!rc_answered(l->f, d->cfg.target_id)) d->refused = true;
  d->rounds++;
  if (d->refused && ++d->after > RC_AFTER) {
    rc_done();
    return sh_return(st, NULL);
  }
  CHECK(d->rounds < RC_MAX_ROUNDS);
  if (d->rounds < RC_MAX_ROUNDS) rc_kick(sh_self(&d->base), 0);
  return sh_return(st, NULL);
}

static sh_yield drv_asker(drv *d, sh_stack *st) {
  drv_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_ask(st, d->cfg.target, rc_ask_new(d->cfg.target_id), SH_FOREVER);
    CHECK(l->f != NULL);
    atomic_fetch_add(&G.asked, 1);
    return sh_suspend(st, 1);
  }
  CHECK(!rc_answered(l->f, d->cfg.target_id)); /* stopped before it answered */
  rc_done();
  return sh_return(st, NULL);
}

/* A lane: `n` cycles of spawn, ask, stop; the states alternate so that
 * each cycle's future is freed with the state it was made in. */
static sh_yield drv_lane(drv *d, sh_stack *st) {
  drv_locals *l = sh_stack_locals(st);
  int state = sh_stack_state(st);
  if (state == SH_START) {
    l->left = ((rc_go *)sh_stack_msg(st))->n;
  } else {
    CHECK(rc_answered(l->f, l->child_id));
    CHECK(sh_stop(l->child) == 0);
    if (--l->left == 0) {
      rc_done();
      return sh_return(st, NULL);
    }
  }
  l->child = rc_spawn(sh_actor_system(&d->base), (rc_cfg){0}, &l->child_id);
  l->f = sh_ask(st, l->child, rc_ask_new(l->child_id), SH_FOREVER);
  CHECK(l->f != NULL);
  return sh_suspend(st, state == 1 ? 2 : 1);
}

static sh_yield drv_notice(sh_actor *self, sh_stack *st) {
  drv *d = (drv *)self;
  switch (d->cfg.role) {
  case ROLE_CHURN:
    drv_churn(d, RC_CHURN, d->cfg.target != NULL);
    if (d->cfg.target == NULL) drv_send_all_refused(st, G.victim, G.victim_id);
    rc_done();
    return sh_return(st, NULL);
  case ROLE_REUSE:
    drv_reuse(d, st);
    return sh_return(st, NULL);
  case ROLE_SEND: return drv_send(d, st);
  case ROLE_ASKER: return drv_asker(d, st);
  default: return drv_lane(d, st);
  }
}

static const sh_actor_class drv_class = {.name = "rc_driver",
                                         .size = sizeof(drv),
                                         .locals_size = sizeof(drv_locals),
                                         .init = drv_init,
                                         .notice = drv_notice};

static const sh_addr *rc_driver(sh_system *sys, drv_cfg cfg, uint32_t worker) {
  drv_cfg c = cfg;
  return th_spawn_on(sys, &drv_class, &c, worker);
}

/* ---- the gate: holds asks until its lock is stopped, then answers them ----- */

typedef struct lock_actor { sh_actor base; bool locked; } lock_actor;
static atomic_int rc_lock_held;

static bool lock_barrier(sh_actor *self, const sh_msg *m) {
  (void)m;
  return !((lock_actor *)self)->locked;
}
static sh_yield lock_ask(sh_actor *self, sh_stack *st) {
  return th_hold(self, st, &((lock_actor *)self)->locked, &rc_lock_held);
}
static const sh_actor_class lock_class = {.name = "rc_lock", .size = sizeof(lock_actor),
    .locals_size = sizeof(th_hold_locals), .ask = lock_ask, .barrier = lock_barrier};

typedef const sh_addr *rc_addr;
typedef struct gate_actor { sh_actor base; rc_addr cfg; } gate_actor; /* cfg: its lock */
typedef struct gate_locals { sh_future *f; } gate_locals;
TH_CFG_INIT(gate_init, gate_actor, rc_addr);

/* Answers an ask with the number it carries, once the lock is stopped. */
static sh_yield gate_ask(sh_actor *self, sh_stack *st) {
  gate_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_ask(st, ((gate_actor *)self)->cfg, th_new_ask(0), SH_FOREVER);
    CHECK(l->f != NULL);
    atomic_fetch_add(&G.held, 1);
    return sh_suspend(st, 1);
  }
  CHECK(sh_future_error(l->f) == -ESHUTDOWN);
  return th_reply_with(st, sh_stack_msg_as(st, num_ask)->v);
}
static const sh_actor_class gate_class = {.name = "rc_gate", .size = sizeof(gate_actor),
    .locals_size = sizeof(gate_locals), .init = gate_init, .ask = gate_ask};

#endif
