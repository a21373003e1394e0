/*
 * Per-worker, creator-affine, bounded object pools (interface in pool.h).
 *
 * Object layout. Every object starts with a 16-byte hidden header (its slab
 * and size class) and the caller gets the address just past it, so the
 * caller's pointer keeps the 16-byte alignment. The header never changes
 * after the slab is made: an object belongs to the pool that created its
 * slab for its whole life. While an object is free, its first body bytes hold
 * the free-list link (the body of the smallest class is 48 bytes). Objects
 * from a NULL pool or too large for a class have no slab and go straight
 * back to free().
 *
 * Slabs. A class grows by one malloc'd slab of SH_POOL_SLAB_BYTES at a time,
 * so a flood past the cache costs one malloc per slab, not per object. It
 * also makes ping-pong between workers reach a true steady state: the owner
 * needs as many objects as are in flight plus those a peer holds in its
 * outbox (up to SH_POOL_OUTBOX), and grown one object at a time it came up
 * one short whenever a full outbox met one message more in flight than ever
 * before, a coincidence that kept coming, rarely, long after warm-up. A slab
 * gives far more than that at once. A slab's header starts with what freeing
 * threads read (owner, class), never written after the slab is made; the
 * owner's bookkeeping (its free list, its links) is on the next cache line.
 *
 * Lists. Each slab has a free list; a class links the slabs that have a free
 * object (`partial`, doubly linked, owner only) and allocation takes from the
 * first. What other threads free comes back through poolreturn.c.
 *
 * Returning memory. A slab goes back to malloc when its last object comes
 * back while the class holds max_cached other free objects (so a flood's
 * slabs go as it drains, with one slab of hysteresis), and when an idle
 * class is trimmed (every free slab, while the class holds more than `keep`
 * free objects). A slab with one live object stays: memory after a flood is
 * bounded by the slabs that still hold live objects plus max_cached free
 * objects plus one slab per class (give checks the slabs all free: at most
 * one more than max_cached objects fill).
 *
 * Bounds. Every loop walks a slab (its objects) or a class's slabs
 * (nslabs), checked where it is walked; poolreturn.c's walk a taken return
 * stack or an outbox.
 *
 * Idle tracking. The pool has no clock: sh_pool_alloc and an owner's
 * sh_pool_free only mark the class "touched" (last_use_ns = SH_POOL_TOUCHED),
 * and sh_pool_trim, which is given the time, turns the mark into
 * last_use_ns = now. A class is thus seen as used at the first trim after its
 * real use, never earlier, so trimming is late by at most one trim period
 * and never premature (not checked: the period is the caller's, and the
 * pool has no clock). Returns from other threads do not count as use.
 */
#include "mem/pool.h"
#include "mem/poolslab.h"

#include "base/atomic.h"
#include "base/check.h"
#include <fiu-local.h>

#include "base/faults.h"
#include <stdlib.h>

#include "plat.h"

#if defined(__SANITIZE_ADDRESS__)
#define SH_POOL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SH_POOL_ASAN 1
#endif
#endif

#ifdef SH_POOL_ASAN
#include <sanitizer/asan_interface.h>
#endif

#define SH_POOL_TOUCHED UINT64_MAX           /* last_use_ns: used since the last trim */

_Static_assert((SH_POOL_MIN_CLASS << (SH_POOL_CLASSES - 1)) == SH_POOL_MAX_SIZE,
               "SH_POOL_CLASSES doubling classes from 64 must end at SH_POOL_MAX_SIZE");
_Static_assert(SH_POOL_SLAB_BYTES >= SH_POOL_SLAB_HDR + 2 * SH_POOL_MAX_SIZE,
               "a slab of the largest class must hold more than one object");

/* An owner-only counter: relaxed load and store, no read-modify-write. */
static void own_inc(atomic_uint_fast64_t *c) {
  sh_atomic_store(c, sh_atomic_load(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

static size_t class_size(uint32_t cls) { return (size_t)SH_POOL_MIN_CLASS << cls; }

uint32_t sh_pool_slab_objects(uint32_t cls) {
  return (uint32_t)((SH_POOL_SLAB_BYTES - SH_POOL_SLAB_HDR) / class_size(cls));
}

/* The smallest class whose objects hold size bytes plus the header, or
 * SH_POOL_PLAIN when none does. */
static uint32_t class_of(size_t size) {
  if (size > SH_POOL_MAX_SIZE - SH_POOL_HDR) return SH_POOL_PLAIN;
  size_t need = size + SH_POOL_HDR;
  uint32_t cls = 0;
  while (class_size(cls) < need) cls++; /* ends by the last class: need <= SH_POOL_MAX_SIZE */
  SH_DEBUG_ASSERT(cls < SH_POOL_CLASSES);
  return cls;
}

static void *body_of(sh_pool_obj *o) { return (char *)o + SH_POOL_HDR; }
static sh_pool_obj *obj_of(void *body) { return (sh_pool_obj *)((char *)body - SH_POOL_HDR); }

/*
 * Under ASan, what no caller may touch is poisoned: a free object's body past
 * its link, a live object's bytes past the size asked for. One malloc per
 * object let ASan see overflows and uses after free; objects side by side in
 * a slab would hide them otherwise. Elsewhere these do nothing.
 */
static void poison_free(sh_pool_obj *o) {
#ifdef SH_POOL_ASAN
  size_t link_end = SH_POOL_HDR + sizeof o->next;
  ASAN_POISON_MEMORY_REGION((char *)o + link_end, class_size(o->cls) - link_end);
#else
  (void)o;
#endif
}

static void unpoison_live(sh_pool_obj *o, size_t size) {
#ifdef SH_POOL_ASAN
  ASAN_UNPOISON_MEMORY_REGION(body_of(o), size);
#else
  (void)o;
  (void)size;
#endif
}

/* The partial list: slabs with a free object, the most recently refilled first. */
static void link_slab(sh_pool_class *c, sh_pool_slab *s) {
  SH_DEBUG_ASSERT(s->nfree > 0 && s != c->partial);
  s->prev = NULL;
  s->next = c->partial;
  if (c->partial) c->partial->prev = s;
  c->partial = s;
}

static void unlink_slab(sh_pool_class *c, sh_pool_slab *s) {
  SH_DEBUG_ASSERT(s->prev != NULL || c->partial == s); /* it is in the list */
  if (s->prev)
    s->prev->next = s->next;
  else
    c->partial = s->next;
  if (s->next) s->next->prev = s->prev;
}

/* A new slab for class cls, all its objects free, first in the partial list. */
static bool grow(sh_pool *p, uint32_t cls) {
  sh_pool_class *c = &p->cls[cls];
  uint32_t n = sh_pool_slab_objects(cls);
  size_t size = class_size(cls);
  SH_ASSERT(c->partial == NULL && c->nfree == 0); /* grown only when nothing is free */
  sh_pool_slab *s = aligned_alloc(SH_POOL_LINE, SH_POOL_SLAB_HDR + n * size);
  if (!s) return false;
  s->owner = p;
  s->cls = cls;
  s->nobj = n;
  s->free = NULL;
  /* Highest address first, so the list hands out the slab in address order. */
  for (uint32_t i = n; i-- > 0;) {
    sh_pool_obj *o = (sh_pool_obj *)((char *)s + SH_POOL_SLAB_HDR + i * size);
    o->slab = s;
    o->cls = cls;
    o->state = SH_POOL_FREE;
    o->next = s->free;
    s->free = o;
    poison_free(o);
  }
  s->nfree = n;
  link_slab(c, s);
  c->nfree += n;
  c->nslabs++;
  c->nspare++;
  own_inc(&p->mallocs);
  return true;
}

/* Gives slab s (all its objects free) back to malloc. */
static void release(sh_pool *p, sh_pool_class *c, sh_pool_slab *s) {
  SH_ASSERT(s->nfree == s->nobj);
  unlink_slab(c, s);
  c->nfree -= s->nobj;
  c->nslabs--;
  c->nspare--;
  own_inc(&p->slab_frees);
  free(s);
}

/* Owner only: an object of the first partial slab (there must be one). */
static sh_pool_obj *take(sh_pool_class *c) {
  sh_pool_slab *s = c->partial;
  sh_pool_obj *o = s->free;
  SH_DEBUG_ASSERT(o != NULL && s->nfree > 0 && c->nfree > 0);
  if (s->nfree == s->nobj) c->nspare--;
  s->free = o->next;
  s->nfree--;
  c->nfree--;
  if (s->nfree == 0) unlink_slab(c, s);
  return o;
}

/* Owner only: o back on its slab; the slab back to malloc once all its
 * objects are free and the class has max_cached others. */
static void give(sh_pool *p, sh_pool_class *c, sh_pool_obj *o) {
  sh_pool_slab *s = o->slab;
  SH_DEBUG_ASSERT(s->nfree < s->nobj); /* a slab takes back only what it gave */
  o->next = s->free;
  s->free = o;
  s->nfree++;
  c->nfree++;
  if (s->nfree == 1) link_slab(c, s);
  if (s->nfree < s->nobj) return;
  c->nspare++;
  uint32_t per = s->nobj; /* s may go */
  if (c->nfree - per >= p->max_cached) release(p, c, s);
  /* What the class keeps in slabs all free: max_cached objects, and a slab. */
  SH_DEBUG_ASSERT(c->nspare == 0 || (uint64_t)(c->nspare - 1) * per <= p->max_cached);
}

/*
 * Owner only: moves everything other threads returned to class c back onto
 * its slabs. Bounded by the stack it takes, which holds only objects of this
 * pool's slabs.
 */
static void drain_remote(sh_pool *p, sh_pool_class *c) {
  /* relaxed: only a hint that spares the exchange (a write to a shared cache
   * line) when nothing came back. Only the owner empties the stack, so a
   * non-NULL head stays non-NULL until our exchange; a push we miss is taken
   * on the next drain. */
  if (sh_atomic_load(&c->remote, memory_order_relaxed) == NULL) return;
  /* acquire: pairs with the pushers' release CAS, so their writes of o->next
   * (and of the header state) are visible before we walk the list. Nothing of
   * ours needs publishing (pushers never read through the head), so no release. */
  SH_YIELD("pool.remote.take");
  sh_pool_obj *o = sh_atomic_exchange(&c->remote, NULL, memory_order_acquire);
  uint64_t most = (uint64_t)c->nslabs * sh_pool_slab_objects((uint32_t)(c - p->cls)) - c->nfree;
  for (uint64_t n = 1; o; n++) {
    SH_MEM_RECEIVE(o, "a pool object another thread gave back");
    sh_pool_obj *next = o->next;
    SH_ASSERT(n <= most); /* only objects of our slabs that are not free come back */
    SH_ASSERT(o->slab->owner == p && o->state == SH_POOL_FREE);
    give(p, c, o);
    o = next;
  }
}

/* Owner only: gives back every slab of c whose objects are all free, while
 * c holds more than `keep` free objects. Bounded by the class's slabs. */
static void release_free_slabs(sh_pool *p, sh_pool_class *c, uint32_t keep) {
  sh_pool_slab *s = c->partial;
  uint32_t slabs = c->nslabs, walked = 0;
  while (s && c->nfree > keep) {
    SH_ASSERT(++walked <= slabs);
    sh_pool_slab *next = s->next;
    if (s->nfree == s->nobj) release(p, c, s);
    s = next;
  }
}

/* A caller-visible object that malloc alone manages (no slab). */
static void *alloc_plain(size_t size) {
  if (size > SIZE_MAX - SH_POOL_HDR) return NULL;
  size_t n = SH_POOL_HDR + size;
  /* Never smaller than the struct we access it through, even for tiny sizes. */
  if (n < sizeof(sh_pool_obj)) n = sizeof(sh_pool_obj);
  sh_pool_obj *o = malloc(n);
  if (!o) return NULL;
  o->slab = NULL;
  o->cls = SH_POOL_PLAIN;
  o->state = SH_POOL_LIVE;
  /* malloc's own locks order its free before this: the simulator's memory
   * model cannot see them, so it is told. */
  SH_MEM_FRESH(body_of(o), size);
  return body_of(o);
}

void sh_pool_init(sh_pool *p, uint32_t max_cached, uint32_t keep, uint64_t idle_ns) {
  for (uint32_t i = 0; i < SH_POOL_CLASSES; i++) {
    sh_pool_class *c = &p->cls[i];
    c->partial = NULL;
    c->nfree = 0;
    c->nslabs = 0;
    c->nspare = 0;
    /* 0: a class nobody has used counts as idle (it holds nothing anyway). */
    c->last_use_ns = 0;
    sh_atomic_init(&c->nout, 0);
    c->out_owner = NULL;
    c->out_head = c->out_tail = NULL;
    sh_atomic_init(&c->remote, NULL);
  }
  p->max_cached = max_cached;
  p->keep = keep;
  p->idle_ns = idle_ns;
  sh_atomic_init(&p->allocs, 0);
  sh_atomic_init(&p->mallocs, 0);
  sh_atomic_init(&p->slab_frees, 0);
  sh_atomic_init(&p->local_frees, 0);
  sh_atomic_init(&p->remote_frees, 0);
}

/*
 * Frees every free slab and leaves p valid, counters kept: a late
 * sh_pool_free of an outstanding object followed by another destroy is
 * still clean.
 */
void sh_pool_destroy(sh_pool *p) {
  sh_pool_flush(p);
  for (uint32_t i = 0; i < SH_POOL_CLASSES; i++) {
    sh_pool_class *c = &p->cls[i];
    drain_remote(p, c);
    release_free_slabs(p, c, 0);
  }
}

void *sh_pool_alloc(sh_pool *p, size_t size) {
  /* Fault point: the pool cannot grow (malloc failed). */
  sh_fault_return_on("sh/pool/alloc", NULL);
  uint32_t cls = class_of(size);
  if (!p || cls == SH_POOL_PLAIN) return alloc_plain(size);

  sh_pool_class *c = &p->cls[cls];
  /* Own slabs first; only when they are all taken pay for the shared remote stack. */
  if (!c->partial) drain_remote(p, c);
  if (!c->partial && !grow(p, cls)) return NULL;
  sh_pool_obj *o = take(c);
  SH_ASSERT(o->slab->owner == p && o->cls == cls && o->state == SH_POOL_FREE);
  o->state = SH_POOL_LIVE;
  unpoison_live(o, size);
  c->last_use_ns = SH_POOL_TOUCHED;
  own_inc(&p->allocs);
  /* A new life: its last one's stores are no value to read (atomic.h). */
  SH_MEM_FRESH(body_of(o), size);
  return body_of(o);
}

/* The owner frees its own object: no atomics at all. */
static void free_local(sh_pool *p, sh_pool_obj *o) {
  sh_pool_class *c = &p->cls[o->cls];
  own_inc(&p->local_frees);
  c->last_use_ns = SH_POOL_TOUCHED;
  give(p, c, o);
}

void sh_pool_free(sh_pool *self, void *obj) {
  if (!obj) return;
  sh_pool_obj *o = obj_of(obj);
  SH_ASSERT(o->state == SH_POOL_LIVE && "double free, or not a pool object");
  o->state = SH_POOL_FREE;
  if (!o->slab) {
    SH_ASSERT(o->cls == SH_POOL_PLAIN && "corrupt pool header");
    free(o);
    return;
  }
  SH_ASSERT(o->cls < SH_POOL_CLASSES && "corrupt pool header");
  poison_free(o);
  sh_pool *owner = o->slab->owner;
  if (owner == self)
    free_local(self, o);
  else if (self != NULL)
    sh_pool_free_foreign(self, o);
  else
    sh_pool_push_remote(owner, o->cls, o, o, 1); /* a thread with no pool: no outbox */
}

/* Whether trimming class c would give memory back: a slab of it is free
 * and the class holds more than `keep` free objects. (Free objects in slabs
 * that also hold live ones cannot go back; waking up for them would spin.) */
static bool trimmable(const sh_pool *p, const sh_pool_class *c) {
  return c->nspare > 0 && c->nfree > p->keep;
}

uint64_t sh_pool_trim(sh_pool *p, uint64_t now_ns) {
  uint64_t next = UINT64_MAX;
  sh_pool_flush(p);
  for (uint32_t i = 0; i < SH_POOL_CLASSES; i++) {
    sh_pool_class *c = &p->cls[i];
    drain_remote(p, c);
    if (c->last_use_ns == SH_POOL_TOUCHED) {
      c->last_use_ns = now_ns; /* used since the last trim: its idle time starts now */
    } else if (now_ns >= c->last_use_ns && now_ns - c->last_use_ns >= p->idle_ns &&
               trimmable(p, c)) {
      release_free_slabs(p, c, p->keep);
    }
    if (trimmable(p, c)) {
      uint64_t due = c->last_use_ns + p->idle_ns;
      if (due < c->last_use_ns) due = UINT64_MAX; /* overflow: never */
      if (due < next) next = due;
    }
  }
  return next;
}

uint64_t sh_pool_outstanding(const sh_pool *p) {
  /* relaxed: a statistic; exact when no thread frees concurrently, as documented. */
  uint64_t remote = sh_atomic_load(&p->remote_frees, memory_order_relaxed);
  return sh_atomic_load(&p->allocs, memory_order_relaxed) -
         sh_atomic_load(&p->local_frees, memory_order_relaxed) - remote;
}
