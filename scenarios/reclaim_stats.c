/*
 * reclaim_stats_reuse: the figures of a reclaimed actor's address. A
 * driver spawns and stops actors in rounds (the next round begins once the
 * last of this one stopped), so that later ones live in the houses of
 * earlier ones; the classes alternate between two notice capacities (a
 * house is taken again 63 spawns later here: an odd distance). Each
 * actor, in its stop hook (stopped, not yet reclaimed), reads the notice
 * mailbox figures of every address made before its own: an address must
 * report its own actor's mailbox (its class's capacity) or -ESHUTDOWN,
 * never the mailbox of a newer actor living in its house.
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/scenario.h>

#define CYCLES 296u /* a multiple of STEP */
#define STEP 8u

typedef struct stats_world {
  sh_scn *s;
  sh_system *sys;
  const sh_addr *driver;
  const sh_addr *old[CYCLES];
  uint32_t cap[CYCLES];
  atomic_uint made;
  atomic_uint wrong, checked, stopped;
} stats_world;

static stats_world *stats_of(const sh_actor *self) { return sh_scn_state(sh_scn_of(self)); }

static sh_yield victim_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, NULL);
}

static void victim_stop(sh_actor *self) {
  stats_world *wd = stats_of(self);
  uint32_t n = atomic_load(&wd->made);
  for (uint32_t j = 0; j < n; j++) {
    if (j == sh_scn_id(self)) continue;
    sh_mailbox_stats ms;
    int rc = sh_mailbox_stats_get(wd->old[j], 0, SH_NOTICE, &ms);
    atomic_fetch_add(&wd->checked, 1);
    if (rc == 0 && ms.capacity != wd->cap[j]) atomic_fetch_add(&wd->wrong, 1);
  }
  /* The round's last stop starts the next round, which then finds the
   * houses of this one reclaimed. */
  if ((atomic_fetch_add(&wd->stopped, 1) + 1) % STEP == 0) sh_scn_kick(wd->driver);
}

#define VICTIM(nm, capacity)                                                                   \
  {.name = nm, .size = sizeof(sh_scn_actor), .init = sh_scn_actor_init,                       \
   .notice = victim_notice, .stop = victim_stop, .notice_capacity = capacity}
static const sh_actor_class victims[2] = {VICTIM("stats_victim3", 3), VICTIM("stats_victim5", 5)};

/* One round: STEP actors spawned and stopped at once. */
static sh_yield driver_notice(sh_actor *self, sh_stack *st) {
  stats_world *wd = stats_of(self);
  uint32_t base = atomic_load(&wd->made);
  for (uint32_t i = base; i < base + STEP && i < CYCLES; i++) {
    const sh_actor_class *c = &victims[i % 2];
    const sh_addr *a = NULL;
    if (!SH_SCN_CHECK(wd->s, sh_scn_spawn(wd->s, wd->sys, c, i, 1, &a) == 0, "spawn %u", i))
      break;
    wd->old[i] = a;
    wd->cap[i] = c->notice_capacity;
    atomic_store(&wd->made, i + 1); /* after old[i]: a stop hook reads it */
    sh_stop(a);
  }
  if (atomic_load(&wd->made) >= CYCLES) sh_scn_done(wd->s, wd->sys);
  return sh_return(st, NULL);
}

static const sh_actor_class driver_class = {
    .name = "stats_driver",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = driver_notice,
};

static int stats_setup(sh_scn *s, sh_system *sys) {
  stats_world *wd = sh_scn_state(s);
  wd->s = s;
  wd->sys = sys;
  int rc = sh_scn_spawn_on(s, sys, &driver_class, 0, 0, &wd->driver);
  return rc == 0 ? sh_scn_kick(wd->driver) : rc;
}

static void stats_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  stats_world *wd = sh_scn_state(s);
  SH_SCN_CHECK(s, atomic_load(&wd->checked) > 0, "no figures read");
  SH_SCN_CHECK_EQ(s, atomic_load(&wd->wrong), 0, "addresses that reported a newer actor's mailbox");
}

static const sh_scenario reclaim_stats_reuse = {
    .name = "reclaim_stats_reuse",
    .summary = "an old address never reports the mailbox of a newer actor in its house",
    .workers = 1,
    .state_size = sizeof(stats_world),
    .setup = stats_setup,
    .verify = stats_verify,
};
SH_SCENARIO(reclaim_stats_reuse);
