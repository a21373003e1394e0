/*
 * Where houses live (hstore.h): slabs, the workers' free lists and the
 * system's spare list.
 */
#include "actor/hstore.h"

#include "base/atomic.h"

#include <fiu-local.h>

#include "base/faults.h"
#include <stdlib.h>
#include <string.h>

#include "actor/addr.h"
#include "base/check.h"
#include "actor/gate.h"
#include "mem/mem.h"
#include "mem/msg.h"
#include "sched/system.h"
#include "sched/worker.h"

/* Houses are SH_HOUSE_ALIGN-aligned (an address token keeps its low bits
 * for the generation), so each takes a whole number of alignment units. */
#define SH_HOUSE_STRIDE                                                                            \
  ((sizeof(sh_house) + SH_HOUSE_ALIGN - 1) / SH_HOUSE_ALIGN * SH_HOUSE_ALIGN)

typedef struct sh_hslab {
  struct sh_hslab *next;
  _Alignas(SH_HOUSE_ALIGN) char houses[]; /* SH_SLAB_HOUSES of SH_HOUSE_STRIDE */
} sh_hslab;

static sh_house *slab_house(sh_hslab *s, uint32_t i) {
  return (sh_house *)(void *)(s->houses + (size_t)i * SH_HOUSE_STRIDE);
}

/* ---- the FIFOs ----------------------------------------------------------- */

static void fifo_push(sh_hfree *l, sh_house *h) {
  SH_ASSERT(h->vacant); /* only retired houses wait for a spawn */
  h->free_next = NULL;
  if (l->tail != NULL)
    l->tail->free_next = h;
  else
    l->head = h;
  l->tail = h;
  l->n++;
}

static sh_house *fifo_pop(sh_hfree *l) {
  sh_house *h = l->head;
  SH_ASSERT((h == NULL) == (l->n == 0)); /* n counts the FIFO */
  if (h == NULL) return NULL;
  l->head = h->free_next;
  if (l->head == NULL) l->tail = NULL;
  l->n--;
  h->free_next = NULL;
  return h;
}

/* Moves up to n houses from the head of `from` to `to`. */
static void fifo_move(sh_hfree *from, sh_hfree *to, uint32_t n) {
  SH_ASSERT(from != to);
  for (uint32_t i = 0; i < n && from->head != NULL; i++) fifo_push(to, fifo_pop(from));
}

/* The first house of l that no late message keeps busy, now CREATED; NULL
 * when there is none. A retired house that a message of an older
 * generation made ready is refusing it: it goes to the back. */
static sh_house *pop_usable(sh_hfree *l) {
  for (uint32_t tries = l->n; tries > 0; tries--) {
    sh_house *h = fifo_pop(l);
    SH_ASSERT(h != NULL);
    int s = SH_WAITING;
    /* seq_cst: against a late push's poke (house.c), which CASes from
     * WAITING too; one of the two wins. */
    if (sh_atomic_cas(&h->state, &s, SH_CREATED, memory_order_seq_cst,
                                                memory_order_seq_cst))
      return h;
    fifo_push(l, h);
  }
  return NULL;
}

/* ---- slabs --------------------------------------------------------------- */

/* A new slab's houses, retired before their first life, onto `to`;
 * false when out of memory. */
static bool slab_new(sh_system *sys, sh_hfree *to) {
  sh_fault_return_on("sh/house/slab", false);
  size_t size = sizeof(sh_hslab) + SH_SLAB_HOUSES * SH_HOUSE_STRIDE;
  sh_hslab *s = aligned_alloc(SH_HOUSE_ALIGN, size);
  if (s == NULL) return false;
  memset(s, 0, size);
  SH_MEM_FRESH(s, size); /* memory malloc may have had elsewhere (atomic.h) */
  for (uint32_t i = 0; i < SH_SLAB_HOUSES; i++) {
    sh_house *h = slab_house(s, i);
    SH_ASSERT(((uintptr_t)h & ~(uintptr_t)SH_TOKEN_HOUSE_MASK) == 0); /* fits a token */
    sh_house_init(h, sys, NULL, SH_WAITING);
    /* not yet live */
    sh_atomic_store(&h->life, sh_life(0, true) | SH_LIFE_VACANT, memory_order_relaxed);
    h->vacant = true;
    fifo_push(to, h);
  }
  sh_spin_lock(&sys->store_lock);
  if (sys->slabs_tail != NULL)
    sys->slabs_tail->next = s;
  else
    sys->slabs = s;
  sys->slabs_tail = s;
  sh_spin_unlock(&sys->store_lock);
  return true;
}

/* ---- taking and retiring ------------------------------------------------- */

/* The calling worker, if it is one of sys. */
static sh_worker *worker_of(sh_system *sys) {
  sh_worker *w = sh_worker_current();
  return w != NULL && w->sys == sys ? w : NULL;
}

static sh_house *take_on(sh_system *sys, sh_worker *w) {
  sh_house *h = pop_usable(&w->houses);
  if (h != NULL) return h;
  sh_spin_lock(&sys->store_lock);
  fifo_move(&sys->spare, &w->houses, SH_HSTORE_BATCH);
  sh_spin_unlock(&sys->store_lock);
  h = pop_usable(&w->houses);
  if (h == NULL && slab_new(sys, &w->houses)) h = pop_usable(&w->houses);
  SH_ASSERT(h == NULL || h->vacant); /* hstore.h: vacant until the spawn fills it */
  return h;
}

static sh_house *take_outside(sh_system *sys) {
  sh_spin_lock(&sys->store_lock);
  sh_house *h = pop_usable(&sys->spare);
  sh_spin_unlock(&sys->store_lock);
  if (h != NULL) return h;
  sh_hfree fresh = {0};
  if (!slab_new(sys, &fresh)) return NULL;
  h = fifo_pop(&fresh);
  /* relaxed: nobody else has seen a house of a new slab. */
  sh_atomic_store(&h->state, SH_CREATED, memory_order_relaxed);
  sh_spin_lock(&sys->store_lock);
  fifo_move(&fresh, &sys->spare, SH_SLAB_HOUSES);
  sh_spin_unlock(&sys->store_lock);
  SH_ASSERT(h->vacant && fresh.n == 0);
  return h;
}

sh_house *sh_hstore_take(sh_system *sys) {
  sh_worker *w = worker_of(sys);
  return w != NULL ? take_on(sys, w) : take_outside(sys);
}

/* h (vacant) onto the calling worker's list, the surplus to the spare
 * list; or straight to the spare list from a thread that is not a worker.
 * The surplus is a batch, or all that is past SH_HSTORE_KEEP when a take
 * that found none of the list's houses usable brought more. */
static void give(sh_house *h) {
  sh_system *sys = h->sys;
  sh_worker *w = worker_of(sys);
  if (w == NULL) {
    sh_spin_lock(&sys->store_lock);
    fifo_push(&sys->spare, h);
    sh_spin_unlock(&sys->store_lock);
    return;
  }
  fifo_push(&w->houses, h);
  if (w->houses.n <= SH_HSTORE_KEEP) return;
  uint32_t surplus = w->houses.n - SH_HSTORE_KEEP;
  sh_spin_lock(&sys->store_lock);
  fifo_move(&w->houses, &sys->spare, surplus > SH_HSTORE_BATCH ? surplus : SH_HSTORE_BATCH);
  sh_spin_unlock(&sys->store_lock);
  SH_ASSERT(w->houses.n <= SH_HSTORE_KEEP); /* hstore.h: what a worker keeps */
}

/* The generation moves on (still stopped: nobody may send to it until the
 * next spawn makes it live); false when its generations are used up and
 * the house must never be reused. release: a sender that sees the new
 * value sees the house as it was left. */
static bool next_generation(sh_house *h) {
  SH_ASSERT(h->vacant);
  uint32_t gen = sh_house_gen(h);
  if (gen >= SH_GEN_MAX) return false;
  sh_atomic_store(&h->life, sh_life(gen + 1, true) | SH_LIFE_VACANT, memory_order_release);
  return true;
}

sh_actor *sh_hstore_actor_new(sh_house *h, size_t size) {
  SH_ASSERT(size >= sizeof(sh_actor)); /* the class was checked at spawn */
  sh_actor *a = size <= SH_HOUSE_SMALL_ACTOR ? (sh_actor *)(void *)h->small_actor
                                             : sh_mem_alloc(size);
  if (a != NULL) memset(a, 0, size);
  return a;
}

void sh_hstore_actor_free(sh_house *h) {
  if ((void *)h->actor != (void *)h->small_actor) sh_mem_free(h->actor);
  h->actor = NULL;
}

void sh_hstore_untake(sh_house *h) {
  SH_ASSERT(sh_atomic_load(&h->state, memory_order_relaxed) == SH_CREATED);
  /* The spawn may have opened its gates, and a sender of an older
   * generation may even wait at one. */
  sh_house_close_gates(h, sh_house_gen(h));
  h->vacant = true;
  bool reuse = next_generation(h);
  /* seq_cst: a late push that saw CREATED did not queue it; from WAITING
   * on, it would. Look once more, as a settle does. */
  sh_atomic_store(&h->state, SH_WAITING, memory_order_seq_cst);
  if (sh_house_has_work(h)) sh_house_poke(h);
  if (reuse) give(h);
}

void sh_hstore_retire(sh_house *h, bool reuse) {
  SH_ASSERT(sh_house_stopped(h) && h->mounted && h->stop_done && !h->vacant);
  SH_ASSERT(sh_list_empty(&h->stacks) && sh_list_empty(&h->ready) && sh_list_empty(&h->timers));
  SH_ASSERT(sh_futtable_count(&h->futures) == 0 && h->stop_kept == 0);
  sh_hstore_actor_free(h);
  h->vacant = true;
  h->mounted = false;
  h->stop_done = false;
  h->barrier = false;
  if (reuse && next_generation(h)) give(h);
}

/* ---- walking and freeing ------------------------------------------------- */

void sh_hstore_each(sh_system *sys, void (*fn)(sh_house *h, void *arg), void *arg) {
  for (sh_hslab *s = sys->slabs; s != NULL; s = s->next)
    for (uint32_t i = 0; i < SH_SLAB_HOUSES; i++) fn(slab_house(s, i), arg);
}

uint64_t sh_hstore_count(sh_system *sys) {
  uint64_t n = 0;
  sh_hslab *last = NULL;
  sh_spin_lock(&sys->store_lock);
  for (sh_hslab *s = sys->slabs; s != NULL; s = s->next, n += SH_SLAB_HOUSES) last = s;
  SH_ASSERT(last == sys->slabs_tail); /* the list ends at its tail */
  sh_spin_unlock(&sys->store_lock);
  return n;
}

/* What a house still holds: messages, gates, its futures' table, its actor. */
static void house_release(sh_house *h, void *arg) {
  (void)arg;
  SH_ASSERT(h->vacant || h->actor != NULL); /* a house that is not vacant has an actor */
  sh_house_free_messages(h);
  for (int i = 0; i < SH_REQ_BOXES; i++) sh_gate_free(h->gate_mem[i]);
  sh_futtable_destroy(&h->futures);
  if (!h->vacant) sh_hstore_actor_free(h);
}

void sh_hstore_free(sh_system *sys) {
  sh_hstore_each(sys, house_release, NULL);
  sh_hslab *s = sys->slabs;
  while (s != NULL) {
    sh_hslab *next = s->next;
    SH_ASSERT(next != NULL || s == sys->slabs_tail);
    free(s);
    s = next;
  }
  sys->slabs = sys->slabs_tail = NULL;
}
