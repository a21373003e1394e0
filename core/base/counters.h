/*
 * Statistics counters. Each worker owns a set and is its only writer, so an
 * increment is a relaxed load and store (a plain add on every target, no
 * locked instruction on the message path); readers may see a slightly stale
 * value, which is all sh_system_stats guarantees while workers run. Threads
 * that are not workers count into the system's set with atomic adds.
 */
#ifndef SH_COUNTERS_H
#define SH_COUNTERS_H

#include "base/atomic.h"
#include <stdatomic.h>
#include <stdint.h>

typedef enum sh_counter {
  SH_C_DELIVERED,
  SH_C_REPLIES_UNKNOWN,
  SH_C_DROPPED_STOPPED,
  SH_C_ASKS_TIMED_OUT,
  SH_C_STEALS,
  SH_C_RUNS,
  SH_C_PARKS,
  SH_C_WAKEUPS,
  SH_C_SENT,
  SH_C_ASKS,
  SH_C_ASKS_RESOLVED,
  SH_C_DRAIN_OVERRUNS,
  SH_C_COUNT,
} sh_counter;

typedef struct sh_counters {
  atomic_uint_fast64_t v[SH_C_COUNT];
} sh_counters;

static inline void sh_counters_own_add(sh_counters *c, sh_counter k, uint64_t n) {
  sh_atomic_store(&c->v[k], sh_atomic_load(&c->v[k], memory_order_relaxed) + n,
                        memory_order_relaxed);
}
static inline void sh_counters_shared_add(sh_counters *c, sh_counter k, uint64_t n) {
  sh_atomic_fetch_add(&c->v[k], n, memory_order_relaxed);
}
static inline uint64_t sh_counters_get(const sh_counters *c, sh_counter k) {
  return sh_atomic_load(&c->v[k], memory_order_relaxed);
}

#endif
