/*
 * test_race: a hidden test scenario with a real interleaving bug, for the
 * shrinker and its tests. Actors on every worker share a lazily made
 * "config" without a lock: check it is missing, make it, publish it. Between
 * the check and the publish there is a scheduling point, as there is in real
 * code wherever the thread can be preempted; if another worker's actor
 * checks in that window, the config is made twice and the run fails
 * (FAIL:invariant). Whether that happens depends on the schedule alone: under
 * `none` it never does, under `random` on some seeds, and `shsim shrink` cuts
 * a failing seed's schedule down to the few preemptions (1 to 9 on seeds
 * 1..20) that line the two workers up on the window.
 *
 * Simulator only (on epoll the window is real but tiny and the scheduling
 * point does nothing), hidden: it is meant to fail.
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/probe.h>

#include <stackhouse/scenario.h>

#define RACE_ROUNDS 8

typedef struct race_world {
  atomic_int made;       /* configs made in this round */
  atomic_bool published; /* this round's config exists */
  atomic_uint arrived;   /* actors done with this round */
  uint32_t nactors;
  uint32_t round; /* written by the actor that closes a round, before the kicks */
  const sh_addr *actors[64];
} race_world;

/* The bug: check, then make, then publish, with no lock. relaxed loads and
 * stores: the race is in the logic, not in the memory model. */
static void get_config(race_world *wd) {
  if (atomic_load_explicit(&wd->published, memory_order_relaxed)) return;
  sh_yield_point("test_race.window");
  atomic_fetch_add_explicit(&wd->made, 1, memory_order_relaxed);
  atomic_store_explicit(&wd->published, true, memory_order_relaxed);
}

static int kick_all(race_world *wd) {
  int rc = 0;
  for (uint32_t i = 0; i < wd->nactors && rc == 0; i++) rc = sh_scn_kick(wd->actors[i]);
  return rc;
}

/* Each round every actor gets the config once; the last to arrive checks
 * the round, resets it and kicks everyone for the next one. */
static sh_yield racer_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  race_world *wd = sh_scn_state(s);
  get_config(wd);
  if (atomic_fetch_add_explicit(&wd->arrived, 1, memory_order_acq_rel) + 1 < wd->nactors)
    return sh_return(st, NULL);
  int made = atomic_load_explicit(&wd->made, memory_order_relaxed);
  SH_SCN_CHECK(s, made == 1, "round %u: the config was made %d times", wd->round, made);
  if (++wd->round == RACE_ROUNDS || made != 1) {
    sh_scn_done(s, sh_actor_system(self));
    return sh_return(st, NULL);
  }
  atomic_store_explicit(&wd->made, 0, memory_order_relaxed);
  atomic_store_explicit(&wd->published, false, memory_order_relaxed);
  atomic_store_explicit(&wd->arrived, 0, memory_order_relaxed);
  SH_SCN_CHECK(s, kick_all(wd) == 0, "round %u: a kick failed", wd->round);
  return sh_return(st, NULL);
}

static const sh_actor_class racer_class = {
    .name = "racer",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = racer_notice,
};

/* One racer per worker, all kicked for the first round. */
static int race_setup(sh_scn *s, sh_system *sys) {
  race_world *wd = sh_scn_state(s);
  wd->nactors = sh_scn_workers(s);
  if (wd->nactors > 64) return -EINVAL;
  int rc = sh_scn_spawn_each(s, sys, &racer_class, wd->nactors, SH_SCN_EACH_PINNED, wd->actors);
  return rc == 0 ? kick_all(wd) : rc;
}

static const sh_scenario test_race = {
    .name = "test_race",
    .summary = "must fail on some seeds: a config made lazily by actors on two workers, no lock",
    .workers = 2,
    /* No `expect`: it fails on some seeds only. */
    .flags = SH_SCN_HIDDEN | SH_SCN_SIM_ONLY,
    .state_size = sizeof(race_world),
    .setup = race_setup,
};
SH_SCENARIO(test_race);
