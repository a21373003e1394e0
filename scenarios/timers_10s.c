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
 * through the idle time. Ten real seconds would be too long for the epoll
 * backend: there the same workload runs at a tenth of the ticks and of the
 * period (EPOLL_SCALE), about 125 ms.
 *
 * The public clocks keep time with the timers: at its sentinel an actor
 * reads sh_clock_ms at least the whole run's length after the start; in
 * the simulator the wall clock is the virtual one from 2026-01-01.
 */
#include <stdatomic.h>

#include <stackhouse/scenario.h>

#define ACTORS 100
#define PERIOD_MS 100u
#define TICKS 100
#define SENTINEL_MS 250u
#define EPOLL_SCALE 10

typedef struct world {
  int want;            /* ticks per actor: TICKS, or TICKS / EPOLL_SCALE on epoll */
  unsigned period_ms, sentinel_ms;
  int64_t start_ms; /* sh_clock_ms at setup */
  int ticks[ACTORS];
  int sentinels[ACTORS];
  atomic_uint left; /* actors yet to see their sentinel */
} world;

typedef struct periodic {
  sh_scn_actor a; /* a.id: its index in the world's arrays */
  uint64_t tick_id, sentinel_id;
} periodic;

static sh_yield periodic_notice(sh_actor *self, sh_stack *st) {
  periodic *p = (periodic *)self;
  const world *wd = sh_scn_state(p->a.s);
  int rc = sh_timer_start(self, wd->period_ms, wd->period_ms, NULL, &p->tick_id);
  SH_SCN_CHECK(p->a.s, rc == 0, "actor %u: periodic timer did not start: %d", p->a.id, rc);
  return sh_return(st, NULL);
}

static void on_tick(periodic *p, const world *wd, int *ticks) {
  if (++*ticks != wd->want) return;
  int rc = sh_timer_cancel(&p->a.base, p->tick_id);
  SH_SCN_CHECK(p->a.s, rc == 0, "actor %u: cancelling the periodic: %d", p->a.id, rc);
  rc = sh_timer_start(&p->a.base, wd->sentinel_ms, 0, NULL, &p->sentinel_id);
  SH_SCN_CHECK(p->a.s, rc == 0, "actor %u: sentinel did not start: %d", p->a.id, rc);
}

/* 2026-01-01 00:00:00 UTC in ms: the simulated wall clock's origin. */
#define SIM_EPOCH_MS 1767225600000LL

static void check_clocks(periodic *p, const world *wd) {
  int64_t now = sh_clock_ms(), wall = sh_time_ms();
  int64_t least = (int64_t)wd->want * wd->period_ms + wd->sentinel_ms;
  SH_SCN_CHECK(p->a.s, now - wd->start_ms >= least, "actor %u: sh_clock_ms %lld ms after the start, want >= %lld",
               p->a.id, (long long)(now - wd->start_ms), (long long)least);
  if (sh_scn_simulated(p->a.s))
    SH_SCN_CHECK(p->a.s, wall - now == SIM_EPOCH_MS, "actor %u: sh_time_ms %lld, sh_clock_ms %lld",
                 p->a.id, (long long)wall, (long long)now);
  else
    SH_SCN_CHECK(p->a.s, wall > SIM_EPOCH_MS, "actor %u: sh_time_ms %lld is before 2026", p->a.id,
                 (long long)wall);
}

static void periodic_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)arg;
  periodic *p = (periodic *)self;
  world *wd = sh_scn_state(p->a.s);
  int *ticks = &wd->ticks[p->a.id];
  if (id == p->tick_id) {
    SH_SCN_CHECK(p->a.s, *ticks < wd->want, "actor %u: a tick after the cancel", p->a.id);
    on_tick(p, wd, ticks);
    return;
  }
  SH_SCN_CHECK(p->a.s, id == p->sentinel_id && p->sentinel_id != 0, "actor %u: unknown timer %llu",
               p->a.id, (unsigned long long)id);
  SH_SCN_CHECK(p->a.s, *ticks == wd->want, "actor %u: %d ticks at the sentinel, want %d",
               p->a.id, *ticks, wd->want);
  check_clocks(p, wd);
  wd->sentinels[p->a.id]++;
  sh_scn_count_down(p->a.s, sh_actor_system(self), &wd->left);
}

static const sh_actor_class periodic_class = {
    .name = "periodic",
    .size = sizeof(periodic),
    .init = sh_scn_actor_init,
    .notice = periodic_notice,
    .timeout = periodic_timeout,
};

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  unsigned scale = sh_scn_simulated(s) ? 1 : EPOLL_SCALE;
  wd->want = TICKS / (int)scale;
  wd->period_ms = PERIOD_MS / scale;
  wd->sentinel_ms = SENTINEL_MS / scale;
  wd->start_ms = sh_clock_ms();
  atomic_store(&wd->left, ACTORS);
  return sh_scn_spawn_each(s, sys, &periodic_class, ACTORS, SH_SCN_EACH_KICK, NULL);
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  world *wd = sh_scn_state(s);
  long total = 0;
  for (uint32_t i = 0; i < ACTORS; i++) {
    total += wd->ticks[i];
    SH_SCN_CHECK(s, wd->ticks[i] == wd->want && wd->sentinels[i] == 1,
                 "actor %u: %d ticks (want %d), %d sentinels", i, wd->ticks[i], wd->want,
                 wd->sentinels[i]);
  }
  SH_SCN_CHECK(s, total == (long)ACTORS * wd->want, "%ld ticks in all, want %d", total,
               ACTORS * wd->want);
}

static const sh_scenario timers_10s = {
    .name = "timers_10s",
    .summary = "100 actors x 100 periodic ticks of 100 ms: ~10 s of virtual time (epoll: 1/10)",
    .workers = 2,
    .vtime_limit_ms = 30000,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(timers_10s);
