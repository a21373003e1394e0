/*
 * Reaching a worker from any thread: queueing houses on it, waking it, and
 * counting into it.
 *
 * Parking handshake (the worker's side is loop.c's park). A worker about to
 * sleep stores parked = 1 (seq_cst) and then reads its queue counts
 * (seq_cst); a pusher increments a count (seq_cst, in sh_hq_push) and then
 * reads parked (seq_cst). One of the two sees the other: either the worker
 * sees the house and does not sleep, or the pusher sees parked = 1. Only the
 * pusher whose exchange takes parked from 1 to 0 writes the wakeup, so a
 * burst of sends to a sleeping worker costs one signal.
 */
#include <stdlib.h>

#include "sched/worker.h"

#include "base/atomic.h"

#include <fiu-local.h>

#include "base/faults.h"

#include "base/check.h"
#include "sched/system.h"

/* Refused wakes in a row a waker sits out (the fault point below). */
#define SH_WAKE_TRIES 4

void sh_worker_init(sh_worker *w, sh_system *sys, uint32_t index) {
  SH_ASSERT(index < sys->nworkers);
  sh_hq_init(&w->mounting);
  sh_hq_init(&w->io);
  sh_hq_init(&w->state);
  sh_atomic_init(&w->parked, 0);
  sh_atomic_init(&w->stop, false);
  w->sys = sys;
  w->index = index;
  w->idle_count = 0;
  sh_pool_init(&w->pool, sys->cfg.pool_max_cached, sys->cfg.pool_keep, sys->cfg.pool_idle_ns);
  sh_wheel_init(&w->wheel, sh_plat_now_ns());
  for (int i = 0; i < SH_C_COUNT; i++) sh_atomic_init(&w->counters.v[i], 0);
}

void sh_worker_destroy(sh_worker *w) {
  sh_pool_destroy(&w->pool);
  free(w->io_scratch);
}

uint8_t *sh_worker_scratch(sh_worker *w) {
  if (w->io_scratch == NULL) w->io_scratch = malloc(SH_IO_SCRATCH);
  return w->io_scratch;
}

void sh_worker_enter(sh_worker *w) { sh_plat_set_local(w != NULL ? &w->pool : NULL); }

static inline void count_into(sh_system *sys, sh_counter k, uint64_t n) {
  SH_DEBUG_ASSERT((unsigned)k < SH_C_COUNT);
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
  if (sh_atomic_load(&w->parked, memory_order_seq_cst) == 0) return;
  /* The worker itself, queueing what its own wait reports (loop.c park):
   * it is awake, and runs a turn once the wait returns. */
  if (sh_worker_current() == w) return;
  if (sh_atomic_exchange(&w->parked, 0, memory_order_seq_cst) == 0) return;
  SH_ASSERT(w->index < w->sys->nworkers); /* the platform wakes by index */
  SH_YIELD("worker.wake");
  /* Fault point: the platform refuses the wake for now (as an interrupted
   * write to an eventfd would); it is tried again after giving way, a few
   * times: a wake lost for good would leave the worker asleep. */
  for (int tries = 0; tries < SH_WAKE_TRIES && sh_fault("sh/worker/wake"); tries++)
    sh_plat_yield_cpu();
  sh_counters_shared_add(&w->sys->counters, SH_C_WAKEUPS, 1);
  sh_plat_wake(w->sys->plat, w->index);
}

/* A backlog that an idle peer could steal: wake one sleeping peer so that
 * it spins, sees the backlog and applies the steal rule. */
static void offer_backlog(sh_worker *owner, uint32_t backlog) {
  sh_system *sys = owner->sys;
  if (sys->nworkers < 2 || backlog <= sys->cfg.steal_floor) return;
  if (backlog != sys->cfg.steal_floor + 1 && (backlog & 63u) != 0) return;
  /* Bounded by the workers: one look at each peer. */
  for (uint32_t i = 1; i < sys->nworkers; i++) {
    sh_worker *peer = &sys->workers[(owner->index + i) % sys->nworkers];
    SH_ASSERT(peer != owner);
    /* relaxed: a hint for whom to wake; sh_worker_wake re-reads it properly. */
    if (sh_atomic_load(&peer->parked, memory_order_relaxed) != 0) {
      sh_worker_wake(peer);
      return;
    }
  }
}

void sh_worker_enqueue(sh_system *sys, uint32_t owner, sh_hq_link *l, bool high, bool io) {
  SH_ASSERT(owner < sys->nworkers);
  sh_worker *w = &sys->workers[owner];
  if (io) {
    sh_hq_push(&w->io, l, high);
  } else {
    uint32_t n = sh_hq_push(&w->state, l, high);
    offer_backlog(w, n);
  }
  sh_worker_wake(w);
}

void sh_worker_enqueue_mount(sh_system *sys, uint32_t owner, sh_hq_link *l) {
  SH_ASSERT(owner < sys->nworkers);
  sh_worker *w = &sys->workers[owner];
  sh_hq_push(&w->mounting, l, false);
  sh_worker_wake(w);
}
