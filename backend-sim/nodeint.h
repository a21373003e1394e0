/*
 * Nodes, inside the simulator: the table (node.c) and the acts (nodeact.c).
 */
#ifndef SH_SIM_NODEINT_H
#define SH_SIM_NODEINT_H

#include <stackhouse/cluster.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node.h"

/* Clock pieces and lives a node remembers (for checkers' conversions). */
#define SH_SIMNODE_PIECES 16
#define SH_SIMNODE_LIVES 64

typedef struct sh_simnode {
  char name[32];
  uint32_t ip;
  uint32_t workers;
  const sh_actor_class *entry;
  void (*init)(void); /* the spec's: before each boot */
  int argc;
  char **argv; /* copies (the simulator's memory) */
  sh_config config;
  bool has_config;
  int32_t max_drift_ppm;
  /* Its main fiber while booted (up or booting), else SH_SIMRUN_NO_FIBER. */
  uint32_t main;
  sh_plat *plat; /* its system's platform, once made */
  bool up;       /* its workers started */
  bool stopping; /* a graceful stop waits for its main */
  int exit_code; /* its sh_run's, once it returned */
  /* The clock (node.c, "Clocks"), and its last pieces before this one. */
  uint64_t base_true, base_local;
  int32_t ppm;
  struct {
    uint64_t base_true, base_local;
    int32_t ppm;
  } past[SH_SIMNODE_PIECES];
  uint32_t npast; /* pieces ever pushed (the last SH_SIMNODE_PIECES kept) */
  /* Its lives: boot k (1..) is lives[(k - 1) % SH_SIMNODE_LIVES]. */
  struct {
    uint64_t began, ended; /* true times; ended 0 while it runs */
  } lives[SH_SIMNODE_LIVES];
  /* Persisted state. */
  void *blob;
  size_t blob_len;
  uint32_t boots, crashes, stops;
} sh_simnode;

typedef struct sh_simnodes {
  uint32_t n; /* nodes 1..n */
  sh_simnode node[SH_SIMNODE_MAX];
  /* cut[a][b]: what node a sends to node b is held (node 0 included). */
  bool cut[SH_SIMNODE_MAX][SH_SIMNODE_MAX];
  uint32_t ncuts;
  uint32_t calms; /* sh_node_calm calls (a stop under way then boots again) */
} sh_simnodes;

extern sh_simnodes sh_simnodes_state;

/* Node by name (0: none). */
uint32_t sh_simnode_find(const char *name);

/* Frees what the simulator keeps for node d (its argv, its blob). */
void sh_simnode_free(sh_simnode *d);

/* Acts on node n (1..): 0 or -errno (cluster.h). */
int sh_simnode_boot(uint32_t n);
int sh_simnode_crash(uint32_t n);
int sh_simnode_stop(uint32_t n);
int sh_simnode_drift(uint32_t n, int32_t ppm);
int sh_simnode_jump(uint32_t n, int64_t delta_ns);
/* Nodes whose main returned give their slot back. */
void sh_simnode_reap_all(void);
/* Sleepers of node n with a deadline wake (its clock jumped). */
void sh_simnode_wake_all(uint32_t n);

/* An act resolved: node and peer by number (SH_SIMNODE_ALL: "*"). */
typedef struct sh_simnode_queued {
  uint64_t at, seq;
  int kind; /* sh_node_act_kind, or SH_SIMNODE_ACT_BOOT */
  uint32_t node, peer;
  int64_t value;
} sh_simnode_queued;
/* An act made inside the simulator: a node's delayed boot. */
#define SH_SIMNODE_ACT_BOOT 100
/* Queues q for true time `at` (nodeact.c); -ENOSPC, -errno. */
int sh_simnode_queue(uint64_t at, const sh_simnode_queued *q);

/* The nodes' stats are kept for after the simulation (nodeact.c). */
void sh_simnode_keep_stats(void);

/* An act's mark: mixed into the hash, an instant in the trace. */
void sh_simnode_note(uint32_t n, const char *what);
/* The nemesis' queue is dropped, its fiber gone (nodeact.c). */
void sh_simnode_acts_end(void);

#endif
