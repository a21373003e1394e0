/*
 * timers_10s: about ten seconds of timers, for the simulator's clock.
 *
 * ACTORS actors each run a periodic timer every PERIOD_MS, first after
 * PERIOD_MS; each cancels its timer at its TICKS-th tick and starts a
 * sentinel one-shot SENTINEL_MS later, at which it must still have seen
 * exactly TICKS ticks. A tick is never early and each period counts from the
 * tick before, so the run lasts at least TICKS * PERIOD_MS = 10 s of
 * (virtual) time while the workers sleep nearly all of it: the simulator
 * must jump its clock from one timer to the next instead of stepping
 * through the idle time. Ten real seconds on the epoll backend: simulator
 * only.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "scenario.h"

#define ACTORS 100
#define PERIOD_MS 100u
#define TICKS 100
#define SENTINEL_MS 250u

typedef struct world {
  int ticks[ACTORS];
  int sentinels[ACTORS];
  atomic_uint finished;
} world;

typedef struct periodic {
  sh_actor base;
  sh_scn *s;
  uint32_t index;
  uint64_t tick_id, sentinel_id;
} periodic;

typedef struct p10_go {
  sh_msg hdr;
  uint32_t index;
} p10_go;
static SH_MSG_DEFINE(p10_go, SH_NOTICE, 0);

static int periodic_init(sh_actor *self, void *arg) {
  ((periodic *)self)->s = arg;
  return 0;
}

static sh_yield periodic_notice(sh_actor *self, sh_stack *st) {
  periodic *p = (periodic *)self;
  p->index = sh_stack_msg_as(st, p10_go)->index;
  int rc = sh_timer_start(self, PERIOD_MS, PERIOD_MS, NULL, &p->tick_id);
  SH_SCN_CHECK(p->s, rc == 0, "actor %u: periodic timer did not start: %d", p->index, rc);
  return sh_return(st, NULL);
}

static void on_tick(periodic *p, int *ticks) {
  if (++*ticks != TICKS) return;
  int rc = sh_timer_cancel(&p->base, p->tick_id);
  SH_SCN_CHECK(p->s, rc == 0, "actor %u: cancelling the periodic: %d", p->index, rc);
  rc = sh_timer_start(&p->base, SENTINEL_MS, 0, NULL, &p->sentinel_id);
  SH_SCN_CHECK(p->s, rc == 0, "actor %u: sentinel did not start: %d", p->index, rc);
}

static void periodic_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)arg;
  periodic *p = (periodic *)self;
  world *wd = sh_scn_state(p->s);
  int *ticks = &wd->ticks[p->index];
  if (id == p->tick_id) {
    SH_SCN_CHECK(p->s, *ticks < TICKS, "actor %u: a tick after the cancel", p->index);
    on_tick(p, ticks);
    return;
  }
  SH_SCN_CHECK(p->s, id == p->sentinel_id && p->sentinel_id != 0, "actor %u: unknown timer %llu",
               p->index, (unsigned long long)id);
  SH_SCN_CHECK(p->s, *ticks == TICKS, "actor %u: %d ticks at the sentinel, want %d", p->index,
               *ticks, TICKS);
  wd->sentinels[p->index]++;
  /* acq_rel: the last actor sees every other actor's counts. */
  if (atomic_fetch_add_explicit(&wd->finished, 1, memory_order_acq_rel) + 1 == ACTORS)
    sh_scn_done(p->s, sh_actor_system(self));
}

static const sh_actor_class periodic_class = {
    .name = "periodic",
    .size = sizeof(periodic),
    .init = periodic_init,
    .notice = periodic_notice,
    .timeout = periodic_timeout,
};

static int setup(sh_scn *s, sh_system *sys) {
  int rc = 0;
  for (uint32_t i = 0; i < ACTORS && rc == 0; i++) {
    const sh_addr *a;
    rc = sh_spawn(sys, &periodic_class, s, 1, &a);
    p10_go *g = rc == 0 ? sh_msg_new(p10_go, .index = i) : NULL;
    if (rc == 0) rc = g != NULL ? sh_notice(a, &g->hdr) : -ENOMEM;
  }
  return rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  world *wd = sh_scn_state(s);
  long total = 0;
  for (uint32_t i = 0; i < ACTORS; i++) {
    total += wd->ticks[i];
    SH_SCN_CHECK(s, wd->ticks[i] == TICKS && wd->sentinels[i] == 1,
                 "actor %u: %d ticks (want %d), %d sentinels", i, wd->ticks[i], TICKS,
                 wd->sentinels[i]);
  }
  SH_SCN_CHECK(s, total == (long)ACTORS * TICKS, "%ld ticks in all, want %d", total,
               ACTORS * TICKS);
}

static const sh_scenario timers_10s = {
    .name = "timers_10s",
    .summary = "100 actors x 100 periodic ticks of 100 ms: ~10 s of virtual time",
    .workers = 2,
    .vtime_limit_ms = 30000,
    .flags = SH_SCN_SIM_ONLY,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(timers_10s);
