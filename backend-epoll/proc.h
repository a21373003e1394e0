/*
 * Clusters of processes (<stackhouse/cluster.h> off the simulator): what
 * the launching process (procnode.c, procact.c), its node processes
 * (procchild.c), the event ring (proctell.c) and the socket seam's
 * address map (procmap.c, called by net.c) share.
 *
 * One shared mapping (a memfd the launcher makes once and never unmaps,
 * inherited by its node processes across exec) holds the node table
 * (names, declared and loopback addresses, how to boot each) and the ring
 * of what nodes tell. Only the launcher writes the table, before it
 * spawns a node; `n` publishes the slots below it (release), so a reader
 * anywhere sees whole slots. The ring is under a robust process-shared
 * mutex: a node killed while it holds it leaves it to the next locker
 * (EOWNERDEAD), never locked for ever.
 */
#ifndef SH_EPOLL_PROC_H
#define SH_EPOLL_PROC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/cluster.h>
#include <stackhouse/system.h>

/* The ring's capacity: told events not yet heard. */
#define SH_PROC_EVENTS 8192
/* The environment variable that makes a process a node: "fd:slot:ppid". */
#define SH_PROC_ENV "SH_NODE_RUN"

/* Where a function of the program lives, the same in every run of its
 * image: the index of its loaded object (dl_iterate_phdr's order) and its
 * offset from that object's base. */
typedef struct sh_proc_loc {
  uint32_t obj;
  uint64_t off;
} sh_proc_loc;

typedef struct sh_proc_slot {
  char name[32];
  uint32_t ip, lo; /* declared; its loopback address (host order) */
  int argc;        /* the node's argc (its exec argv has one more when 0) */
  uint32_t workers;
  bool has_config, has_init;
  sh_config config;
  sh_proc_loc entry, init;
  _Atomic uint32_t boot; /* the boot under way: written before each spawn */
} sh_proc_slot;

typedef struct sh_proc_ev {
  uint32_t node, boot, len;
  uint64_t true_ns;
  unsigned char data[SH_NODE_TELL_MAX];
} sh_proc_ev;

typedef struct sh_proc_shm {
  _Atomic uint32_t n; /* slots 1..n are whole */
  uint32_t net;       /* the loopback /16 of this process's clusters: 127.net.0.0 */
  char dir[256];      /* the cluster's persisted files */
  sh_proc_slot node[SH_NODE_MAX + 1];
  pthread_mutex_t mu; /* robust, process-shared: the ring */
  uint64_t head, tail, lost;
  sh_proc_ev ev[SH_PROC_EVENTS];
} sh_proc_shm;

/* This process's view: NULL until it launches a cluster or boots as a
 * node. Written once (release), then read by any thread (acquire). */
extern sh_proc_shm *_Atomic sh_proc_shared;
/* In a node process, its slot (1..); 0 in the launcher. */
extern uint32_t sh_proc_self;

/* procmap.c: the launcher's mapping, made on first use; -errno. */
int sh_proc_map_make(sh_proc_shm **out, int *fd);
/* Addresses for the kernel and back: a node's declared address is its
 * loopback address, and in a node process "any" is its own. */
uint32_t sh_proc_addr_out(uint32_t ip);
uint32_t sh_proc_addr_in(uint32_t ip);
/* In a node process, binds an unbound socket to the node's own address
 * before it connects or sends to loopback address `to` (its peers see the
 * node's declared address); sh_proc_socket_made forgets what it knew of a
 * reused descriptor. */
void sh_proc_source(int fd, uint32_t to);
void sh_proc_socket_made(int fd);
/* In a node process, whether ip is another node's declared address (a
 * bind to it is -EADDRNOTAVAIL, as on a machine that has not got it). */
bool sh_proc_addr_foreign(uint32_t ip);
/* A function's place in the image, and back. */
int sh_proc_locate(const void *fn, sh_proc_loc *out);
void *sh_proc_resolve(const sh_proc_loc *loc);
/* Locks the ring (robust: recovers a lock a killed node held). */
void sh_proc_ring_lock(sh_proc_shm *m);

/* procchild.c: a node process's start (a constructor runs it). */
void sh_proc_child_main(int argc, char **argv);

/* ---- the launcher's side (procnode.c, procact.c) ---------------------------------- */

/* Boots remembered per node (sh_node_life). */
#define SH_PROC_LIVES 64
/* Callers waiting for an act at once, at most (-EAGAIN past that). */
#define SH_PROC_WAITERS 64
/* How long a graceful stop may take before SIGKILL ends it. */
#define SH_PROC_STOP_MS 10000

/* An act for the launcher thread; waiter NULL for a queued one. */
typedef struct sh_proc_waiter {
  bool done;
  int rc;
} sh_proc_waiter;

enum { SH_PROC_BOOT = 100, SH_PROC_CALM, SH_PROC_STOP_ALL };

typedef struct sh_proc_act {
  uint64_t at, seq; /* CLOCK_MONOTONIC ns; ties in order of queueing */
  int kind;         /* sh_node_act_kind or SH_PROC_* */
  uint32_t node;
  int64_t value;
  sh_proc_waiter *w;
} sh_proc_act;

typedef struct sh_proc_node {
  char **argv; /* owned, NULL-terminated */
  int argc;
  int pid, pidfd;       /* 0 and -1 while down */
  bool stopping, killed; /* what the launcher sent it */
  bool pending_boot;    /* a restart's boot is queued */
  uint32_t boots, crashes, stops, faults;
  struct {
    uint64_t began, ended;
  } lives[SH_PROC_LIVES];
} sh_proc_node;

typedef struct sh_proc_launcher {
  pthread_mutex_t mu; /* everything below; the launcher waits without it */
  pthread_cond_t cv;  /* an act done */
  sh_proc_shm *m;
  int fd, wake;       /* the mapping's memfd; an eventfd that wakes the launcher */
  uint32_t n;
  bool live, quit;    /* a cluster runs (its thread); its thread must end */
  bool ending;        /* sh_node_stop_all under way: the first caller's */
  pthread_t thread;
  uint64_t start_ns, seq;
  sh_proc_node node[SH_NODE_MAX + 1];
  /* By (at, seq): at most SH_NODE_MAX_ACTS timed ones, and room for the
   * acts callers wait for, so a full queue never refuses a calm or a stop. */
  sh_proc_act q[SH_NODE_MAX_ACTS + SH_PROC_WAITERS];
  uint32_t nq, ntimed;
} sh_proc_launcher;

extern sh_proc_launcher sh_proc_l;

uint64_t sh_proc_now(void);
/* procnode.c, under mu, on the launcher thread: */
int sh_proc_spawn(uint32_t n);
/* Collects nodes that ended (without blocking); a stop or crash waits
 * for its node with sh_proc_wait_end (mu dropped while it waits). */
void sh_proc_reap(void);
int sh_proc_wait_end(uint32_t n, int64_t ms);
/* Signals node n through its pidfd; kills and reaps every node still up
 * (a cluster's thread that ends leaves none behind). */
int sh_proc_signal(uint32_t n, int sig);
void sh_proc_kill_all(void);
/* procact.c, under mu: an act run on the launcher now (waited for) or
 * queued for CLOCK_MONOTONIC time at; a cluster's start and end. */
int sh_proc_act_wait(int kind, uint32_t node, int64_t value);
int sh_proc_act_later(uint64_t at, int kind, uint32_t node, int64_t value);
int sh_proc_cluster_start(void);
int sh_proc_cluster_end(void);

#endif
