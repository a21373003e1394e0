/*
 * The worker loop and the HouseManager (seed 001), with stealing and parking.
 *
 * Parking handshake. A worker about to sleep stores parked = 1 (seq_cst) and
 * then reads its queue counts (seq_cst); a pusher increments a count
 * (seq_cst, in sh_hq_push) and then reads parked (seq_cst). One of the two
 * sees the other: either the worker sees the house and does not sleep, or
 * the pusher sees parked = 1. Only the pusher whose exchange takes parked
 * from 1 to 0 writes the wakeup, so a burst of sends to a sleeping worker
 * costs one signal.
 */
#include "worker.h"

#include <assert.h>

#include "house.h"
#include "system.h"
#include "timer.h"

/* State actors are run under a deadline checked every 16 houses (the clock
 * read is amortised); with no IO events the budget is 500 us. */
#define SH_DEADLINE_CHECK_MASK 15u
#define SH_IDLE_BUDGET_NS 500000ull
/* IO phase time stands in for the IO-ratio formula once channels exist; the
 * mounting and IO-actor queues are drained up to this many houses a turn so
 * a turn is bounded even while houses keep arriving. */
#define SH_TURN_MAX_HOUSES 4096u
/* How long an idle worker polls before it starts yielding its CPU. */
#define SH_POLL_YIELD_AFTER_NS 5000u

void sh_worker_init(sh_worker *w, sh_system *sys, uint32_t index) {
  sh_hq_init(&w->mounting);
  sh_hq_init(&w->io);
  sh_hq_init(&w->state);
  atomic_init(&w->parked, 0);
  atomic_init(&w->stop, false);
  w->sys = sys;
  w->index = index;
  w->idle_count = 0;
  sh_pool_init(&w->pool, sys->cfg.pool_max_cached, sys->cfg.pool_keep, sys->cfg.pool_idle_ns);
  sh_wheel_init(&w->wheel, sh_plat_now_ns());
  for (int i = 0; i < SH_C_COUNT; i++) atomic_init(&w->counters.v[i], 0);
}

void sh_worker_destroy(sh_worker *w) { sh_pool_destroy(&w->pool); }

static inline void count_into(sh_system *sys, sh_counter k, uint64_t n) {
  sh_worker *w = sh_worker_current();
  if (w != NULL && w->sys == sys)
    sh_counters_own_add(&w->counters, k, n);
  else
    sh_counters_shared_add(&sys->counters, k, n);
}

/* Two entry points over one inline body: the per-message one adds a
 * constant 1. */
void sh_count(sh_system *sys, sh_counter k) { count_into(sys, k, 1); }
void sh_count_n(sh_system *sys, sh_counter k, uint64_t n) { count_into(sys, k, n); }

void sh_worker_wake(sh_worker *w) {
  /* seq_cst: the load half of the parking handshake (file comment). */
  if (atomic_load_explicit(&w->parked, memory_order_seq_cst) == 0) return;
  if (atomic_exchange_explicit(&w->parked, 0, memory_order_seq_cst) == 0) return;
  SH_YIELD("worker.wake");
  sh_counters_shared_add(&w->sys->counters, SH_C_WAKEUPS, 1);
  sh_plat_wake(w->sys->plat, w->index);
}

/* A backlog that an idle peer could steal: wake one sleeping peer so that
 * it spins, sees the backlog and applies the steal rule. */
static void offer_backlog(sh_worker *owner, uint32_t backlog) {
  sh_system *sys = owner->sys;
  if (sys->nworkers < 2 || backlog <= sys->cfg.steal_floor) return;
  if (backlog != sys->cfg.steal_floor + 1 && (backlog & 63u) != 0) return;
  for (uint32_t i = 1; i < sys->nworkers; i++) {
    sh_worker *peer = &sys->workers[(owner->index + i) % sys->nworkers];
    /* relaxed: a hint for whom to wake; sh_worker_wake re-reads it properly. */
    if (atomic_load_explicit(&peer->parked, memory_order_relaxed) != 0) {
      sh_worker_wake(peer);
      return;
    }
  }
}

void sh_worker_enqueue(sh_house *h) {
  sh_worker *owner = &h->sys->workers[h->owner];
  /* relaxed: priority is a hint decided at enqueue; a stale value costs order, not correctness. */
  bool high = atomic_load_explicit(&h->high, memory_order_relaxed);
  if (h->cls->kind == SH_IO_ACTOR) {
    sh_hq_push(&owner->io, h, high);
  } else {
    uint32_t n = sh_hq_push(&owner->state, h, high);
    offer_backlog(owner, n);
  }
  sh_worker_wake(owner);
}

void sh_worker_enqueue_mount(sh_house *h) {
  sh_worker *owner = &h->sys->workers[h->owner];
  sh_hq_push(&owner->mounting, h, false);
  sh_worker_wake(owner);
}

static void run_house(sh_worker *w, sh_house *h) {
  /* Only the worker that popped a house can claim it, so no CAS: relaxed,
   * because the queue's lock already ordered the queuer's writes before ours. */
  assert(atomic_load_explicit(&h->state, memory_order_relaxed) == SH_READY);
  atomic_store_explicit(&h->state, SH_SCHEDULED, memory_order_relaxed);
  sh_house_run(w, h);
}

static uint32_t run_mounting(sh_worker *w) {
  uint32_t n = 0;
  sh_house *h;
  while (n < SH_TURN_MAX_HOUSES && (h = sh_hq_pop(&w->mounting)) != NULL) {
    sh_house_mount(w, h);
    n++;
  }
  return n;
}

static uint32_t run_all(sh_worker *w, sh_house_queue *q) {
  uint32_t n = 0;
  sh_house *h;
  while (n < SH_TURN_MAX_HOUSES && (h = sh_hq_pop(q)) != NULL) {
    run_house(w, h);
    n++;
  }
  return n;
}

static uint32_t run_state(sh_worker *w, uint64_t deadline) {
  uint32_t n = 0;
  sh_house *h;
  while ((h = sh_hq_pop(&w->state)) != NULL) {
    run_house(w, h);
    n++;
    if ((n & SH_DEADLINE_CHECK_MASK) == 0 && sh_plat_now_ns() >= deadline) break;
  }
  return n;
}

static uint64_t state_deadline(const sh_worker *w, uint64_t now, uint64_t io_ns, uint32_t io_events) {
  uint32_t ratio = w->sys->cfg.io_ratio;
  if (ratio >= 100) return UINT64_MAX;
  if (io_events == 0) return now + SH_IDLE_BUDGET_NS;
  return now + io_ns * (100 - ratio) / ratio;
}

/* One turn of the loop; how many things it did. */
/* One turn of the loop at time `now`; how many things it did. */
static uint32_t turn(sh_worker *w, uint64_t now) {
  /* Phase 1, IO: sockets arrive with the channels; today the wakeup fd is
   * drained by the park, so a turn sees no IO events and takes no time. */
  uint32_t io_events = 0;
  uint64_t io_ns = 0;
  uint32_t did = run_mounting(w);
  did += run_all(w, &w->io);
  /* The wheel is only walked when something is due: the idle poll runs
   * this every few hundred nanoseconds. */
  if (sh_wheel_next_ns(&w->wheel) <= now) did += sh_timer_advance(w, now);
  did += run_state(w, state_deadline(w, now, io_ns, io_events));
  return did;
}

/* Seed 001's rule: a victim with backlog `readies` is robbed when
 * readies > floor and idle_count * readies >= aggression; try-lock only;
 * one house; state actors only. The house goes home when it settles. */
static bool steal(sh_worker *w) {
  sh_system *sys = w->sys;
  uint32_t n = sys->nworkers;
  if (n < 2) return false;
  uint32_t start = (uint32_t)(sh_plat_random() % n);
  for (uint32_t i = 0; i < n; i++) {
    sh_worker *v = &sys->workers[(start + i) % n];
    if (v == w) continue;
    uint64_t readies = sh_hq_count(&v->state);
    if (readies <= sys->cfg.steal_floor || w->idle_count * readies < sys->cfg.steal_aggression)
      continue;
    sh_house *h = sh_hq_trypop(&v->state);
    if (h == NULL) continue;
    run_house(w, h);
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
  return atomic_load_explicit(&w->stop, memory_order_acquire);
}

static void park(sh_worker *w) {
  uint64_t now = sh_plat_now_ns();
  /* A pool with idle objects above its floor wakes us when they may go. */
  uint64_t trim_due = sh_pool_trim(&w->pool, now);
  /* seq_cst: the store half of the parking handshake (file comment). */
  atomic_store_explicit(&w->parked, 1, memory_order_seq_cst);
  SH_YIELD("worker.park");
  if (work_visible(w, now) || stopping(w)) {
    /* relaxed: we never slept; a waker that saw 1 sends a wake we drain at
     * our next park (one spurious turn, nothing lost). */
    atomic_store_explicit(&w->parked, 0, memory_order_relaxed);
    return;
  }
  sh_counters_own_add(&w->counters, SH_C_PARKS, 1);
  uint64_t next = sh_wheel_next_ns(&w->wheel);
  if (trim_due < next) next = trim_due;
  sh_plat_park(w->sys->plat, w->index, next == UINT64_MAX ? SH_PLAT_NO_DEADLINE : next);
  /* relaxed: a waker that found parked = 1 already cleared it; a timeout or
   * spurious return clears it here, and a late wake costs one extra turn. */
  atomic_store_explicit(&w->parked, 0, memory_order_relaxed);
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
  bool due = (w->idle_count & 15u) == 0 || !w->poll_yielded;
  if (idle_ns >= SH_POLL_YIELD_AFTER_NS && due) {
    w->poll_yielded = true;
    sh_plat_yield_cpu();
  } else {
    sh_plat_relax();
  }
}

void sh_worker_main(void *ctx, uint32_t index) {
  sh_system *sys = ctx;
  sh_worker *w = &sys->workers[index];
  sh_plat_set_local(w);
  uint64_t idle_since = 0;
  while (!stopping(w)) {
    /* One clock read a turn: in the idle poll the clock is most of the cost. */
    uint64_t now = sh_plat_now_ns();
    if (turn(w, now) > 0) {
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
    park(w);
    w->idle_count = 0;
  }
  sh_plat_set_local(NULL);
}

bool sh_worker_drain(sh_worker *w) {
  bool did = false;
  sh_house *h;
  while ((h = sh_hq_pop(&w->mounting)) != NULL) {
    sh_house_mount(w, h);
    did = true;
  }
  while ((h = sh_hq_pop(&w->io)) != NULL || (h = sh_hq_pop(&w->state)) != NULL) {
    run_house(w, h);
    did = true;
  }
  return did;
}
