/*
 * The actor system: configuration, workers, addresses, the list of houses,
 * and the program's lifecycle (start, exit, shutdown).
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
#include "worker.h"

typedef enum sh_addr_kind {
  SH_ADDR_PLAIN = 0,
  SH_ADDR_PER_WORKER = 1,
  SH_ADDR_ROBIN = 2,
} sh_addr_kind;

struct sh_addr {
  sh_addr_kind kind;
  uint32_t n;
  atomic_uint_fast32_t robin;
  sh_addr *all_next;
  struct sh_house *houses[];
};

struct sh_system {
  sh_config cfg;
  uint32_t nworkers;
  sh_worker *workers;
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

/* The house an address sends to, from the calling worker (or thread). */
struct sh_house *sh_addr_pick(const sh_addr *a);

/* Houses READY, scheduled or running: after sh_system_shutdown there must be
 * none (the scenarios' invariant). Only while no worker runs. */
uint32_t sh_system_houses_busy(const sh_system *sys);

#endif
