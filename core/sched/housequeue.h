/*
 * Run queues of houses. A priority queue has a high and a normal sub-queue,
 * each a FIFO list with its own spin lock; a pop always drains high first.
 * Many threads push (whoever made a house ready), the owner worker pops, and
 * idle workers may steal with sh_hq_trypop, which never waits for a lock.
 * Links are intrusive: a house embeds an sh_hq_link and is in at most one
 * queue at a time. The queue knows nothing else of houses.
 */
#ifndef SH_HOUSEQUEUE_H
#define SH_HOUSEQUEUE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/atomic.h"
#include "base/check.h"
#include "base/spinlock.h"

/* The queue link, embedded in what is queued; owned by the queue holding it. */
typedef struct sh_hq_link {
  struct sh_hq_link *next;
} sh_hq_link;

/* Each list on its own cache line: pushes to one do not slow pops of the other. */
typedef struct sh_hq_list {
  _Alignas(64) sh_spin lock;
  /* Atomic (relaxed) because pop_list peeks at head without the lock; the
   * lock orders the rest. */
  _Atomic(sh_hq_link *) head;
  sh_hq_link *tail;
#ifdef SH_CHECKED
  uint32_t linked; /* links in this list, under the lock: the count's check */
#endif
} sh_hq_list;

typedef struct sh_house_queue {
  sh_hq_list sub[2];                       /* [0] normal, [1] high */
  _Alignas(64) atomic_uint_fast32_t count; /* houses in both sub-queues */
} sh_house_queue;

void sh_hq_init(sh_house_queue *q);
/* Any thread. Returns the count after the push. */
uint32_t sh_hq_push(sh_house_queue *q, sh_hq_link *h, bool high);
/* Owner: waits for the locks (short). NULL when empty. */
sh_hq_link *sh_hq_pop(sh_house_queue *q);
/* Thieves: gives up on a held lock. NULL when empty or contended. */
sh_hq_link *sh_hq_trypop(sh_house_queue *q);
static inline uint32_t sh_hq_count(const sh_house_queue *q) {
  /* seq_cst: read by a worker that is about to park, after announcing it
   * parks; pairs with the pusher's seq_cst increment then parked check. */
  return (uint32_t)sh_atomic_load(&q->count, memory_order_seq_cst);
}

#endif
