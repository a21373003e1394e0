/*
 * stackhouse: clusters in one simulation. A node is a whole system (its
 * own workers, pools, timers, actors) with a name, an IPv4 address on the
 * simulator's fake network and a clock of its own. It boots from the same
 * entry a process uses in production (an actor class and argv, as sh_run
 * takes them), so a service's node code is the same in both; nodes talk
 * only over the network, and an actor of one node cannot message another
 * node's addresses (-EXDEV), as addresses are per process.
 *
 * The scenario (or its nemesis) acts on nodes: crash (a power cut: no
 * handler, stop hook or timer of the node runs again, its memory is freed,
 * its connections go silent: peers see no FIN or RST until they send to it
 * after it restarted, then RST; its datagrams are lost), graceful stop,
 * restart (with what it persisted, or wiped), one-way or two-way cuts of
 * the network between nodes, and its clock's drift and jumps. Every act
 * is a step of the run: replayed with it, drawn in its trace (a process
 * track per node, crashes and restarts as instants, cuts as spans).
 *
 * The acts are callable from the simulation's own fibers (the scenario's
 * outside thread, its threads): not from a node's own code, which has
 * only sh_node_persist, sh_node_recall, sh_node_self and sh_node_tell.
 *
 * Off the simulator (libstackhouse, the epoll backend) the same calls run
 * a cluster of processes on loopback: each node is a fresh start of the
 * calling program (its image, executed again) that boots the node's entry
 * with its argv; a crash is SIGKILL, a stop SIGTERM (the node's system
 * exits with 0), a restart starts the program again; what a node persists
 * is a file. A node's declared address is its own loopback address there
 * (127.S.0.K): every address the nodes and the calling program use goes
 * through the same map, so argv naming 10.0.0.1:7000 works on both. Cuts,
 * drift and jumps are the simulator's only (-ENOTSUP). docs/cluster.md.
 *
 * Errors are negative errno values: -ENOENT (no node of that name),
 * -EEXIST (a name or address taken), -EALREADY (crash or stop of a node
 * already down), -EBUSY (restart of a node that is up), -ERANGE (a drift
 * past the node's declared bound), -EINVAL (a bad argument, a cut naming
 * nobody), -EPERM (an act from a node's own code), -ETIMEDOUT (a process's
 * graceful stop that took more than 10 s: it was killed), -EIO
 * (sh_node_stop_all of processes of which one had a fault), -ENOTSUP (what
 * processes cannot do, or a crash in a simulation not linked to free a
 * node's memory: see docs/cluster.md).
 */
#ifndef STACKHOUSE_CLUSTER_H
#define STACKHOUSE_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>
#include <stackhouse/system.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Nodes of one simulation, at most. */
#define SH_NODE_MAX 63
/* The bound on a node's drift no declaration may pass (10%). */
#define SH_NODE_DRIFT_LIMIT_PPM 100000

/* An IPv4 address in host byte order, from its four parts. */
#define SH_IPV4(a, b, c, d) \
  ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (uint32_t)(d))

typedef struct sh_node_spec {
  const char *name;            /* [a-z0-9_-], 1..31 characters, unique */
  uint32_t ip;                 /* unique; not 0.0.0.0, 127.0.0.0/8 or 255.255.255.255 */
  uint32_t workers;            /* 0: 2 */
  const sh_actor_class *entry; /* the node's main actor: it receives sh_args */
  int argc;                    /* argv is copied: the caller may free it */
  char *const *argv;
  const sh_config *config;     /* NULL: defaults (workers above wins) */
  int32_t max_drift_ppm;       /* the drift the nemesis may give it (0: 1000 ppm) */
  /* Run in the node's process before each boot (NULL: nothing): where a
   * harness installs what its node code reports through (sh_node_tell).
   * A node process starts from a fresh image: nothing the caller set in
   * its own memory is there. In the simulator it runs on the node's main
   * before the node's system is made. */
  void (*init)(void);
} sh_node_spec;

/* Declares a node and boots it (its entry spawned, sh_args sent, workers
 * started) at the current virtual time. */
SH_API int sh_node_add(const sh_node_spec *spec);

/* A power cut, now. */
SH_API int sh_node_crash(const char *name);
/* sh_system_exit(0) on the node; returns once its system is freed (its
 * stop hooks ran). */
SH_API int sh_node_stop(const char *name);
/* Boots a node that is down again after delay_ms of virtual time, with
 * what it persisted (SH_NODE_WIPED: with nothing). */
#define SH_NODE_WIPED 1u
SH_API int sh_node_restart(const char *name, int64_t delay_ms, unsigned flags);
/* Whether the node is up (1), down (0), or -ENOENT. */
SH_API int sh_node_up(const char *name);

/* What `from` sends to `to` is held (TCP: it arrives once healed, in
 * order, as a retransmission would) or lost (UDP) until sh_node_heal.
 * One way only: to cut both ways, cut both. "*" names every node (and the
 * simulation's own system) but the other side. */
SH_API int sh_node_cut(const char *from, const char *to);
SH_API int sh_node_heal(const char *from, const char *to);
/* Whether what `from` sends to `to` is cut now: 1 or 0, or -ENOENT. From
 * anywhere, node code included (a checker's view of the network). */
SH_API int sh_node_is_cut(const char *from, const char *to);
/* Heals every cut. */
SH_API void sh_node_heal_all(void);
/* The nemesis stops: acts queued are dropped, every cut heals, every
 * clock stops drifting, every node that is down boots now. */
SH_API int sh_node_calm(void);
/* The cluster's end: acts queued are dropped, every cut heals, every node
 * that is up stops gracefully (sh_node_stop). The scenario framework calls
 * it once the workload ended, before its own checks. */
SH_API int sh_node_stop_all(void);

/* The node's clock runs at 1 + ppm/1e6 of true time from now on (|ppm| at
 * most its max_drift_ppm); it never goes backwards. */
SH_API int sh_node_drift(const char *name, int32_t ppm);
/* The node's clock jumps by delta_ms now (backwards when negative): only
 * this call turns a clock back. */
SH_API int sh_node_jump(const char *name, int64_t delta_ms);

/* Acts at a virtual time: the nemesis runs them in order of time, on a
 * fiber of the simulation's own (so where the nodes are when it acts is a
 * decision of the schedule). at_ms is on the true clock, from the run's
 * start; one in the past runs at once. */
typedef enum sh_node_act_kind {
  SH_ACT_CRASH = 1,
  SH_ACT_STOP,
  SH_ACT_RESTART,       /* value: delay in ms */
  SH_ACT_RESTART_WIPED, /* value: delay in ms */
  SH_ACT_CUT,           /* node -> peer */
  SH_ACT_HEAL,          /* node -> peer */
  SH_ACT_HEAL_ALL,
  SH_ACT_DRIFT,         /* value: ppm */
  SH_ACT_JUMP,          /* value: ms */
} sh_node_act_kind;

typedef struct sh_node_act {
  sh_node_act_kind kind;
  const char *node; /* copied */
  const char *peer; /* cuts and heals; copied */
  int64_t value;
} sh_node_act;

/* Runs act now. */
SH_API int sh_node_act_now(const sh_node_act *act);
/* Queues act for at_ms (checked now: an unknown name is -ENOENT). At most
 * SH_NODE_MAX_ACTS queued (-ENOSPC). */
#define SH_NODE_MAX_ACTS 4096
SH_API int sh_node_act_at(int64_t at_ms, const sh_node_act *act);

/* For node code: keeps a copy of data (at most SH_NODE_PERSIST_MAX bytes)
 * as the calling node's persisted state, replacing the last; a crash keeps
 * it, a wiped restart forgets it. In the simulator a blob it keeps; on
 * processes a file, replaced whole. -ENOTSUP outside a node. */
#define SH_NODE_PERSIST_MAX (1u << 20)
SH_API int sh_node_persist(const void *data, size_t len);
/* Copies the calling node's persisted state into buf (up to cap bytes);
 * its length (0: none), or -ENOTSUP. */
SH_API int64_t sh_node_recall(void *buf, size_t cap);

/* The calling node's name: "" for the simulation's own system (or a
 * program that launched a cluster of processes), NULL in a program that
 * is neither. */
SH_API const char *sh_node_self(void);

/* Boot `boot` (1.. as sh_node_stats.boots counts them; the last 64 are
 * kept) of node `name`: its true start and end (a crash, a stop, its
 * program's end; 0 while it runs), for checkers. -ENOENT. */
SH_API int sh_node_life(const char *name, uint32_t boot, uint64_t *began_ns, uint64_t *ended_ns);

/* What node code tells a checker (sh_node_tell), as a listener hears it. */
#define SH_NODE_TELL_MAX 192
typedef struct sh_node_heard {
  const char *node;   /* the teller's name */
  uint32_t boot;      /* its boot (sh_node_stats.boots) when it told */
  uint64_t true_ns;   /* when it told, on the true clock (sh_scn_true_ns's) */
  const void *data;
  size_t len;
} sh_node_heard;
typedef void (*sh_node_listener)(const sh_node_heard *h, void *ctx);

/* The one listener of what nodes tell (NULL: none; told data is then
 * dropped). Set it before the nodes boot, from the simulation's side; the
 * listener must not call sh_node_listen or sh_node_hear itself. */
SH_API int sh_node_listen(sh_node_listener fn, void *ctx);
/* For node code: tells the listener len bytes (at most SH_NODE_TELL_MAX).
 * In the simulator the listener hears it at once, on the teller's fiber.
 * Off it, what nodes tell is kept in order of telling (one order for all
 * nodes: a shared lock stamps and queues each) until the listener's side
 * calls sh_node_hear; at most 8192 untold-yet: past that, -ENOBUFS (and
 * sh_node_hear reports the loss); what nobody heard by the next cluster's
 * first sh_node_add is dropped then. -ENOTSUP outside a node. */
SH_API int sh_node_tell(const void *data, size_t len);
/* Delivers what nodes told and no listener heard yet, on the calling
 * thread, in order; the number delivered, or -ENOBUFS once when some were
 * lost. In the simulator nothing waits: 0. */
SH_API int sh_node_hear(void);

/* Counts for a scenario's checks and figures. After a simulation ended,
 * its nodes' counts stay readable until the next one adds a node. */
typedef struct sh_node_stats {
  uint32_t boots, crashes, stops;
  uint64_t mem_peak; /* the most bytes its live allocations held (0 if not tracked) */
  /* Boots that ended in a way nobody asked for: off the simulator, a node
   * process killed by a signal the cluster did not send (an abort, a
   * sanitizer's report, a segfault) or exiting with a status other than 0
   * (the node program's own report of failure, a sanitizer's exit code).
   * sh_node_stop_all fails (-EIO) when any node has one. */
  uint32_t faults;
} sh_node_stats;
SH_API int sh_node_stats_get(const char *name, sh_node_stats *out);

#ifdef __cplusplus
}
#endif
#endif
