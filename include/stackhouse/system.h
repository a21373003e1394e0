/*
 * stackhouse: the system: its configuration, its life (new, start, exit,
 * wait, shutdown, free, or sh_run for all of it) and its statistics. Part
 * of the API of <stackhouse/stackhouse.h>, which includes it (either may
 * be included).
 */
#ifndef STACKHOUSE_SYSTEM_H
#define STACKHOUSE_SYSTEM_H

#include <stackhouse/stackhouse.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* The system                                                          */
/* ------------------------------------------------------------------ */

/* Where sh_spawn places a single actor (sh_config.placement). */
typedef enum sh_placement {
  SH_PLACE_LOCAL = 0,       /* spawned by an actor: on the spawner's worker; else round robin */
  SH_PLACE_ROUND_ROBIN = 1, /* workers take turns, whoever spawns */
} sh_placement;

/* Where a house runs once a message makes it ready (sh_config.affinity). */
typedef enum sh_affinity {
  SH_AFFINITY_FOLLOW = 0, /* on the worker whose send readied it: it becomes the owner */
  SH_AFFINITY_HOME = 1,   /* always on its owner (idle workers may still steal a run) */
} sh_affinity;

typedef struct sh_config {
  uint32_t workers;          /* 0: one per CPU */
  uint32_t max_per_run;      /* messages an actor handles per scheduling (64) */
  uint32_t max_batch;        /* messages in one batch stack (32) */
  uint32_t steal_floor;      /* a victim needs more ready actors than this (32) */
  uint32_t steal_aggression; /* steal when idle_count * backlog >= this (128) */
  uint32_t io_ratio;         /* percent of a loop for IO vs actors (50) */
  uint64_t spin_ns;          /* how long an idle worker polls before it parks (50 us) */
  uint32_t pool_max_cached;  /* free objects a size class keeps before free slabs go (4096) */
  uint32_t pool_keep;        /* an idle class frees slabs while it has more free objects (16) */
  uint64_t pool_idle_ns;     /* a class untouched this long is trimmed (30 s) */
  sh_placement placement;    /* of single actors (SH_PLACE_LOCAL) */
  sh_affinity affinity;      /* of ready houses (SH_AFFINITY_FOLLOW) */
} sh_config;

SH_API void sh_config_default(sh_config *cfg);

/* Creates a system (not started). cfg NULL: defaults. */
SH_API int sh_system_new(const sh_config *cfg, sh_system **out);
/* Starts the worker threads. */
SH_API int sh_system_start(sh_system *sys);
/* Asks the system to end; wakes sh_system_wait. From anywhere. */
SH_API void sh_system_exit(sh_system *sys, int code);
/* Blocks the calling (non-worker) thread until sh_system_exit; its code. */
SH_API int sh_system_wait(sh_system *sys);
/* Stops the workers, answers every pending ask with -ESHUTDOWN, runs stop
 * hooks, returns every pooled object. The system can only be freed after.
 * -EBUSY (counted in sh_stats.drain_overruns) when actors were still
 * busy after the final drain's bound; the system is shut down anyway: the
 * stacks still suspended are discarded (their asks given up), then the
 * stop hooks the drain did not reach run. */
SH_API int sh_system_shutdown(sh_system *sys);
SH_API void sh_system_free(sh_system *sys);
SH_API uint32_t sh_system_workers(const sh_system *sys);

/* The notice the entry actor receives once mounted. */
typedef struct sh_args {
  sh_msg hdr;
  int argc;
  char **argv;
} sh_args;
SH_MSG_DECLARE(sh_args);

/* new + start + spawn(entry) + args notice + wait + shutdown + free: the
 * whole life of a program. Returns the exit code (or a negative errno). */
SH_API int sh_run(const sh_config *cfg, const sh_actor_class *entry, int argc, char **argv);

typedef struct sh_stats {
  uint64_t delivered;         /* messages handed to handlers */
  uint64_t replies_unknown;   /* replies whose ask was no longer pending */
  uint64_t dropped_stopped;   /* messages refused or dropped by stopped actors */
  uint64_t asks_timed_out;
  uint64_t steals;            /* houses run by a worker other than their owner */
  uint64_t runs;              /* house runs */
  uint64_t parks;             /* times a worker went to sleep */
  uint64_t wakeups;           /* wake signals actually sent */
  uint64_t pool_outstanding;  /* pooled objects not yet returned */
  uint64_t pool_mallocs;      /* objects the pools took from malloc */
  /* Accounting, exact after shutdown: sent == delivered + replies_unknown +
   * dropped_stopped (every message offered to a live send is handled or
   * dropped with a reason), and asks == asks_resolved (each ask resolved
   * once: a reply, an error or a timeout, or given up: its stack ended, or
   * its bridge was freed, while it was pending). */
  uint64_t sent;              /* notices, asks, replies and exceptions sent */
  uint64_t asks;              /* futures made by sh_ask, sh_put and sh_sleep, bridge asks */
  uint64_t asks_resolved;     /* futures completed or given up */
  uint64_t drain_overruns;    /* shutdowns whose final drain hit its bound */
} sh_stats;

/* Sums the per-worker counters. Exact when the workers are stopped or idle. */
SH_API void sh_system_stats(const sh_system *sys, sh_stats *out);

#ifdef __cplusplus
}
#endif
#endif
