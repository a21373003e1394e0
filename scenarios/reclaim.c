/*
 * Reclaimed actors: a stopped actor with nothing left gives its house to
 * the next spawn on its worker, and its old address must refuse every send
 * (-ESHUTDOWN) without a message ever reaching the newer actor.
 *
 *   stop_while_sending  senders on both workers and the outside thread send
 *                       notices and asks to an actor that stops itself in
 *                       the middle of the stream; after the refusal each
 *                       sender spawns newcomers into the freed houses and
 *                       goes on sending to the old address;
 *   stop_while_asked    an actor stopped with its own ask pending (to a
 *                       gate that holds it) and asks to it running and
 *                       queued; newcomers in the freed houses ask the gate
 *                       too, and then it answers everybody.
 *
 * address_reuse is reclaim_reuse.c's; what it shares with these (the
 * state, the messages, the victims, the drivers: reclaim.h) is here.
 *
 * Every message of these scenarios names the actor it is meant for; the
 * handler checks it is its own and was not handled before, and the drop
 * hook counts every free. Invariants, beyond the shared ones: no message
 * reached another actor or was handled twice, every message made was freed
 * exactly once, and each case's own count of answers and refusals.
 */
#include <stdatomic.h>

#include <stackhouse/probe.h>

#include <stackhouse/scenario.h>

#include "reclaim.h"

/* ---- messages: each names the actor it is meant for ------------------------ */

typedef struct rec_note {
  sh_msg hdr;
  world *wd;
  uint32_t to;
  bool handled;
} rec_note;
typedef rec_note rec_ask;

static void rec_drop(sh_msg *m) {
  rec_note *n = (rec_note *)m;
  atomic_fetch_add(&n->wd->freed, 1);
  if (n->handled) atomic_fetch_add(&n->wd->freed_handled, 1);
}
SH_MSG_DEFINE_DROP(rec_note, SH_NOTICE, 0, rec_drop);
SH_MSG_DEFINE_DROP(rec_ask, SH_ASK, 0, rec_drop);

static sh_msg *rec_new(world *wd, const sh_msg_type *t, uint32_t to) {
  rec_note *m = (rec_note *)sh_msg_alloc(t);
  if (m == NULL) return NULL;
  m->wd = wd;
  m->to = to;
  atomic_fetch_add(&wd->made, 1);
  return &m->hdr;
}

/* A send that takes its message: accepted, or refused by a stopped actor. */
static int sent(world *wd, int rc) {
  SH_SCN_CHECK(wd->s, rc == 0 || rc == -ESHUTDOWN, "a send: %d", rc);
  if (rc == -ESHUTDOWN) atomic_fetch_add(&wd->refused, 1);
  return rc;
}
/* A notice to an actor known to be stopped: `who` sends it. */
void rec_refused(world *wd, const sh_addr *to, uint32_t id, const char *who) {
  int rc = sh_notice(to, rec_new(wd, &rec_note_type, id));
  SH_SCN_CHECK(wd->s, sent(wd, rc) == -ESHUTDOWN, "%s: a send to a stopped actor: %d", who, rc);
}
int rec_notice_to(world *wd, const sh_addr *to, uint32_t id) {
  return sent(wd, sh_notice(to, rec_new(wd, &rec_note_type, id)));
}
sh_future *rec_ask_to(world *wd, sh_stack *st, const sh_addr *to, uint32_t id) {
  sh_future *f = sh_ask(st, to, rec_new(wd, &rec_ask_type, id), SH_FOREVER);
  SH_SCN_CHECK(wd->s, f != NULL, "sh_ask");
  return f;
}

/* An ask to actor `id` ended: its answer carries the id, or it was refused
 * because the actor stopped. */
static bool answered(world *wd, const sh_future *f, uint32_t id) {
  uint64_t v = 0;
  if (sh_scn_num_of(f, &v)) {
    SH_SCN_CHECK(wd->s, v == id, "the answer of actor %llu to an ask to %u",
                 (unsigned long long)v, id);
    atomic_fetch_add(&wd->asks_ok, 1);
    return true;
  }
  SH_SCN_CHECK(wd->s, sh_future_error(f) == -ESHUTDOWN, "an ask failed: %d",
               sh_future_error(f));
  atomic_fetch_add(&wd->asks_failed, 1);
  return false;
}

static void one_done(world *wd) { sh_scn_count_down(wd->s, wd->sys, &wd->left); }
/* ---- victims: stopped, reclaimed, replaced ------------------------------- */

typedef struct vic {
  sh_scn_actor base;
  uint32_t stop_at;
  const sh_addr *gate; /* asked first, with the id, by each handler */
  bool kicks_churn;    /* its stop starts the churners */
  bool counted;        /* its notice's end counts down the workload */
  uint32_t seen;
} vic;
typedef struct vic_locals { sh_future *f; } vic_locals;

world *rec_world_of(const sh_actor *self) { return sh_scn_state(sh_scn_of(self)); }

static int vic_init(sh_actor *self, void *arg) { return sh_scn_actor_init(self, arg); }
static int target_init(sh_actor *self, void *arg) {
  ((vic *)self)->stop_at = STOP_AT;
  return sh_scn_actor_init(self, arg);
}
static int live_init(sh_actor *self, void *arg) {
  ((vic *)self)->counted = true;
  return sh_scn_actor_init(self, arg);
}
static int gated_init(sh_actor *self, void *arg) {
  int rc = live_init(self, arg);
  ((vic *)self)->gate = rec_world_of(self)->gate;
  return rc;
}
static int asked_init(sh_actor *self, void *arg) {
  int rc = gated_init(self, arg);
  ((vic *)self)->kicks_churn = true;
  return rc;
}

/* The message is for this actor, and taken once. */
static void vic_take(sh_actor *self, sh_stack *st) {
  world *wd = rec_world_of(self);
  vic *v = (vic *)self;
  rec_note *m = (rec_note *)sh_stack_msg(st);
  SH_SCN_CHECK(wd->s, m->to == sh_scn_id(self), "actor %u got a message for %u",
               sh_scn_id(self), m->to);
  SH_SCN_CHECK(wd->s, !m->handled, "a message handled twice");
  m->handled = true;
  atomic_fetch_add(&wd->handled, 1);
  if (++v->seen == v->stop_at) sh_stop(sh_self(self));
}

/* Asks the gate and waits (true), or the answer came (false). */
static bool vic_gated(sh_actor *self, sh_stack *st) {
  vic *v = (vic *)self;
  vic_locals *l = sh_stack_locals(st);
  if (v->gate == NULL) return false;
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_scn_ask_num(st, v->gate, sh_scn_id(self), SH_FOREVER);
    return true;
  }
  answered(rec_world_of(self), l->f, sh_scn_id(self));
  return false;
}

static sh_yield vic_notice(sh_actor *self, sh_stack *st) {
  if (sh_stack_state(st) == SH_START) vic_take(self, st);
  if (vic_gated(self, st)) return sh_suspend(st, 1);
  if (((vic *)self)->counted) one_done(rec_world_of(self));
  return sh_return(st, NULL);
}

static sh_yield vic_ask(sh_actor *self, sh_stack *st) {
  if (sh_stack_state(st) == SH_START) vic_take(self, st);
  if (vic_gated(self, st)) return sh_suspend(st, 1);
  vic_locals *l = sh_stack_locals(st);
  if (l->f != NULL && sh_future_failed(l->f)) return sh_throw(st, sh_future_error(l->f));
  return sh_scn_answer(st, sh_scn_id(self));
}

static void vic_stop(sh_actor *self) {
  world *wd = rec_world_of(self);
  vic *v = (vic *)self;
  if (v->stop_at != 0) atomic_store(&wd->seen_at_stop, v->seen);
  /* The actor stopped while asked: its house goes to the churners. */
  if (v->kicks_churn)
    for (int i = 0; i < 2; i++) sh_scn_kick(wd->churn[i]);
}

static bool one_at_a_time(sh_actor *self, const sh_msg *m) {
  (void)self;
  (void)m;
  return true;
}

#define VIC_CLASS(nm, init_, ...)                                                          \
  {.name = nm, .size = sizeof(vic), .locals_size = sizeof(vic_locals), .init = init_,      \
   .notice = vic_notice, .ask = vic_ask, .stop = vic_stop, __VA_ARGS__}
const sh_actor_class rec_vic_class = VIC_CLASS("reclaim_victim", vic_init);
static const sh_actor_class target_class = VIC_CLASS("reclaim_target", target_init);
const sh_actor_class rec_live_class = VIC_CLASS("reclaim_live", live_init);
static const sh_actor_class gated_class = VIC_CLASS("reclaim_gated", gated_init);
static const sh_actor_class asked_class =
    VIC_CLASS("reclaim_asked", asked_init, .barrier = one_at_a_time);

/* A new actor of class c with a fresh id; the id in *id. */
const sh_addr *rec_spawn_new(world *wd, const sh_actor_class *c, uint32_t *id) {
  *id = atomic_fetch_add(&wd->next_id, 1) + 1;
  const sh_addr *a = NULL;
  int rc = sh_scn_spawn(wd->s, wd->sys, c, *id, 1, &a);
  SH_SCN_CHECK(wd->s, rc == 0, "sh_spawn: %d", rc);
  return a;
}
/* ---- stop_while_sending --------------------------------------------------------- */

/* A round before the refusal: a burst and an ask. */
static void send_burst(world *wd, drv *d, sh_stack *st, drv_locals *l) {
  for (uint32_t i = 0; i < BURST; i++)
    if (rec_notice_to(wd, wd->target, wd->target_id) != 0) d->refused = true;
  l->f = rec_ask_to(wd, st, wd->target, wd->target_id);
}

/* A round after it: a newcomer in a freed house takes its own message,
 * while the old address refuses everything, for good. Each newcomer
 * lives a round, the last one until the end. */
static void send_after(world *wd, drv *d, sh_stack *st, drv_locals *l) {
  uint32_t id;
  if (d->newcomer != NULL) sh_stop(d->newcomer);
  d->newcomer = rec_spawn_new(wd, d->after < AFTER ? &rec_vic_class : &rec_live_class, &id);
  rec_notice_to(wd, d->newcomer, id);
  rec_refused(wd, wd->target, wd->target_id, "a sender, after the refusal");
  l->f = rec_ask_to(wd, st, wd->target, wd->target_id);
  SH_SCN_CHECK(wd->s, l->f == NULL || sh_future_error(l->f) == -ESHUTDOWN,
               "an ask to a stopped actor: %d", l->f ? sh_future_error(l->f) : 0);
}

static sh_yield sender_notice(sh_actor *self, sh_stack *st) {
  world *wd = rec_world_of(self);
  drv *d = (drv *)self;
  drv_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    if (d->refused)
      send_after(wd, d, st, l);
    else
      send_burst(wd, d, st, l);
    return sh_suspend(st, 1);
  }
  if (l->f == NULL || !answered(wd, l->f, wd->target_id)) d->refused = true;
  bool more = ++d->rounds < MAX_ROUNDS && !(d->refused && ++d->after > AFTER);
  SH_SCN_CHECK(wd->s, d->rounds < MAX_ROUNDS, "the target never stopped");
  return sh_scn_round_end(st, more, &wd->left);
}

static const sh_actor_class sender_class = DRV_CLASS("reclaim_sender", sender_notice);

static int sending_setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  wd->s = s;
  wd->sys = sys;
  atomic_store(&wd->left, 2 * SENDERS + 1); /* senders, their last newcomers, this thread */
  wd->target = rec_spawn_new(wd, &target_class, &wd->target_id);
  int rc = sh_scn_spawn_each(s, sys, &sender_class, SENDERS,
                             SH_SCN_EACH_PINNED | SH_SCN_EACH_KICK, NULL);
  /* The outside thread's stream, until the target refuses: the workers get
   * the CPU between bursts, else the stream could outrun them all. */
  int sent_rc = 0;
  for (uint32_t i = 0; rc == 0 && sent_rc == 0 && i < MAX_STREAM; i++) {
    sent_rc = rec_notice_to(wd, wd->target, wd->target_id);
    if (i % BURST == 0) sh_yield_cpu();
  }
  SH_SCN_CHECK(s, rc != 0 || sent_rc == -ESHUTDOWN, "the stream's target never stopped");
  rec_refused(wd, wd->target, wd->target_id, "the outside thread, after the refusal");
  one_done(wd);
  return rc;
}

/* ---- stop_while_asked ----------------------------------------------------------- */

/* The lock holds every ask it gets until it is stopped: its first ask is a
 * barrier whose stack waits on an ask to the lock itself. */
typedef struct lock_actor { sh_actor base; bool locked; } lock_actor;

static bool lock_barrier(sh_actor *self, const sh_msg *m) {
  (void)m;
  return !((lock_actor *)self)->locked;
}
static sh_yield lock_ask(sh_actor *self, sh_stack *st) {
  drv_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) != SH_START) return sh_throw(st, sh_future_error(l->f));
  ((lock_actor *)self)->locked = true;
  l->f = sh_scn_ask_num(st, sh_self(self), 0, SH_FOREVER);
  return sh_suspend(st, 1);
}
static const sh_actor_class lock_class = {.name = "reclaim_lock", .size = sizeof(lock_actor),
    .locals_size = sizeof(drv_locals), .ask = lock_ask, .barrier = lock_barrier};

/* The last of the askers and the gate to see it stops the asked actor:
 * every ask sent to it, and it waits on the gate. */
static void stop_when_held(world *wd) {
  if (atomic_load(&wd->asked) == ASKERS && atomic_load(&wd->held) >= 1 &&
      !atomic_exchange(&wd->stop_sent, true))
    sh_stop(wd->target);
}

/* Answers an ask with the number it carries, once the lock is stopped;
 * stops the lock once the asked actor and every newcomer wait. */
static sh_yield gate_ask(sh_actor *self, sh_stack *st) {
  world *wd = rec_world_of(self);
  drv_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_scn_ask_num(st, wd->lock, 0, SH_FOREVER);
    uint32_t held = atomic_fetch_add(&wd->held, 1) + 1;
    if (held == 1) stop_when_held(wd);
    if (held == 1 + 2 * CHURN) sh_stop(wd->lock);
    return sh_suspend(st, 1);
  }
  SH_SCN_CHECK(wd->s, sh_future_error(l->f) == -ESHUTDOWN, "the lock answered");
  return sh_scn_answer(st, sh_stack_msg_as(st, sh_scn_num_ask)->v);
}
static const sh_actor_class gate_class = {.name = "reclaim_gate", .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(drv_locals), .init = sh_scn_actor_init, .ask = gate_ask};

static sh_yield asker_notice(sh_actor *self, sh_stack *st) {
  world *wd = rec_world_of(self);
  drv_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = rec_ask_to(wd, st, wd->target, wd->target_id);
    atomic_fetch_add(&wd->asked, 1);
    stop_when_held(wd);
    return sh_suspend(st, 1);
  }
  SH_SCN_CHECK(wd->s, l->f == NULL || !answered(wd, l->f, wd->target_id),
               "a stopped actor answered");
  one_done(wd);
  return sh_return(st, NULL);
}
static const sh_actor_class asker_class = DRV_CLASS("reclaim_asker", asker_notice);

/* Newcomers into the freed houses, each waiting on the gate. */
static sh_yield churn_notice(sh_actor *self, sh_stack *st) {
  world *wd = rec_world_of(self);
  for (uint32_t i = 0; i < CHURN; i++) {
    uint32_t id;
    const sh_addr *a = rec_spawn_new(wd, &gated_class, &id);
    rec_notice_to(wd, a, id);
  }
  return sh_return(st, NULL);
}
static const sh_actor_class churn_class = DRV_CLASS("reclaim_churn", churn_notice);

static int asked_setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  wd->s = s;
  wd->sys = sys;
  atomic_store(&wd->left, ASKERS + 2 * CHURN);
  int rc = sh_spawn_on(sys, &lock_class, NULL, 0, &wd->lock);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &gate_class, 0, 1, &wd->gate);
  if (rc == 0) rc = sh_scn_spawn_each(s, sys, &churn_class, 2, SH_SCN_EACH_PINNED, wd->churn);
  if (rc != 0) return rc;
  wd->target = rec_spawn_new(wd, &asked_class, &wd->target_id);
  return sh_scn_spawn_each(s, sys, &asker_class, ASKERS, SH_SCN_EACH_PINNED | SH_SCN_EACH_KICK,
                           NULL);
}

/* ---- invariants ------------------------------------------------------------------- */

/* Every message made was freed once; each one handled, once, after. */
void rec_verify_messages(sh_scn *s) {
  world *wd = sh_scn_state(s);
  SH_SCN_CHECK_EQ(s, atomic_load(&wd->freed), atomic_load(&wd->made), "messages freed");
  SH_SCN_CHECK_EQ(s, atomic_load(&wd->freed_handled), atomic_load(&wd->handled),
                  "handled messages freed");
}

static void sending_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  world *wd = sh_scn_state(s);
  rec_verify_messages(s);
  /* The handler that stopped it was its last. */
  SH_SCN_CHECK_EQ(s, atomic_load(&wd->seen_at_stop), STOP_AT, "messages the target took");
  SH_SCN_CHECK(s, atomic_load(&wd->refused) >= SENDERS * AFTER, "refusals: %u",
               atomic_load(&wd->refused));
}

static void asked_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  world *wd = sh_scn_state(s);
  rec_verify_messages(s);
  /* The askers' asks and its own failed; the gate's answer to it found
   * nobody (not the newcomer in its house); each newcomer got its own. The
   * lock may add one: stopped while it runs (the gate's asks keep it busy),
   * it gives up its self-ask before that ask's refusal comes back. */
  SH_SCN_CHECK_EQ(s, atomic_load(&wd->asks_failed), ASKERS + 1, "failed asks");
  SH_SCN_CHECK_EQ(s, atomic_load(&wd->asks_ok), 2 * CHURN, "answered asks");
  SH_SCN_CHECK(s, st->replies_unknown == 1 || st->replies_unknown == 2,
               "%llu replies nobody waited for", (unsigned long long)st->replies_unknown);
}

static const sh_scenario stop_while_sending = {
    .name = "stop_while_sending",
    .summary = "senders everywhere meet an actor that stops and whose house is reused",
    .workers = 2,
    .state_size = sizeof(world),
    .setup = sending_setup,
    .verify = sending_verify,
};
SH_SCENARIO(stop_while_sending);

static const sh_scenario stop_while_asked = {
    .name = "stop_while_asked",
    .summary = "an actor stopped with asks pending both ways; its house reused before the answer",
    .workers = 2,
    .state_size = sizeof(world),
    .setup = asked_setup,
    .verify = asked_verify,
};
SH_SCENARIO(stop_while_asked);

