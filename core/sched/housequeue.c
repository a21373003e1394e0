/*
 * Two spin-locked FIFO lists per queue. The lists hold few pointers per
 * operation, so a spin lock beats a mutex; the count is kept apart so that
 * the steal rule and the park check can read a backlog without locking.
 */
#include "sched/housequeue.h"

#include "base/atomic.h"

#include <stddef.h>

#include "base/check.h"

void sh_hq_init(sh_house_queue *q) {
  /* Each list and the count on a cache line of their own (housequeue.h). */
  _Static_assert(sizeof(sh_hq_list) == 64 && offsetof(sh_house_queue, count) == 128,
                 "a run queue's lists and count take a line each");
  for (int i = 0; i < 2; i++) {
    sh_spin_init(&q->sub[i].lock);
    sh_atomic_init(&q->sub[i].head, NULL);
    q->sub[i].tail = NULL;
#ifdef SH_CHECKED
    q->sub[i].linked = 0;
#endif
  }
  sh_atomic_init(&q->count, 0);
}

uint32_t sh_hq_push(sh_house_queue *q, sh_hq_link *h, bool high) {
  sh_hq_list *l = &q->sub[high ? 1 : 0];
  h->next = NULL;
  /* Count first, link second: a popper can never take the house before it
   * was counted, so the count never wraps below zero (it may briefly be one
   * ahead, which only costs a popper an empty look). seq_cst: the store-load
   * handshake with a parking owner (see worker.c): we increment, then read
   * its parked flag; it sets the flag, then reads this count. One of us sees
   * the other. */
  uint32_t n = (uint32_t)sh_atomic_fetch_add(&q->count, 1, memory_order_seq_cst) + 1;
  SH_YIELD("hq.push");
  sh_spin_lock(&l->lock);
  /* A house is in one queue at a time: never pushed twice in a row. */
  SH_ASSERT(l->tail != h);
  if (l->tail != NULL)
    l->tail->next = h;
  else
    /* relaxed: pop_list's unlocked peek is a hint; a plain store there
     * would be a data race. The lock orders the rest. */
    sh_atomic_store(&l->head, h, memory_order_relaxed);
  l->tail = h;
#ifdef SH_CHECKED
  l->linked++;
#endif
  sh_spin_unlock(&l->lock);
  return n;
}

static sh_hq_link *take_locked(sh_house_queue *q, sh_hq_list *l) {
  /* relaxed: under the lock, which orders it. */
  sh_hq_link *h = sh_atomic_load(&l->head, memory_order_relaxed);
  if (h == NULL) return NULL;
  /* Atomic store: pairs with pop_list's unlocked peek (see sh_hq_push). */
  sh_atomic_store(&l->head, h->next, memory_order_relaxed);
  if (h->next == NULL) l->tail = NULL;
  h->next = NULL;
  /* relaxed: the count is a hint for stealing and parking; the push side's
   * increment (before the link, so this never runs ahead of it) is what must
   * not be missed, and it is seq_cst. */
  uint32_t was = (uint32_t)sh_atomic_fetch_sub(&q->count, 1, memory_order_relaxed);
  SH_ASSERT(was > 0); /* counted before linked: a linked house is always counted */
#ifdef SH_CHECKED
  /* The same rule, whatever the backlog: pushers count before they link and
   * poppers unlink before they uncount, so `was` holds every house linked
   * here, h included (the other list's houses only add to it). */
  SH_INVARIANT(was >= l->linked);
  l->linked--;
#endif
  return h;
}

static sh_hq_link *pop_list(sh_house_queue *q, sh_hq_list *l, bool try_only) {
  SH_DEBUG_ASSERT(l == &q->sub[0] || l == &q->sub[1]); /* its count is q's */
  /* An unlocked peek keeps an owner from taking an empty list's lock. */
  if (sh_atomic_load(&l->head, memory_order_relaxed) == NULL) return NULL;
  if (try_only) {
    if (!sh_spin_trylock(&l->lock)) return NULL;
  } else {
    sh_spin_lock(&l->lock);
  }
  sh_hq_link *h = take_locked(q, l);
  sh_spin_unlock(&l->lock);
  return h;
}

static sh_hq_link *pop(sh_house_queue *q, bool try_only) {
  if (sh_atomic_load(&q->count, memory_order_relaxed) == 0) return NULL;
  sh_hq_link *h = pop_list(q, &q->sub[1], try_only);
  if (h == NULL) h = pop_list(q, &q->sub[0], try_only);
  SH_DEBUG_ASSERT(h == NULL || h->next == NULL); /* handed out unlinked */
  return h;
}

sh_hq_link *sh_hq_pop(sh_house_queue *q) { return pop(q, false); }
sh_hq_link *sh_hq_trypop(sh_house_queue *q) { return pop(q, true); }
