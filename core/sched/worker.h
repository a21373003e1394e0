/*
 * A worker: one per CPU (a thread on epoll, a fiber in the simulator), with
 * its run queues (mounting FIFO, IO-actor queue, state-actor queue), its
 * pool, its timer wheel and its counters; and the ways other threads reach
 * it: queue a house on it, wake it, count into it. What a worker does with
 * its queues, the loop, is loop.c: this module knows nothing of houses but
 * their queue link, so that houses can schedule themselves through it.
 */
#ifndef SH_WORKER_H
#define SH_WORKER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

#include "base/counters.h"
#include "actor/hfree.h"
#include "sched/housequeue.h"
#include "mem/mem.h"
#include "mem/pool.h"
#include "time/wheel.h"

typedef struct sh_worker {
  sh_house_queue mounting;
  sh_house_queue io;
  sh_house_queue state;
  _Alignas(64) atomic_int parked;  /* set while it may be asleep (loop.c, park) */
  atomic_bool stop;
  _Alignas(64) sh_system *sys;      /* owner-only from here on */
  uint32_t index;
  uint64_t idle_count;              /* loop turns in a row that found nothing */
  bool poll_yielded;                /* this idle stretch gave the CPU away once */
  uint32_t watched;                 /* sockets it watches: its loop polls them (channel.h) */
  uint8_t *io_scratch;              /* SH_IO_SCRATCH bytes for socket reads, made at first use */
  sh_pool pool;
  sh_hfree houses;                  /* retired houses for this worker's spawns */
  sh_wheel wheel;
  sh_counters counters;
} sh_worker;

/* What a worker watches a socket for (the token of sh_net_watch,
 * netplat.h): the socket's readiness goes to its `ready`, which the
 * watcher set (the channel layer: its channels), on the watching worker. */
typedef struct sh_io_watch {
  void (*ready)(struct sh_io_watch *w, uint32_t events);
} sh_io_watch;

/* The worker the calling thread (fiber) is, or NULL: the thread's context
 * is its worker's pool (mem.h), inside the worker. */
static inline sh_worker *sh_worker_current(void) {
  sh_pool *p = sh_mem_pool();
  return p != NULL ? (sh_worker *)(void *)((char *)p - offsetof(sh_worker, pool)) : NULL;
}
/* The calling thread becomes worker w (its loop, or a shutdown acting as
 * it); NULL: no worker. */
void sh_worker_enter(sh_worker *w);

void sh_worker_init(sh_worker *w, sh_system *sys, uint32_t index);
void sh_worker_destroy(sh_worker *w);
/* The worker's buffer for one read from a socket (tcp.c, udp.c), held only
 * between a read and the copy of what it got: SH_IO_SCRATCH bytes, or NULL
 * when out of memory. A worker's own, not a thread's: in the simulator the
 * workers are fibers of one thread, and a copy into pages may be a
 * scheduling point. */
#define SH_IO_SCRATCH 65536u
uint8_t *sh_worker_scratch(sh_worker *w);
/* Queues a ready house (its link) on worker `owner` and wakes the owner if
 * it sleeps; `io`: the IO-actor queue, else the state-actor queue. */
void sh_worker_enqueue(sh_system *sys, uint32_t owner, sh_hq_link *l, bool high, bool io);
/* Queues a spawned house on its owner's mounting FIFO. */
void sh_worker_enqueue_mount(sh_system *sys, uint32_t owner, sh_hq_link *l);
/* Wakes worker w if it is parked; coalesced (one signal per sleep). */
void sh_worker_wake(sh_worker *w);
/* Counts into the current worker's counters, or the system's. */
void sh_count(sh_system *sys, sh_counter k);
void sh_count_n(sh_system *sys, sh_counter k, uint64_t n);

#endif
