/*
 * Reclaimed actors (reclaim.c has the others):
 *
 *   address_reuse       two drivers spawn and stop 300 actors each (houses
 *                       come in slabs of 64: they are reused), sending to
 *                       random old addresses on the way and to every one
 *                       of them at the end, with actors living in their
 *                       houses.
 *
 * Every message names the actor it is meant for (reclaim.h); the handler
 * checks it is its own and was not handled before, and the drop hook
 * counts every free. Invariants, beyond the shared ones: no message
 * reached another actor or was handled twice, every message made was freed
 * exactly once, and one refusal per cycle and per old address at the end.
 */
#include <stdatomic.h>

#include <stackhouse/probe.h>

#include <stackhouse/scenario.h>

#include "reclaim.h"

/* ---- address_reuse -------------------------------------------------------------- */

/* Spawn, send, stop; a send to an older address on the way. */
static void reuse_step(world *wd, drv *d, uint32_t base) {
  for (uint32_t i = 0; i < STEP && d->cycles < CYCLES; i++, d->cycles++) {
    uint32_t id, k = base + d->cycles;
    wd->old[k] = rec_spawn_new(wd, &rec_vic_class, &id);
    wd->old_id[k] = id;
    rec_notice_to(wd, wd->old[k], id);
    sh_stop(wd->old[k]);
    k = base + (uint32_t)(sh_scn_rand(wd->s) % (d->cycles + 1));
    rec_refused(wd, wd->old[k], wd->old_id[k], "a reuse driver, on the way");
  }
}

/* Actors live in the reused houses; every old address refuses. */
static void reuse_end(world *wd, sh_stack *st, uint32_t base) {
  for (uint32_t i = 0; i < LIVE; i++) {
    uint32_t id;
    const sh_addr *a = rec_spawn_new(wd, &rec_live_class, &id);
    rec_notice_to(wd, a, id);
  }
  for (uint32_t k = base; k < base + CYCLES; k++) {
    rec_refused(wd, wd->old[k], wd->old_id[k], "a reuse driver, at the end");
    if (k % 8 != 0) continue;
    sh_future *f = rec_ask_to(wd, st, wd->old[k], wd->old_id[k]);
    SH_SCN_CHECK(wd->s, f == NULL || sh_future_error(f) == -ESHUTDOWN,
                 "an ask to an old address: %d", f ? sh_future_error(f) : 0);
  }
}

static sh_yield reuse_notice(sh_actor *self, sh_stack *st) {
  world *wd = rec_world_of(self);
  drv *d = (drv *)self;
  uint32_t base = sh_scn_id(self) * CYCLES;
  reuse_step(wd, d, base);
  if (d->cycles == CYCLES) reuse_end(wd, st, base);
  return sh_scn_round_end(st, d->cycles < CYCLES, &wd->left);
}
static const sh_actor_class reuse_class = DRV_CLASS("reclaim_reuse", reuse_notice);

static int reuse_setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  wd->s = s;
  wd->sys = sys;
  atomic_store(&wd->left, 2 + 2 * LIVE);
  return sh_scn_spawn_each(s, sys, &reuse_class, 2, SH_SCN_EACH_PINNED | SH_SCN_EACH_KICK,
                           NULL);
}

/* ---- invariants ------------------------------------------------------------------- */

static void reuse_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  world *wd = sh_scn_state(s);
  rec_verify_messages(s);
  /* One refusal per cycle, and one per old address at the end. */
  SH_SCN_CHECK_EQ(s, atomic_load(&wd->refused), 2 * 2 * CYCLES, "refused sends");
}

static const sh_scenario address_reuse = {
    .name = "address_reuse",
    .summary = "600 spawns and stops; every old address refuses, live actors get only theirs",
    .workers = 2,
    .state_size = sizeof(world),
    .setup = reuse_setup,
    .verify = reuse_verify,
};
SH_SCENARIO(address_reuse);
