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

#include "counters.h"
#include "plat.h"
#include "spinlock.h"

struct sh_worker;
struct sh_house;
struct sh_bridge;

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
  atomic_uint_fast32_t next_worker; /* placement of single actors */

  sh_spin reg_lock;                 /* guards the lists below */
  struct sh_house *houses, *houses_tail;
  sh_addr *addrs;
  uint64_t nhouses;
  struct sh_bridge *bridges;        /* every bridge, open or closed */
  struct sh_bridge *bridge_free;    /* closed bridges, for reuse */
  atomic_bool drained;              /* shutdown finished its drain */

  sh_counters counters;             /* counts by threads that are not workers */
};

static inline bool sh_system_is_shut(const sh_system *sys) {
  /* acquire: pairs with the release store in sh_system_shutdown. */
  return atomic_load_explicit(&sys->shut, memory_order_acquire);
}

#endif
