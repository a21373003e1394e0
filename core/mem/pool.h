/*
 * Per-worker, creator-affine, bounded object pools.
 *
 * Every worker owns one sh_pool. Objects come from malloc in slabs (many
 * objects of one size class per call) and every object carries a small
 * hidden header naming its slab, hence its owner pool and class. Freeing on
 * the owner puts it back on its slab's free list; freeing on any other
 * thread hands it back to the owner through a lock-free return stack that
 * only the owner drains, so no object ever enters a foreign pool and
 * ping-pong traffic between two workers reaches a steady state with no malloc
 * at all. A worker returns foreign objects in batches: per class it collects
 * up to SH_POOL_OUTBOX objects of one owner and pushes them with one atomic
 * operation; sh_pool_flush (run when the worker idles) sends the rest.
 * A slab goes back to malloc when all its objects are free and the class
 * holds max_cached other free objects, or when an idle class is trimmed.
 * Threads that are not workers allocate with plain malloc.
 */
#ifndef SH_POOL_H
#define SH_POOL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Size classes: 64, 128, ..., 8192 bytes (object + hidden header). Larger
 * objects are plain malloc, still freed through sh_pool_free. */
#define SH_POOL_CLASSES 8
#define SH_POOL_MAX_SIZE 8192

typedef struct sh_pool_obj sh_pool_obj;
typedef struct sh_pool_slab sh_pool_slab;
typedef struct sh_pool sh_pool;

/* Foreign objects a pool's owner freed, on their way back in one batch. */
#define SH_POOL_OUTBOX 32

typedef struct sh_pool_class {
  /* The owner's line. */
  sh_pool_slab *partial;       /* owner only: the slabs with a free object */
  uint32_t nfree;              /* free objects in those slabs */
  uint32_t nslabs;             /* slabs of this class, bounds walks over them */
  uint32_t nspare;             /* slabs of this class with every object free */
  atomic_uint_fast32_t nout;   /* length of the outbox (owner writes; statistics read) */
  uint64_t last_use_ns;        /* for idle trimming */
  sh_pool *out_owner;          /* the pool the outbox's objects go back to */
  sh_pool_obj *out_head, *out_tail;
  /* Returns from other threads, on a line of their own so that pushes do
   * not take the owner's line away on every allocation. */
  _Alignas(64) sh_pool_obj *_Atomic remote; /* Treiber push, owner takes all */
} sh_pool_class;

struct sh_pool {
  sh_pool_class cls[SH_POOL_CLASSES];
  uint32_t max_cached;        /* a free slab goes once its class has this many other free objects */
  uint32_t keep;              /* a trim frees slabs while its class has more free objects */
  uint64_t idle_ns;           /* a class untouched this long is trimmed */
  /* Counters. allocs/mallocs/slab_frees/local_frees have one writer, the
   * owner (a relaxed load + store: no locked instruction), and are atomic
   * only so that statistics may read them while it runs; remote_frees is
   * counted by the freeing threads. outstanding = allocs - local_frees -
   * remote_frees; slabs held = mallocs - slab_frees. */
  atomic_uint_fast64_t allocs;
  atomic_uint_fast64_t mallocs;    /* slabs taken from malloc */
  atomic_uint_fast64_t slab_frees; /* slabs given back to malloc */
  atomic_uint_fast64_t local_frees;
  _Alignas(64) atomic_uint_fast64_t remote_frees; /* counted per batch by the senders */
};

void sh_pool_init(sh_pool *p, uint32_t max_cached, uint32_t keep, uint64_t idle_ns);
/* Returns every slab whose objects are all free to malloc. Slabs with objects
 * still outstanding stay allocated (those objects are counted by
 * sh_pool_outstanding; freeing them later and destroying again returns their
 * slabs). Owner or after join. */
void sh_pool_destroy(sh_pool *p);

/* Allocates size bytes (not zeroed) from pool p, the caller's own pool; p NULL
 * means plain malloc. NULL when out of memory. */
void *sh_pool_alloc(sh_pool *p, size_t size);
/* Frees obj; `self` is the caller's own pool or NULL when the caller is not a
 * worker. NULL obj is a no-op. */
void sh_pool_free(sh_pool *self, void *obj);

/* Owner only: sends every outbox's objects back to their owners now. */
void sh_pool_flush(sh_pool *p);
/* Owner only: flushes the outboxes, moves returned objects back to the free
 * lists, then gives back to malloc the free slabs of every class untouched
 * for idle_ns, as long as the class keeps more than `keep` free objects.
 * now_ns from sh_plat_now_ns.
 * Returns when a later trim could free more (UINT64_MAX: nothing left to
 * trim), so that a sleeping owner can wake up for it. */
uint64_t sh_pool_trim(sh_pool *p, uint64_t now_ns);
/* Objects of class cls (0 .. SH_POOL_CLASSES - 1) that one slab, one malloc,
 * holds. */
uint32_t sh_pool_slab_objects(uint32_t cls);
/* Objects allocated from p and not yet freed (exact when no thread frees
 * concurrently; objects still in another pool's outbox count as not freed). */
uint64_t sh_pool_outstanding(const sh_pool *p);
/* Foreign objects p freed that wait in its outboxes: with them, the sum of
 * outstanding objects over all pools is exact without flushing. */
uint64_t sh_pool_in_outboxes(const sh_pool *p);

#endif
