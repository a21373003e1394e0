/*
 * A test-and-test-and-set spin lock for the short critical sections of the
 * run queues (a few pointer writes). Owners use sh_spin_lock; thieves use
 * sh_spin_trylock only, so a contended victim is skipped, never waited on.
 * In the simulator a held lock yields to the other fibers instead of spinning:
 * one fiber spinning on a lock held by a descheduled fiber would never end.
 * The simulation and test builds also record the holder: a lock taken while
 * held, or given back by another than its holder, fails a check at once.
 */
#ifndef SH_SPINLOCK_H
#define SH_SPINLOCK_H

#include <stdatomic.h>
#include <stdbool.h>

#include "base/atomic.h"
#include "base/check.h"
#include "plat.h"

typedef struct sh_spin {
  atomic_bool held;
#ifdef SH_CHECKED
  uintptr_t holder; /* sh_plat_self of the holder, 0 when free; under the lock */
#endif
} sh_spin;

static inline void sh_spin_init(sh_spin *l) {
  sh_atomic_init(&l->held, false);
#ifdef SH_CHECKED
  l->holder = 0;
#endif
}

/* The lock's one test-and-set; true when it is ours now. */
static inline bool sh_spin_take(sh_spin *l) {
  SH_YIELD("spin.trylock");
  /* Relaxed pre-check: do not take the line exclusive when it is visibly held.
   * The exchange is acquire: the critical section must see the previous
   * holder's writes, which its release store published. */
  if (sh_atomic_load(&l->held, memory_order_relaxed)) return false;
  return !sh_atomic_exchange(&l->held, true, memory_order_acquire);
}

static inline bool sh_spin_trylock(sh_spin *l) {
  if (!sh_spin_take(l)) return false;
#ifdef SH_CHECKED
  SH_INVARIANT(l->holder == 0); /* one holder at a time */
  l->holder = sh_plat_self();
#endif
  /* A holder can be preempted or delayed inside its critical section: a
   * second taker may come now, and must find the lock held. */
  SH_YIELD("spin.held");
  return true;
}

static inline void sh_spin_lock(sh_spin *l) {
  /* Bounded only by the holder's critical section, which is a few stores:
   * its caller's code, not counted here. A holder that never lets go (a
   * lock taken twice on one thread) spins forever, which the simulator
   * reports as a run past its step limit. */
  while (!sh_spin_trylock(l)) {
#ifdef SH_SIM
    /* The holder is a descheduled fiber: let it run (a strategy that only
     * switches at its own whim, or by priority, would spin here forever). */
    sh_plat_yield_cpu();
#else
    sh_plat_relax();
#endif
  }
}

static inline void sh_spin_unlock(sh_spin *l) {
#ifdef SH_CHECKED
  SH_INVARIANT(l->holder == sh_plat_self()); /* only its holder gives it back */
  l->holder = 0;
#endif
  /* Release: publishes the critical section's writes to the next acquirer. */
  sh_atomic_store(&l->held, false, memory_order_release);
  SH_YIELD("spin.unlock");
}

#endif
