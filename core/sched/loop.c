/*
 * The worker loop and stealing (the order of a turn is in loop.h).
 *
 * Parking. A worker that found nothing polls for a short while (a wakeup
 * through the platform costs tens of microseconds, and a chatty peer
 * usually answers sooner), then parks with the handshake described in
 * worker.c: stores parked = 1, then looks at its queues once more.
 */
#include "sched/loop.h"

#include "base/atomic.h"
#include "base/check.h"
#include "actor/dispatch.h"
#include "actor/house.h"
#include "netplat.h"
#include "sched/system.h"
#include "time/timer.h"

/* State actors are run under a deadline checked every 16 houses (the clock
 * read is amortised); with no IO events the budget is 500 us. */
#define SH_DEADLINE_CHECK_MASK 15u
#define SH_IDLE_BUDGET_NS 500000ull
/* How long an idle worker polls before it starts yielding its CPU. */
#define SH_POLL_YIELD_AFTER_NS 5000u

static void run_house(sh_worker *w, sh_hq_link *l) {
  sh_house *h = sh_house_of_link(l);
  /* Only the worker that popped a house can claim it, so no CAS: relaxed,
   * because the queue's lock already ordered the queuer's writes before ours. */
  SH_ASSERT(sh_atomic_load(&h->state, memory_order_relaxed) == SH_READY);
  /* Policy: an IO actor is bound to its worker's IO; nobody steals it. */
  SH_ASSERT(h->cls->kind != SH_IO_ACTOR || h->owner == w->index);
  sh_atomic_store(&h->state, SH_SCHEDULED, memory_order_relaxed);
  sh_dispatch_run(w, h);
}

/* A house popped from a worker's own queue (mounting, IO or state) is that
 * worker's: a spawn queues it on the owner it placed it on, a ready on its
 * owner, and `owner` changes only in the ready that follows a sender, before
 * the house is queued (house.c). So the mount hook runs on the owner, and a
 * house runs elsewhere only when an idle worker steals a run of it
 * (steal(), the one such path; a pinned house too, as sh_spawn_on says). */
static sh_hq_link *own(const sh_worker *w, sh_hq_link *l) {
  SH_INVARIANT(l == NULL || sh_house_of_link(l)->owner == w->index);
  return l;
}

static uint32_t run_mounting(sh_worker *w, uint32_t max) {
  SH_DEBUG_ASSERT(max <= SH_TURN_MAX_HOUSES); /* a turn's bound (loop.h) */
  uint32_t n = 0;
  sh_hq_link *l;
  while (n < max && (l = own(w, sh_hq_pop(&w->mounting))) != NULL) {
    sh_house_mount(sh_house_of_link(l));
    n++;
  }
  return n;
}

/* Runs houses of q until it is empty, `max` ran, or (every 16 houses) the
 * deadline passed. */
static uint32_t run_queue(sh_worker *w, sh_house_queue *q, uint32_t max, uint64_t deadline) {
  /* A worker runs its own queues; a thief takes one house (steal). */
  SH_DEBUG_ASSERT(q == &w->io || q == &w->state);
  uint32_t n = 0;
  sh_hq_link *l;
  while (n < max && (l = own(w, sh_hq_pop(q))) != NULL) {
    run_house(w, l);
    n++;
    if ((n & SH_DEADLINE_CHECK_MASK) == 0 && deadline != UINT64_MAX && sh_plat_now_ns() >= deadline)
      break;
  }
  return n;
}

static uint64_t state_deadline(const sh_worker *w, uint64_t now, uint64_t io_ns,
                               uint32_t io_events) {
  uint32_t ratio = w->sys->cfg.io_ratio;
  SH_ASSERT(ratio > 0); /* check_config refuses 0: it divides below */
  if (ratio >= 100) return UINT64_MAX;
  if (io_events == 0) return now + SH_IDLE_BUDGET_NS;
  return now + io_ns * (100 - ratio) / ratio;
}

/* The IO phase: readiness of the worker's sockets becomes events in their
 * actors' houses (channel.h), which the IO queue runs next. A worker that
 * watches no socket skips the poll (a system call on epoll), and an idle
 * one polls every SH_IDLE_IO_EVERY turns of its short spin: each poll is a
 * system call, and a spinning worker's CPU is often the one its peer
 * needs to send what it waits for. */
#define SH_IDLE_IO_EVERY 4u
static uint32_t poll_io(sh_worker *w, uint64_t now, uint64_t *io_ns) {
  if (w->watched == 0 || (w->idle_count % SH_IDLE_IO_EVERY) != 0) return 0;
  uint32_t n = sh_plat_wait(w->sys->plat, w->index, SH_PLAT_POLL, SH_TURN_MAX_IO_EVENTS);
  SH_ASSERT(n <= SH_TURN_MAX_IO_EVENTS); /* the platform reports at most max (plat.h) */
  if (n > 0) *io_ns = sh_plat_now_ns() - now;
  return n;
}

/* One turn of the loop at time `now`; how many things it did. `woke_io`:
 * the readiness the park before it reported (its events are queued). */
static uint32_t turn(sh_worker *w, uint64_t now, uint32_t woke_io) {
  SH_DEBUG_ASSERT(woke_io <= SH_TURN_MAX_IO_EVENTS); /* one park's reports (park) */
  uint64_t io_ns = 0;
  uint32_t io_events = woke_io + poll_io(w, now, &io_ns);
  uint32_t did = io_events + run_mounting(w, SH_TURN_MAX_HOUSES);
  did += run_queue(w, &w->io, SH_TURN_MAX_HOUSES, UINT64_MAX);
  /* The wheel is only walked when something is due: the idle poll runs
   * this every few hundred nanoseconds. */
  if (sh_wheel_next_ns(&w->wheel) <= now) did += sh_timer_advance(w, now);
  /* The state queue has no count bound: the deadline bounds it. */
  did += run_queue(w, &w->state, UINT32_MAX, state_deadline(w, now, io_ns, io_events));
  return did;
}

/* A victim with backlog `readies` is robbed when readies > floor and
 * idle_count * readies >= aggression; try-lock only; one house; state
 * actors only. The house goes home when it settles. */
static bool steal(sh_worker *w) {
  sh_system *sys = w->sys;
  uint32_t n = sys->nworkers;
  if (n < 2) return false;
  uint32_t vi = (uint32_t)(sh_plat_random() % n);
  /* Bounded by the workers: one look at each. (The next index wraps by a
   * compare: a division per look costs more than the look, and the idle
   * poll steals at every turn.) */
  for (uint32_t i = 0; i < n; i++, vi = vi + 1 == n ? 0 : vi + 1) {
    SH_DEBUG_ASSERT(vi < n);
    sh_worker *v = &sys->workers[vi];
    if (v == w) continue;
    uint64_t readies = sh_hq_count(&v->state);
    if (readies <= sys->cfg.steal_floor || w->idle_count * readies < sys->cfg.steal_aggression)
      continue;
    sh_hq_link *l = sh_hq_trypop(&v->state);
    if (l == NULL) continue;
    SH_SOMETIMES(true, "loop: a house stolen");
    run_house(w, l);
    return true;
  }
  return false;
}

static bool work_visible(sh_worker *w, uint64_t now) {
  return sh_hq_count(&w->mounting) + sh_hq_count(&w->io) + sh_hq_count(&w->state) > 0 ||
         sh_wheel_next_ns(&w->wheel) <= now;
}

static bool stopping(const sh_worker *w) {
  /* acquire: pairs with the shutdown's release store. */
  return sh_atomic_load(&w->stop, memory_order_acquire);
}

/* Sleeps unless work shows up; the readiness the wait reported (its
 * events are queued already: the wait calls the readiness function). */
static uint32_t park(sh_worker *w) {
  uint64_t now = sh_plat_now_ns();
  /* A pool with idle objects above its floor wakes us when they may go. */
  uint64_t trim_due = sh_pool_trim(&w->pool, now);
  /* seq_cst: the store half of the parking handshake (worker.c). */
  sh_atomic_store(&w->parked, 1, memory_order_seq_cst);
  SH_YIELD("worker.park");
  if (work_visible(w, now) || stopping(w)) {
    /* relaxed: we never slept; a waker that saw 1 sends a wake we drain at
     * our next park (one spurious turn, nothing lost). */
    sh_atomic_store(&w->parked, 0, memory_order_relaxed);
    return 0;
  }
  sh_counters_own_add(&w->counters, SH_C_PARKS, 1);
  uint64_t next = sh_wheel_next_ns(&w->wheel);
  if (trim_due < next) next = trim_due;
  uint64_t deadline = next == UINT64_MAX ? SH_PLAT_NO_DEADLINE : next;
  uint32_t n = sh_plat_wait(w->sys->plat, w->index, deadline, SH_TURN_MAX_IO_EVENTS);
  SH_ASSERT(n <= SH_TURN_MAX_IO_EVENTS); /* the platform reports at most max (plat.h) */
  /* relaxed: a waker that found parked = 1 already cleared it; a timeout or
   * spurious return clears it here, and a late wake costs one extra turn. */
  sh_atomic_store(&w->parked, 0, memory_order_relaxed);
  return n;
}

/* Poll a short while before sleeping: a wakeup costs tens of microseconds,
 * a chatty peer usually answers sooner than that. Past the first few
 * microseconds of polling, the first poll and then every 16th gives the CPU
 * away: when workers outnumber free CPUs, a polling worker would otherwise
 * hold the CPU its peer needs to produce the very work it polls for
 * (cross-worker round trips fell to ~9k/s on one shared CPU), while on free
 * CPUs the answer usually comes before the first yield, which costs a system
 * call. (Yielding at once rather than at the next 16th poll also halves the
 * simulator's steps per cross-worker message under its none and pct
 * strategies, where only a yield lets the peer run.) */
static void idle_poll(sh_worker *w, uint64_t idle_ns) {
  SH_DEBUG_ASSERT(w->idle_count > 0); /* only a turn that did nothing polls */
  bool due = (w->idle_count & 15u) == 0 || !w->poll_yielded;
  if (idle_ns >= SH_POLL_YIELD_AFTER_NS && due) {
    w->poll_yielded = true;
    sh_plat_yield_cpu();
  } else {
    sh_plat_relax();
  }
}

void sh_loop_main(void *ctx, uint32_t index) {
  sh_system *sys = ctx;
  SH_ASSERT(index < sys->nworkers);
  sh_worker *w = &sys->workers[index];
  sh_worker_enter(w);
  uint64_t idle_since = 0;
  uint32_t woke_io = 0;
  /* Runs until told to stop: each turn does work, polls, or parks. */
  while (!stopping(w)) {
    /* One clock read a turn: in the idle poll the clock is most of the cost. */
    uint64_t now = sh_plat_now_ns();
    uint32_t did = turn(w, now, woke_io);
    woke_io = 0;
    if (did > 0) {
      w->idle_count = 0;
      continue;
    }
    w->idle_count++;
    if (steal(w)) {
      w->idle_count = 0;
      continue;
    }
    if (w->idle_count == 1) {
      idle_since = now;
      w->poll_yielded = false;
    }
    if (now - idle_since < sys->cfg.spin_ns) {
      idle_poll(w, now - idle_since);
      continue;
    }
    woke_io = park(w);
    w->idle_count = 0;
  }
  sh_worker_enter(NULL);
}

bool sh_loop_drain(sh_worker *w) {
  /* One bounded pass over the queues; the shutdown bounds the passes. */
  uint32_t n = run_mounting(w, SH_TURN_MAX_HOUSES);
  n += run_queue(w, &w->io, SH_TURN_MAX_HOUSES, UINT64_MAX);
  n += run_queue(w, &w->state, SH_TURN_MAX_HOUSES, UINT64_MAX);
  SH_DEBUG_ASSERT(n <= 3 * SH_TURN_MAX_HOUSES); /* one bounded pass */
  return n > 0;
}
