/*
 * The actor system's state: configuration, the workers, the registry of
 * houses, addresses and bridges, the program's exit, and the counters of
 * threads that are not workers. Only the struct and small reads: the
 * functions live with what they do (lifecycle.c starts and ends a system,
 * spawn.c creates actors, worker.c schedules), so that any module can
 * reach the system without depending on all of them.
 */
#ifndef SH_SYSTEM_H
#define SH_SYSTEM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

#include "base/atomic.h"
#include "base/check.h"
#include "base/counters.h"
#include "actor/hfree.h"
#include "plat.h"
#include "base/spinlock.h"

struct sh_worker;
struct sh_house;
struct sh_bridge;
struct sh_hslab;

/* A layer above the scheduler that keeps something per system (the
 * network: its TCP servers) registers how to free it, with a slot for its
 * data (sh_system_teardown): sh_system_free calls fn(sys, data) once the
 * houses and bridges are gone. One per layer: the table is fixed. */
typedef void (*sh_teardown_fn)(sh_system *sys, void *data);
#define SH_SYSTEM_TEARDOWNS 4

struct sh_system {
  sh_config cfg;
  uint32_t nworkers;
  struct sh_worker *workers;
  sh_plat *plat;
  sh_plat_event *exit_event;
  atomic_int exit_code;
  atomic_bool exiting;
  bool started;
  atomic_bool shut;                 /* shutdown began: no more spawns */
  atomic_uint outside_sends;        /* sends in flight from threads that are not workers */
  atomic_uint_fast32_t next_worker; /* placement of single actors */

  atomic_uint_fast64_t nhouses;     /* houses spawned: the next one's seq */
  /* Where houses live (hstore.h): the slabs, and retired houses no worker
   * keeps. A lock taken once per slab and per batch of houses. */
  sh_spin store_lock;
  struct sh_hslab *slabs, *slabs_tail; /* store_lock; in the order made */
  sh_hfree spare;                   /* store_lock */

  sh_spin reg_lock;                 /* guards the lists below */
  sh_addr *addrs;                   /* groups of instances (addr.h) */
  struct sh_bridge *bridges;        /* every bridge, open or closed */
  struct sh_bridge *bridge_free;    /* closed bridges, for reuse */
  struct {
    sh_teardown_fn fn;
    void *data;
  } teardowns[SH_SYSTEM_TEARDOWNS]; /* reg_lock; in the order registered */
  uint32_t nteardowns;              /* reg_lock */
  atomic_bool drained;              /* shutdown finished its drain */

  sh_counters counters;             /* counts by threads that are not workers */
};

/* The creation number of the next house (relaxed: unique is all it needs;
 * in the simulator, one thread makes it deterministic). */
static inline uint64_t sh_system_next_seq(sh_system *sys) {
  return sh_atomic_fetch_add(&sys->nhouses, 1, memory_order_relaxed);
}

static inline bool sh_system_is_shut(const sh_system *sys) {
  /* acquire: pairs with the release store in sh_system_shutdown. */
  return sh_atomic_load(&sys->shut, memory_order_acquire);
}

/* The data slot of teardown fn, which is registered first if it is not
 * yet (the caller holds reg_lock). */
static inline void **sh_system_teardown(sh_system *sys, sh_teardown_fn fn) {
  /* Bounded by the table. */
  for (uint32_t i = 0; i < sys->nteardowns; i++)
    if (sys->teardowns[i].fn == fn) return &sys->teardowns[i].data;
  SH_ASSERT(sys->nteardowns < SH_SYSTEM_TEARDOWNS);
  sys->teardowns[sys->nteardowns].fn = fn;
  return &sys->teardowns[sys->nteardowns++].data;
}

/* A send, spawn or stop from a thread that is not a worker runs between
 * these two, so that shutdown, which cannot join such threads as it joins
 * the workers, waits for it before its final drain (lifecycle.c): begin is
 * false once shutdown began. The handshake: the caller counts itself
 * (seq_cst) and then reads `shut` (seq_cst); shutdown stores `shut`
 * (seq_cst) and then reads the count. One sees the other. */
static inline void sh_system_outside_end(sh_system *sys) {
  /* release: what the call did is seen by shutdown's acquire load. */
  unsigned was = sh_atomic_fetch_sub(&sys->outside_sends, 1, memory_order_release);
  SH_ASSERT(was > 0); /* it began */
}
static inline bool sh_system_outside_begin(sh_system *sys) {
  SH_ASSERT(sh_plat_local() == NULL); /* a thread that is not a worker: no pool */
  sh_atomic_fetch_add(&sys->outside_sends, 1, memory_order_seq_cst);
  if (!sh_atomic_load(&sys->shut, memory_order_seq_cst)) return true;
  sh_system_outside_end(sys);
  return false;
}

#endif
