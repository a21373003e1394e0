/*
 * The idle check (scnidle.h): the runtime promises that an idle program
 * uses no CPU (README: workers "sleep on epoll when there is nothing to
 * do"). A worker woken again and again for nothing (a pool whose spare-slab
 * count never returns to zero, so that its trim deadline keeps coming due;
 * a park whose deadline is always now; a wake re-armed forever) passes every
 * workload and shows only once the program has nothing to do. So, in the
 * simulator, where idle time costs almost nothing (when every fiber sleeps
 * the clock jumps), the framework lets each run's system sit after its
 * workload and counts what the workers do, from sh_system_stats (parks,
 * runs, messages, wake signals) and the simulator's steps.
 *
 * The rule, over virtual time after the workload ended (sh_system_wait
 * returned), before the shutdown:
 *   1. Settling, 111 ms (chunks of 1, 10 and 100 ms): what was in flight
 *      finishes; nothing is checked.
 *   2. Then chunks of a second (or of 1/512 of the stretch, if longer),
 *      read one at a time. A chunk in which a house ran, a message was sent
 *      or delivered, or a wake signal was sent ends the check with no
 *      verdict: the system is not idle (a periodic timer, a late reply, a
 *      thread still at work, a connection), and nothing is claimed.
 *   3. The drain, IDLE_HORIZON_NS plus the pool's pool_idle_ns: workers may
 *      still wake without work, for timers the workload left (a cancelled
 *      timer of another worker's wheel is freed when it comes due, and a
 *      wheel stops at cascade points before an expiry: wheel.h) and for
 *      each pool's trim, which comes pool_idle_ns after a class was last
 *      touched and gives back every spare slab (pool.c), after which
 *      nothing is trimmable. A cost guard only (no clean run comes near
 *      it): at most IDLE_DRAIN_PARKS parks per worker.
 *   4. The tail, IDLE_TAIL_NS: by now every timer a scenario arms for
 *      after its workload has come due (none reaches past the horizon) and
 *      every trim is done, so a parked worker has no deadline (loop.c,
 *      park) and sleeps for good. At most IDLE_TAIL_PARKS parks per
 *      worker: a timer armed past the whole stretch may still stop its
 *      wheel at a cascade point, and the wheel's upper levels stop 4 s and
 *      262 s apart (64^2 and 64^3 ticks of 1 ms), so one worker sees at
 *      most one stop of each in 60 s.
 *   In 3 and 4, steps must be explained by parks: at most
 *   (parks + workers) * steps_per_park (a turn, the idle poll of spin_ns
 *   at the simulator's smallest step, 100 ns, and the park), so that a
 *   worker that spins without ever parking fails too.
 * A run stays deterministic (the stretch is a function of the run), and
 * its virtual-time limit moves with the stretch (sim.h, sh_sim_idle).
 */
#include "scnidle.h"

#include <assert.h>
#include <stdio.h>

#include <stackhouse/system.h>
#ifdef SH_SIM
#include <stackhouse/sim.h>
#endif

#define IDLE_MS_NS 1000000ull
#define IDLE_S_NS (1000 * IDLE_MS_NS)
#define IDLE_SETTLE_CHUNKS 3
/* Every timer a scenario arms for after its workload comes due within
 * this: the longest are ask timeouts and sleeps of a few seconds (a
 * "never" answer of 600 s keeps a run active, and ends the check, once
 * the request it answers times out). */
#define IDLE_HORIZON_NS (120 * IDLE_S_NS)
#define IDLE_TAIL_NS (60 * IDLE_S_NS)
#define IDLE_MAX_CHUNKS 512
#define IDLE_DRAIN_PARKS 1024
#define IDLE_TAIL_PARKS 2
/* Steps of a turn that finds nothing, its steal and its park, besides the
 * idle poll's (measured: about 30 in all with the default spin). */
#define IDLE_TURN_STEPS 256

#ifdef SH_SIM

typedef struct idle_mark {
  sh_stats st;
  uint64_t steps;
  uint64_t now_ns;
} idle_mark;

static void mark(sh_system *sys, idle_mark *m) {
  sh_system_stats(sys, &m->st);
  sh_sim_report r;
  sh_sim_report_get(&r);
  m->steps = r.steps;
  m->now_ns = r.vtime_ns;
}

/* Work between two marks: what makes the system not idle (rule 2). */
static bool worked(const idle_mark *a, const idle_mark *b) {
  return b->st.runs != a->st.runs || b->st.sent != a->st.sent ||
         b->st.delivered != a->st.delivered || b->st.wakeups != a->st.wakeups;
}

typedef struct idle_limits {
  uint32_t workers;
  uint64_t steps_per_park;
} idle_limits;

/* Rules 3 and 4 over the stretch from `from` to `to`: at most max_parks
 * parks per worker, and steps explained by parks. */
static bool within(const idle_limits *l, const idle_mark *from, const idle_mark *to,
                   uint64_t max_parks, const char *stage, char *why, size_t n) {
  uint64_t parks = to->st.parks - from->st.parks;
  uint64_t steps = to->steps - from->steps;
  uint64_t secs = (to->now_ns - from->now_ns) / IDLE_S_NS;
  if (parks > max_parks * l->workers) {
    snprintf(why, n, "idle: %llu parks of %u workers in %llu s of the %s, want <= %llu per worker",
             (unsigned long long)parks, l->workers, (unsigned long long)secs, stage,
             (unsigned long long)max_parks);
    return false;
  }
  uint64_t max_steps = (parks + l->workers) * l->steps_per_park;
  if (steps > max_steps) {
    snprintf(why, n, "idle: %llu steps with %llu parks in %llu s of the %s, want <= %llu",
             (unsigned long long)steps, (unsigned long long)parks, (unsigned long long)secs,
             stage, (unsigned long long)max_steps);
    return false;
  }
  return true;
}

static bool idle_for(uint64_t ns) { return sh_sim_idle(ns) == 0; }

/* Rules 2 to 4, after the settling: the drain, then the tail. */
static sh_scn_idle_verdict watch(sh_system *sys, const idle_limits *l, uint64_t drain_ns,
                                 char *why, size_t n) {
  uint64_t total = drain_ns + IDLE_TAIL_NS;
  uint64_t chunk = total / IDLE_MAX_CHUNKS > IDLE_S_NS ? total / IDLE_MAX_CHUNKS : IDLE_S_NS;
  idle_mark start, prev, tail, now;
  mark(sys, &start);
  prev = tail = start;
  bool in_tail = false;
  /* Bounded: IDLE_MAX_CHUNKS chunks of at least total / IDLE_MAX_CHUNKS. */
  for (uint64_t idled = 0, i = 0; idled < total; idled += chunk, i++) {
    assert(i <= IDLE_MAX_CHUNKS);
    if (!idle_for(chunk)) return SH_SCN_IDLE_SKIPPED;
    mark(sys, &now);
    if (worked(&prev, &now)) return SH_SCN_IDLE_ACTIVE;
    prev = now;
    if (!in_tail && !within(l, &start, &now, IDLE_DRAIN_PARKS, "drain", why, n))
      return SH_SCN_IDLE_BUSY;
    if (in_tail && !within(l, &tail, &now, IDLE_TAIL_PARKS, "quiet tail", why, n))
      return SH_SCN_IDLE_BUSY;
    if (!in_tail && idled + chunk >= drain_ns) {
      in_tail = true;
      tail = now;
    }
  }
  return SH_SCN_IDLE_HELD;
}

#endif

sh_scn_idle_verdict sh_scn_idle_check(sh_system *sys, uint64_t pool_idle_ns, uint64_t spin_ns,
                                      char *why, size_t n) {
#ifdef SH_SIM
  assert(sys != NULL && why != NULL && n > 0);
  why[0] = '\0';
  /* Bounded: three chunks. */
  for (uint64_t i = 0, ns = IDLE_MS_NS; i < IDLE_SETTLE_CHUNKS; i++, ns *= 10)
    if (!idle_for(ns)) return SH_SCN_IDLE_SKIPPED;
  idle_limits l = {.workers = sh_system_workers(sys),
                   .steps_per_park = IDLE_TURN_STEPS + spin_ns / 100};
  /* A pool_idle_ns past the clock's range: the trim never comes. */
  uint64_t drain_ns = IDLE_HORIZON_NS + (pool_idle_ns < IDLE_HORIZON_NS * 64 ? pool_idle_ns : 0);
  return watch(sys, &l, drain_ns, why, n);
#else
  (void)sys, (void)pool_idle_ns, (void)spin_ns, (void)why, (void)n;
  return SH_SCN_IDLE_SKIPPED;
#endif
}
