/*
 * Per-worker, creator-affine, bounded object pools (interface in pool.h).
 *
 * Object layout. Every object starts with a 16-byte hidden header (its owner
 * pool and size class) and the caller gets the address just past it, so the
 * caller's pointer keeps malloc's 16-byte alignment. The header never changes
 * after the object is first taken from malloc: an object belongs to the pool
 * that created it for its whole life. While an object is free, its first body
 * bytes hold the free-list link (the body of the smallest class is 48 bytes).
 * Objects from a NULL pool or too large for a class carry owner NULL and go
 * straight back to free().
 *
 * Lists. Each class has two lists: `free`, touched only by the owner, and
 * `remote`, a Treiber stack onto which other threads push the objects they
 * free. The owner never pops single objects from `remote`: it takes the whole
 * stack at once (atomic exchange) and walks it privately.
 *
 * Bounds. `free` never holds more than max_cached objects; `remote` holds at
 * most max_cached plus one batch (a pusher reserves room in nremote before
 * pushing and frees to malloc when none is left); an outbox holds at most
 * SH_POOL_OUTBOX. Every loop over a list is bounded by those.
 *
 * Idle tracking. The pool has no clock: sh_pool_alloc and an owner's
 * sh_pool_free only mark the class "touched" (last_use_ns = SH_POOL_TOUCHED),
 * and sh_pool_trim, which is given the time, turns the mark into
 * last_use_ns = now. A class is thus seen as used at the first trim after its
 * real use, never earlier, so trimming is late by at most one trim period
 * and never premature. Returns from other threads do not count as use.
 */
#include "pool.h"

#include "check.h"
#include <fiu-local.h>
#include <stdlib.h>

#include "plat.h"

#define SH_POOL_MIN_CLASS 64u                /* smallest class, object + header */
#define SH_POOL_PLAIN SH_POOL_CLASSES        /* class index of a plain malloc object */
#define SH_POOL_TOUCHED UINT64_MAX           /* last_use_ns: used since the last trim */
#define SH_POOL_LIVE 0x5ca1ab1eu             /* state: handed out to a caller */
#define SH_POOL_FREE 0xf7eef7eeu             /* state: cached, or being returned */

struct sh_pool_obj {
  sh_pool *owner;  /* creating pool; NULL for a plain malloc object */
  uint32_t cls;    /* size class; SH_POOL_PLAIN for a plain malloc object */
  uint32_t state;  /* SH_POOL_LIVE / SH_POOL_FREE: catches double and stray frees */
  /* Free-list link. It overlays the first bytes of the caller's body, so it is
   * only meaningful while the object is free. _Alignas pins it (and with it
   * the body) at offset 16 on every ABI. */
  _Alignas(16) sh_pool_obj *next;
};

#define SH_POOL_HDR offsetof(sh_pool_obj, next)

_Static_assert(SH_POOL_HDR == 16, "the header must keep the body 16-byte aligned");
_Static_assert((SH_POOL_MIN_CLASS << (SH_POOL_CLASSES - 1)) == SH_POOL_MAX_SIZE,
               "SH_POOL_CLASSES doubling classes from 64 must end at SH_POOL_MAX_SIZE");

/* An owner-only counter: relaxed load and store, no read-modify-write. */
static void own_inc(atomic_uint_fast64_t *c) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

static size_t class_size(uint32_t cls) { return (size_t)SH_POOL_MIN_CLASS << cls; }

/* The smallest class whose objects hold size bytes plus the header, or
 * SH_POOL_PLAIN when none does. */
static uint32_t class_of(size_t size) {
  if (size > SH_POOL_MAX_SIZE - SH_POOL_HDR) return SH_POOL_PLAIN;
  size_t need = size + SH_POOL_HDR;
  uint32_t cls = 0;
  while (class_size(cls) < need) cls++; /* ends by the last class: need <= SH_POOL_MAX_SIZE */
  return cls;
}

static void *body_of(sh_pool_obj *o) { return (char *)o + SH_POOL_HDR; }
static sh_pool_obj *obj_of(void *body) { return (sh_pool_obj *)((char *)body - SH_POOL_HDR); }

/* Owner-only free list: plain pushes and pops. */
static void push_local(sh_pool_class *c, sh_pool_obj *o) {
  o->next = c->free;
  c->free = o;
  c->nfree++;
}

static sh_pool_obj *pop_local(sh_pool_class *c) {
  sh_pool_obj *o = c->free;
  if (o) {
    c->free = o->next;
    c->nfree--;
  }
  return o;
}

/* Caches o on its owner's free list, or gives it back to malloc at the bound. */
static void cache_or_free(const sh_pool *p, sh_pool_class *c, sh_pool_obj *o) {
  if (c->nfree < p->max_cached)
    push_local(c, o);
  else
    free(o);
}

/*
 * Owner only: moves everything other threads returned to class c onto its free
 * list (the excess over max_cached goes back to malloc). Bounded by the stack
 * it takes, which holds at most max_cached objects.
 */
static void drain_remote(sh_pool *p, sh_pool_class *c) {
  /* relaxed: only a hint that spares the exchange (a write to a shared cache
   * line) when nothing came back. Only the owner empties the stack, so a
   * non-NULL head stays non-NULL until our exchange; a push we miss is taken
   * on the next drain. */
  if (atomic_load_explicit(&c->remote, memory_order_relaxed) == NULL) return;
  /* acquire: pairs with the pushers' release CAS, so their writes of o->next
   * (and of the header state) are visible before we walk the list. Nothing of
   * ours needs publishing (pushers never read through the head), so no release. */
  SH_YIELD("pool.remote.take");
  sh_pool_obj *o = atomic_exchange_explicit(&c->remote, NULL, memory_order_acquire);
  uint_fast32_t n = 0;
  while (o) {
    sh_pool_obj *next = o->next;
    SH_ASSERT(o->owner == p && o->state == SH_POOL_FREE);
    cache_or_free(p, c, o);
    n++;
    o = next;
  }
  /* relaxed: nremote is only a bound and publishes nothing. It cannot wrap:
   * each pusher incremented it before its release push, and our acquire
   * exchange read those pushes, so all n increments precede this decrement. */
  atomic_fetch_sub_explicit(&c->nremote, n, memory_order_relaxed);
}

/* A caller-visible object that malloc alone manages (owner NULL). */
static void *alloc_plain(size_t size) {
  if (size > SIZE_MAX - SH_POOL_HDR) return NULL;
  size_t n = SH_POOL_HDR + size;
  /* Never smaller than the struct we access it through, even for tiny sizes. */
  if (n < sizeof(sh_pool_obj)) n = sizeof(sh_pool_obj);
  sh_pool_obj *o = malloc(n);
  if (!o) return NULL;
  o->owner = NULL;
  o->cls = SH_POOL_PLAIN;
  o->state = SH_POOL_LIVE;
  return body_of(o);
}

void sh_pool_init(sh_pool *p, uint32_t max_cached, uint32_t keep, uint64_t idle_ns) {
  for (uint32_t i = 0; i < SH_POOL_CLASSES; i++) {
    sh_pool_class *c = &p->cls[i];
    c->free = NULL;
    c->nfree = 0;
    /* 0: a class nobody has used counts as idle (it holds nothing anyway). */
    c->last_use_ns = 0;
    atomic_init(&c->nout, 0);
    c->out_owner = NULL;
    c->out_head = c->out_tail = NULL;
    atomic_init(&c->remote, NULL);
    atomic_init(&c->nremote, 0);
  }
  p->max_cached = max_cached;
  p->keep = keep;
  p->idle_ns = idle_ns;
  atomic_init(&p->allocs, 0);
  atomic_init(&p->mallocs, 0);
  atomic_init(&p->local_frees, 0);
  atomic_init(&p->remote_frees, 0);
}

/*
 * Frees every cached object and leaves p empty but valid, counters kept: a
 * late sh_pool_free of an outstanding object followed by another destroy is
 * still clean.
 */
void sh_pool_destroy(sh_pool *p) {
  sh_pool_flush(p);
  for (uint32_t i = 0; i < SH_POOL_CLASSES; i++) {
    sh_pool_class *c = &p->cls[i];
    drain_remote(p, c);
    sh_pool_obj *o;
    SH_ASSERT(c->nfree <= p->max_cached);
    while ((o = pop_local(c)) != NULL) free(o); /* bounded: nfree <= max_cached */
  }
}

void *sh_pool_alloc(sh_pool *p, size_t size) {
  /* Fault point: the pool cannot grow (malloc failed). */
  fiu_return_on("sh/pool/alloc", NULL);
  uint32_t cls = class_of(size);
  if (!p || cls == SH_POOL_PLAIN) return alloc_plain(size);

  sh_pool_class *c = &p->cls[cls];
  /* Local list first; only when it is empty pay for the shared remote stack. */
  if (!c->free) drain_remote(p, c);
  sh_pool_obj *o = pop_local(c);
  if (!o) {
    o = malloc(class_size(cls));
    if (!o) return NULL;
    o->owner = p;
    o->cls = cls;
    own_inc(&p->mallocs);
  }
  SH_ASSERT(o->owner == p && o->cls == cls);
  o->state = SH_POOL_LIVE;
  c->last_use_ns = SH_POOL_TOUCHED;
  own_inc(&p->allocs);
  return body_of(o);
}

/* The owner frees its own object: no atomics at all. */
static void free_local(sh_pool *p, sh_pool_obj *o) {
  sh_pool_class *c = &p->cls[o->cls];
  own_inc(&p->local_frees);
  c->last_use_ns = SH_POOL_TOUCHED;
  cache_or_free(p, c, o);
}

/*
 * Another thread (a worker or not) returns the chain head..tail (n objects of
 * one class) to their owner. The remote stack only sees pushes from any
 * thread and a take-all exchange by its single owner; no thread ever pops
 * one node or reads through the head it sees, so there is no ABA problem: a
 * CAS that succeeds links the chain to whatever is the head at that instant,
 * which is exactly right even if that head was taken and pushed again.
 */
static void push_remote(sh_pool *owner, uint32_t cls, sh_pool_obj *head, sh_pool_obj *tail,
                        uint32_t n) {
  sh_pool_class *c = &owner->cls[cls];
  /* relaxed: a statistic, exact once the freeing threads are joined. */
  atomic_fetch_add_explicit(&owner->remote_frees, n, memory_order_relaxed);
  /* Reserve before pushing, so the stack stays bounded (max_cached plus one
   * batch) and the owner's decrement never runs ahead of our increment.
   * relaxed: only a bound, it publishes nothing (the push below does). */
  if (atomic_fetch_add_explicit(&c->nremote, n, memory_order_relaxed) >= owner->max_cached) {
    /* relaxed: undoes our own reservation (same reasoning). */
    atomic_fetch_sub_explicit(&c->nremote, n, memory_order_relaxed);
    /* Bounded memory: the owner has enough coming back. The chain is at
     * most one outbox long. */
    for (uint32_t i = 0; i < n; i++) {
      sh_pool_obj *next = head->next; /* the tail's link is not set: never followed */
      free(head);
      head = next;
    }
    return;
  }
  /* relaxed: we only store the head as our link, never read through it. */
  sh_pool_obj *top = atomic_load_explicit(&c->remote, memory_order_relaxed);
  do {
    SH_YIELD("pool.remote.push");
    tail->next = top;
    /* success release: our writes of the links and states (and the callers'
     * of the bodies) become visible to the owner's acquire exchange.
     * failure relaxed: we just retry with the new head. Lock-free: a failed
     * CAS means another push succeeded. */
  } while (!atomic_compare_exchange_weak_explicit(&c->remote, &top, head, memory_order_release,
                                                  memory_order_relaxed));
}

/* nout has one writer, the pool's owner: a relaxed load and store. */
static uint32_t nout(const sh_pool_class *c) {
  return (uint32_t)atomic_load_explicit(&c->nout, memory_order_relaxed);
}
static void set_nout(sh_pool_class *c, uint32_t n) {
  atomic_store_explicit(&c->nout, n, memory_order_relaxed);
}

static void flush_class(sh_pool_class *c, uint32_t cls) {
  uint32_t n = nout(c);
  if (n == 0) return;
  push_remote(c->out_owner, cls, c->out_head, c->out_tail, n);
  c->out_head = c->out_tail = NULL;
  set_nout(c, 0);
}

/* A worker frees another pool's object: batch it per class and owner, so
 * the owner's shared line is touched once per SH_POOL_OUTBOX objects. */
static void free_foreign(sh_pool *self, sh_pool_obj *o) {
  sh_pool_class *c = &self->cls[o->cls];
  if (nout(c) > 0 && c->out_owner != o->owner) flush_class(c, o->cls);
  c->out_owner = o->owner;
  o->next = c->out_head;
  if (c->out_head == NULL) c->out_tail = o;
  c->out_head = o;
  uint32_t n = nout(c) + 1;
  set_nout(c, n);
  if (n == SH_POOL_OUTBOX) flush_class(c, o->cls);
}

void sh_pool_flush(sh_pool *p) {
  for (uint32_t i = 0; i < SH_POOL_CLASSES; i++) flush_class(&p->cls[i], i);
}

void sh_pool_free(sh_pool *self, void *obj) {
  if (!obj) return;
  sh_pool_obj *o = obj_of(obj);
  SH_ASSERT(o->state == SH_POOL_LIVE && "double free, or not a pool object");
  o->state = SH_POOL_FREE;
  if (!o->owner) {
    SH_ASSERT(o->cls == SH_POOL_PLAIN && "corrupt pool header");
    free(o);
    return;
  }
  SH_ASSERT(o->cls < SH_POOL_CLASSES && "corrupt pool header");
  if (o->owner == self)
    free_local(self, o);
  else if (self != NULL)
    free_foreign(self, o);
  else
    push_remote(o->owner, o->cls, o, o, 1); /* a thread with no pool: no outbox */
}

uint64_t sh_pool_trim(sh_pool *p, uint64_t now_ns) {
  uint64_t next = UINT64_MAX;
  sh_pool_flush(p);
  for (uint32_t i = 0; i < SH_POOL_CLASSES; i++) {
    sh_pool_class *c = &p->cls[i];
    drain_remote(p, c);
    if (c->last_use_ns == SH_POOL_TOUCHED) {
      c->last_use_ns = now_ns; /* used since the last trim: its idle time starts now */
    } else if (now_ns >= c->last_use_ns && now_ns - c->last_use_ns >= p->idle_ns) {
      SH_ASSERT(c->nfree <= p->max_cached);
      while (c->nfree > p->keep) free(pop_local(c)); /* bounded: nfree <= max_cached */
    }
    if (c->nfree > p->keep) {
      uint64_t due = c->last_use_ns + p->idle_ns;
      if (due < c->last_use_ns) due = UINT64_MAX; /* overflow: never */
      if (due < next) next = due;
    }
  }
  return next;
}

uint64_t sh_pool_in_outboxes(const sh_pool *p) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < SH_POOL_CLASSES; i++) n += nout(&p->cls[i]);
  return n;
}

uint64_t sh_pool_outstanding(const sh_pool *p) {
  /* relaxed: a statistic; exact when no thread frees concurrently, as documented. */
  uint64_t remote = atomic_load_explicit(&p->remote_frees, memory_order_relaxed);
  return atomic_load_explicit(&p->allocs, memory_order_relaxed) -
         atomic_load_explicit(&p->local_frees, memory_order_relaxed) - remote;
}
