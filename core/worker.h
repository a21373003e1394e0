/*
 * A worker: one per CPU (a thread on epoll, a fiber in the simulator), with
 * its HouseManager (mounting FIFO, IO-actor queue, state-actor queue), its
 * pools, its timer wheel and its counters. The worker loop:
 *   IO -> mounting -> IO actors (no budget) -> timers -> state actors
 *   (under a deadline checked every 16 houses) -> stealing -> park.
 */
#ifndef SH_WORKER_H
#define SH_WORKER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

#include "counters.h"
#include "housequeue.h"
#include "pool.h"
#include "wheel.h"

struct sh_house;

typedef struct sh_worker {
  sh_house_queue mounting;
  sh_house_queue io;
  sh_house_queue state;
  _Alignas(64) atomic_int parked;  /* set while it may be asleep (see park) */
  atomic_bool stop;
  _Alignas(64) sh_system *sys;      /* owner-only from here on */
  uint32_t index;
  uint64_t idle_count;              /* loop turns in a row that found nothing */
  bool poll_yielded;                /* this idle stretch gave the CPU away once */
  sh_pool pool;
  sh_wheel wheel;
  sh_counters counters;
} sh_worker;

/* The worker the calling thread (fiber) is, or NULL. */
static inline sh_worker *sh_worker_current(void);

void sh_worker_init(sh_worker *w, sh_system *sys, uint32_t index);
void sh_worker_destroy(sh_worker *w);
/* The plat entry: the worker loop. */
void sh_worker_main(void *sys, uint32_t index);
/* Queues a ready house on its owner and wakes the owner if it sleeps. */
void sh_worker_enqueue(struct sh_house *h);
/* Queues a spawned house on its owner's mounting FIFO. */
void sh_worker_enqueue_mount(struct sh_house *h);
/* Wakes worker w if it is parked; coalesced (one signal per sleep). */
void sh_worker_wake(sh_worker *w);
/* Runs everything queued on w to completion, with no time budget (shutdown). */
bool sh_worker_drain(sh_worker *w);
/* Counts into the current worker's counters, or the system's. */
void sh_count(sh_system *sys, sh_counter k);
void sh_count_n(sh_system *sys, sh_counter k, uint64_t n);

#include "plat.h"
static inline sh_worker *sh_worker_current(void) { return (sh_worker *)sh_plat_local(); }

#endif
