/*
 * stop_replace: bounded actors stopped and replaced while senders on other
 * workers keep sending to them, waiting for room and not.
 *
 * A line of victims V0..V(VICTIMS-1), one at a time, pinned on worker 0:
 * each handles STOP_AT messages and stops itself in the last handler; its
 * stop hook kicks a spawner on worker 0, which spawns the next victim (it
 * takes the house the last one leaves, once that one is retired) and makes
 * it the current one. Victims come in three kinds, in turn: an unbounded
 * one; a bounded one (capacity 1 both ways); and a bounded one whose notice
 * mailbox the spawner fills at once, so that a sender that comes late finds
 * it full. Senders on the other workers run rounds: each round reads the
 * current victim and sends it a notice, a put (waiting for room) and an
 * ask (waiting for room), each naming the victim it is meant for, and
 * waits for the put and the ask. Sends race with the victim's stop, its
 * retirement and the spawn of its successor into the same house.
 *
 * Invariants, beyond the shared ones:
 *   - a victim only ever handles messages meant for it: a message sent to
 *     an earlier actor in its house is refused, never handled;
 *   - an ask is answered by the victim it names, or fails with -ESHUTDOWN;
 *     a put completes with 0 or -ESHUTDOWN; a notice gets 0 or -ESHUTDOWN;
 *   - a round begun after its victim's stop hook ran sees every send fail
 *     at once with -ESHUTDOWN (sh_stop);
 *   - every put and ask ends: a sender waiting at a gate the stop closed is
 *     refused, not left queued (else the run ends in a deadlock);
 *   - every message made is freed once.
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/scenario.h>

#define VICTIMS 40u
#define STOP_AT 2u      /* messages a victim handles before it stops itself */
#define SENDERS 4u
/* Rounds per sender: a bound, never reached. High: a sender whose victim
 * stopped spins through rounds of refusals until the spawner's next
 * victim, and on threads the spawner's worker may be descheduled. */
#define MAX_ROUNDS 10000000u

typedef struct sr_world {
  sh_scn *s;
  sh_system *sys;
  const sh_addr *spawner;
  const sh_addr *victim[VICTIMS];
  atomic_uint current;          /* the victim senders send to */
  atomic_bool stopped[VICTIMS]; /* its stop hook ran */
  atomic_bool finished;         /* the last victim stopped */
  atomic_uint left;             /* senders still running */
  atomic_uint made, freed, handled, refused, answered;
} sr_world;

static sr_world *world_of(const sh_actor *self) { return sh_scn_state(sh_scn_of(self)); }

/* ---- messages: each names the victim it is meant for ----------------------- */

typedef struct sr_note {
  sh_msg hdr;
  sr_world *wd;
  uint32_t to;
} sr_note;
typedef sr_note sr_ask;

static void sr_drop(sh_msg *m) { atomic_fetch_add(&((sr_note *)m)->wd->freed, 1); }
static SH_MSG_DEFINE_DROP(sr_note, SH_NOTICE, 0, sr_drop);
static SH_MSG_DEFINE_DROP(sr_ask, SH_ASK, 0, sr_drop);

static sh_msg *sr_new(sr_world *wd, const sh_msg_type *t, uint32_t to) {
  sr_note *m = (sr_note *)sh_msg_alloc(t);
  if (m == NULL) return NULL;
  m->wd = wd;
  m->to = to;
  atomic_fetch_add(&wd->made, 1);
  return &m->hdr;
}

/* ---- victims ----------------------------------------------------------------- */

typedef struct victim {
  sh_scn_actor base;
  uint32_t seen;
} victim;

/* The message is for this victim; the last one it handles stops it. */
static void victim_take(sh_actor *self, sh_stack *st) {
  sr_world *wd = world_of(self);
  const sr_note *m = (const sr_note *)sh_stack_msg(st);
  SH_SCN_CHECK(wd->s, m->to == sh_scn_id(self), "victim %u handled a message for victim %u",
               sh_scn_id(self), m->to);
  atomic_fetch_add(&wd->handled, 1);
  if (++((victim *)self)->seen == STOP_AT) sh_stop(sh_self(self));
}

static sh_yield victim_notice(sh_actor *self, sh_stack *st) {
  victim_take(self, st);
  return sh_return(st, NULL);
}

static sh_yield victim_ask(sh_actor *self, sh_stack *st) {
  victim_take(self, st);
  return sh_scn_answer(st, sh_scn_id(self));
}

static void victim_stop(sh_actor *self) {
  sr_world *wd = world_of(self);
  atomic_store(&wd->stopped[sh_scn_id(self)], true);
  int rc = sh_scn_kick(wd->spawner);
  SH_SCN_CHECK(wd->s, rc == 0, "kick of the spawner: %d", rc);
}

#define VICTIM_CLASS(name_, cap_)                                                       \
  {                                                                                     \
    .name = name_, .size = sizeof(victim), .init = sh_scn_actor_init,                   \
    .notice = victim_notice, .ask = victim_ask, .stop = victim_stop,                    \
    .ask_capacity = cap_, .notice_capacity = cap_,                                      \
  }
static const sh_actor_class victim_classes[] = {
    VICTIM_CLASS("sr_victim", 0),
    VICTIM_CLASS("sr_victim_bounded", 1),
    VICTIM_CLASS("sr_victim_full", 1),
};
#define KINDS (sizeof(victim_classes) / sizeof(victim_classes[0]))

/* ---- the spawner: the next victim, into the house the last one left ------- */

static void spawn_victim(sr_world *wd, uint32_t k) {
  int rc = sh_scn_spawn_on(wd->s, wd->sys, &victim_classes[k % KINDS], k, 0, &wd->victim[k]);
  if (!SH_SCN_CHECK(wd->s, rc == 0, "spawn of victim %u: %d", k, rc)) return;
  /* A full notice mailbox from its first instant: a sender that passed the
   * last victim's checks and comes late must wait for room here. Already
   * full only when such a sender took the slot first. */
  if (k % KINDS == 2) {
    sh_msg *m = sr_new(wd, &sr_note_type, k);
    rc = sh_notice_try(wd->victim[k], m);
    SH_SCN_CHECK(wd->s, rc == 0 || rc == -EAGAIN, "the fill of victim %u: %d", k, rc);
    if (rc != 0) sh_msg_free(m);
  }
  atomic_store(&wd->current, k);
}

static sh_yield spawner_notice(sh_actor *self, sh_stack *st) {
  sr_world *wd = world_of(self);
  uint32_t next = atomic_load(&wd->current) + 1;
  if (next < VICTIMS)
    spawn_victim(wd, next);
  else
    atomic_store(&wd->finished, true);
  return sh_return(st, NULL);
}

static const sh_actor_class spawner_class = {
    .name = "sr_spawner",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = spawner_notice,
};

/* ---- senders ------------------------------------------------------------------ */

typedef struct sender {
  sh_scn_actor base;
  uint32_t rounds;
} sender;

typedef struct round_locals {
  uint32_t to;
  bool late; /* the victim's stop hook had run when the round began */
  sh_future *put, *ask;
} round_locals;

enum { ROUND_WAIT = 1 };

/* A send's result: 0 or -ESHUTDOWN; only -ESHUTDOWN for a round begun
 * late (that it came at once, round_start checks). */
static void check_send(sr_world *wd, const round_locals *l, int rc, const char *what) {
  SH_SCN_CHECK(wd->s, rc == 0 || rc == -ESHUTDOWN, "%s to victim %u: %d", what, l->to, rc);
  if (rc == -ESHUTDOWN) atomic_fetch_add(&wd->refused, 1);
  if (l->late)
    SH_SCN_CHECK(wd->s, rc == -ESHUTDOWN, "%s to victim %u, stopped before: %d, want %d", what,
                 l->to, rc, -ESHUTDOWN);
}

/* The sends of a round; the put and the ask are waited for. */
static void round_start(sr_world *wd, sh_stack *st, round_locals *l) {
  l->to = atomic_load(&wd->current);
  l->late = atomic_load(&wd->stopped[l->to]);
  const sh_addr *to = wd->victim[l->to];
  /* A notice does not wait for room: a full mailbox refuses it. */
  int rc = sh_notice(to, sr_new(wd, &sr_note_type, l->to));
  if (rc != -EAGAIN || l->late) check_send(wd, l, rc, "a notice");
  l->put = sh_put(st, to, sr_new(wd, &sr_note_type, l->to), SH_FOREVER);
  l->ask = sh_ask(st, to, sr_new(wd, &sr_ask_type, l->to), SH_FOREVER);
  SH_SCN_CHECK(wd->s, l->put != NULL && l->ask != NULL, "a put or an ask not made");
  if (l->late && l->put != NULL && l->ask != NULL)
    SH_SCN_CHECK(wd->s, sh_future_done(l->put) && sh_future_done(l->ask),
                 "a put or an ask to victim %u, stopped before, waits", l->to);
}

static void round_end(sr_world *wd, round_locals *l) {
  if (l->put != NULL) check_send(wd, l, sh_future_error(l->put), "a put");
  if (l->ask == NULL) return;
  uint64_t v = 0;
  if (sh_scn_num_of(l->ask, &v)) {
    SH_SCN_CHECK(wd->s, v == l->to, "an ask to victim %u answered by victim %llu", l->to,
                 (unsigned long long)v);
    SH_SCN_CHECK(wd->s, !l->late, "an ask to victim %u, stopped before, answered", l->to);
    atomic_fetch_add(&wd->answered, 1);
    return;
  }
  check_send(wd, l, sh_future_error(l->ask), "an ask");
}

static sh_yield sender_notice(sh_actor *self, sh_stack *st) {
  sr_world *wd = world_of(self);
  round_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    round_start(wd, st, l);
    return sh_suspend(st, ROUND_WAIT);
  }
  round_end(wd, l);
  bool more = !atomic_load(&wd->finished) && ++((sender *)self)->rounds < MAX_ROUNDS;
  SH_SCN_CHECK(wd->s, more || atomic_load(&wd->finished), "a sender ran out of rounds");
  return sh_scn_round_end(st, more, &wd->left);
}

static const sh_actor_class sender_class = {
    .name = "sr_sender",
    .size = sizeof(sender),
    .locals_size = sizeof(round_locals),
    .init = sh_scn_actor_init,
    .notice = sender_notice,
};

/* ---- the run ------------------------------------------------------------------ */

static int sr_setup(sh_scn *s, sh_system *sys) {
  sr_world *wd = sh_scn_state(s);
  wd->s = s;
  wd->sys = sys;
  uint32_t workers = sh_scn_workers(s);
  atomic_store(&wd->left, SENDERS);
  SH_SCN_CHECK(s, sh_scn_spawn_on(s, sys, &spawner_class, 0, 0, &wd->spawner) == 0, "spawner");
  spawn_victim(wd, 0);
  for (uint32_t i = 0; i < SENDERS; i++) {
    const sh_addr *a = NULL;
    /* Away from the victims' worker, so that sends race with their runs. */
    uint32_t on = workers > 1 ? 1 + i % (workers - 1) : 0;
    if (!SH_SCN_CHECK(s, sh_scn_spawn_on(s, sys, &sender_class, i, on, &a) == 0, "sender %u", i))
      return -1;
    SH_SCN_CHECK(s, sh_scn_kick(a) == 0, "kick of sender %u", i);
  }
  return 0;
}

static void sr_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  sr_world *wd = sh_scn_state(s);
  if (sh_scn_faulty(s)) return;
  SH_SCN_CHECK(s, atomic_load(&wd->finished), "the last victim never stopped");
  SH_SCN_CHECK_EQ(s, atomic_load(&wd->handled), VICTIMS * STOP_AT, "messages handled");
  SH_SCN_CHECK_EQ(s, atomic_load(&wd->freed), atomic_load(&wd->made), "messages freed");
}

static const sh_scenario stop_replace = {
    .name = "stop_replace",
    .summary = "bounded actors stopped and replaced in their house while others send and wait",
    .flags = SH_SCN_NO_FAULTS,
    .state_size = sizeof(sr_world),
    .setup = sr_setup,
    .verify = sr_verify,
};
SH_SCENARIO(stop_replace);
