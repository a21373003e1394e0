/*
 * Gates of reclaimed houses: a bounded mailbox's gate keeps its memory
 * across the generations of its house, and is opened again for each spawn
 * of a bounded class into it. These scenarios fail while the gate of a
 * house can be found open, or reset, where it must not be.
 *
 *   reclaim_gate_undo   a spawn of a bounded class whose init fails gives
 *                       its house back; the next spawns of bounded classes
 *                       go on until they take that house again. The gate
 *                       opened for the failed spawn must not stay open:
 *                       the next spawn's reset finds it closed, or the
 *                       runtime stops on its check.
 *   reclaim_stop_reuse  an actor on worker 1 stops a bounded actor T on
 *                       worker 0 while T runs; T's stop hook asks a
 *                       spawner on worker 0 to spawn a bounded actor, which
 *                       takes T's house. The stopper, still refusing T's
 *                       waiters, must not find T's gates reset for the
 *                       newcomer. Found by the interleaving: sweep it with
 *                       --strategy pct.
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/scenario.h>

/* ---- reclaim_gate_undo ------------------------------------------------- */

#define UNDO_SPAWNS 200u /* more than a slab of houses: the failed one comes back */

typedef struct undo_world {
  const sh_addr *live[UNDO_SPAWNS];
} undo_world;

static int failing_init(sh_actor *self, void *arg) {
  (void)self;
  (void)arg;
  return -EINVAL;
}

static sh_yield quiet_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, NULL);
}

static const sh_actor_class undo_bad = {
    .name = "undo_bad",
    .size = sizeof(sh_actor),
    .init = failing_init,
    .notice = quiet_notice,
    .ask_capacity = 2,
    .notice_capacity = 2,
};

static const sh_actor_class undo_good = {
    .name = "undo_good",
    .size = sizeof(sh_actor),
    .notice = quiet_notice,
    .ask_capacity = 2,
    .notice_capacity = 2,
};

static int undo_setup(sh_scn *s, sh_system *sys) {
  undo_world *wd = sh_scn_state(s);
  const sh_addr *a = NULL;
  SH_SCN_CHECK(s, sh_spawn(sys, &undo_bad, NULL, 1, &a) == -EINVAL, "the failing init's spawn");
  for (uint32_t i = 0; i < UNDO_SPAWNS; i++)
    SH_SCN_CHECK(s, sh_spawn(sys, &undo_good, NULL, 1, &wd->live[i]) == 0, "spawn %u", i);
  for (uint32_t i = 0; i < UNDO_SPAWNS; i++)
    if (wd->live[i] != NULL) sh_stop(wd->live[i]);
  sh_scn_done(s, sys);
  return 0;
}

static const sh_scenario reclaim_gate_undo = {
    .name = "reclaim_gate_undo",
    .summary = "a bounded spawn whose init fails leaves no open gate in the house",
    .state_size = sizeof(undo_world),
    .setup = undo_setup,
};
SH_SCENARIO(reclaim_gate_undo);

/* ---- reclaim_stop_reuse ------------------------------------------------ */

#define T_SENDS 40u /* notices T sends while it runs: the stop lands meanwhile */

typedef struct reuse_world {
  sh_scn *s;
  sh_system *sys;
  const sh_addr *t, *spawner, *stopper, *sink, *child;
  atomic_uint stops;
} reuse_world;

static reuse_world *reuse_of(const sh_actor *self) { return sh_scn_state(sh_scn_of(self)); }

/* T: sends notices to the sink (each a scheduling point) until it stops. */
static sh_yield t_notice(sh_actor *self, sh_stack *st) {
  reuse_world *wd = reuse_of(self);
  for (uint32_t i = 0; i < T_SENDS; i++) sh_scn_kick(wd->sink);
  return sh_return(st, NULL);
}

static void t_stop(sh_actor *self) {
  reuse_world *wd = reuse_of(self);
  atomic_fetch_add(&wd->stops, 1);
  sh_scn_kick(wd->spawner);
}

static const sh_actor_class t_class = {
    .name = "reuse_t",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = t_notice,
    .stop = t_stop,
    .ask_capacity = 1,
    .notice_capacity = 64,
};

static const sh_actor_class child_class = {
    .name = "reuse_child",
    .size = sizeof(sh_actor),
    .notice = quiet_notice,
    .ask_capacity = 1,
    .notice_capacity = 1,
};

/* The spawner, on T's worker: once T stopped, a bounded child takes the
 * first free house of that worker (T's, once retired), then all ends. */
static sh_yield spawner_notice(sh_actor *self, sh_stack *st) {
  reuse_world *wd = reuse_of(self);
  SH_SCN_CHECK(wd->s, sh_spawn(wd->sys, &child_class, NULL, 1, &wd->child) == 0, "child spawn");
  if (wd->child != NULL) sh_stop(wd->child);
  sh_scn_done(wd->s, wd->sys);
  return sh_return(st, NULL);
}

static const sh_actor_class spawner_class = {
    .name = "reuse_spawner",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = spawner_notice,
};

static sh_yield stopper_notice(sh_actor *self, sh_stack *st) {
  sh_stop(reuse_of(self)->t);
  return sh_return(st, NULL);
}

static const sh_actor_class stopper_class = {
    .name = "reuse_stopper",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = stopper_notice,
};

static const sh_actor_class sink_class = {
    .name = "reuse_sink",
    .size = sizeof(sh_actor),
    .notice = quiet_notice,
};

static int reuse_setup(sh_scn *s, sh_system *sys) {
  reuse_world *wd = sh_scn_state(s);
  wd->s = s;
  wd->sys = sys;
  int rc = sh_scn_spawn_on(s, sys, &t_class, 0, 0, &wd->t);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &spawner_class, 1, 0, &wd->spawner);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &stopper_class, 2, 1, &wd->stopper);
  if (rc == 0) rc = sh_spawn_on(sys, &sink_class, NULL, 1, &wd->sink);
  if (rc == 0) rc = sh_scn_kick(wd->t);
  if (rc == 0) rc = sh_scn_kick(wd->stopper);
  return rc;
}

static void reuse_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  reuse_world *wd = sh_scn_state(s);
  SH_SCN_CHECK_EQ(s, atomic_load(&wd->stops), 1, "stops of T");
}

static const sh_scenario reclaim_stop_reuse = {
    .name = "reclaim_stop_reuse",
    .summary = "a stop still refusing waiters never meets its gates reset for a newcomer",
    .state_size = sizeof(reuse_world),
    .setup = reuse_setup,
    .verify = reuse_verify,
};
SH_SCENARIO(reclaim_stop_reuse);
