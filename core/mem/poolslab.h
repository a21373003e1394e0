/*
 * What the two halves of the pool share (pool.h is its interface): an
 * object's hidden header and a slab's, and the steps each half takes of
 * the other's. pool.c makes slabs, allocates, takes its owner's frees and
 * trims; poolreturn.c brings back what other threads free. The object and
 * slab layout is pool.c's file comment.
 */
#ifndef SH_POOLSLAB_H
#define SH_POOLSLAB_H

#include <stddef.h>
#include <stdint.h>

struct sh_pool;
struct sh_pool_class;

#define SH_POOL_MIN_CLASS 64u                /* smallest class, object + header */
#define SH_POOL_PLAIN SH_POOL_CLASSES        /* class index of a plain malloc object */
#define SH_POOL_LIVE 0x5ca1ab1eu             /* state: handed out to a caller */
#define SH_POOL_FREE 0xf7eef7eeu             /* state: cached, or being returned */
/* A slab's size: 510 objects of 64 B, 3 of 8 KiB. Large enough that in the
 * classes messages use its objects far outnumber what a peer's outbox
 * (SH_POOL_OUTBOX) and the messages in flight hold, small enough that a
 * class in light use holds little. */
#define SH_POOL_SLAB_BYTES 32768u
#define SH_POOL_LINE 64u

struct sh_pool_obj {
  struct sh_pool_slab *slab; /* creating slab; NULL for a plain malloc object */
  uint32_t cls;              /* size class; SH_POOL_PLAIN for a plain malloc object */
  uint32_t state;            /* SH_POOL_LIVE / SH_POOL_FREE: catches double and stray frees */
  /* Free-list link. It overlays the first bytes of the caller's body, so it is
   * only meaningful while the object is free. _Alignas pins it (and with it
   * the body) at offset 16 on every ABI. */
  _Alignas(16) struct sh_pool_obj *next;
};

struct sh_pool_slab {
  /* Read by every thread that frees one of the slab's objects. */
  struct sh_pool *owner;
  uint32_t cls;
  uint32_t nobj;
  /* The owner's, on a line of its own (the slab is line-aligned). */
  _Alignas(SH_POOL_LINE) struct sh_pool_obj *free;
  uint32_t nfree;                   /* length of free */
  struct sh_pool_slab *prev, *next; /* in the class's partial list while nfree > 0 */
};

#define SH_POOL_HDR offsetof(struct sh_pool_obj, next)
/* The objects follow the slab header, each at a multiple of its class size. */
#define SH_POOL_SLAB_HDR sizeof(struct sh_pool_slab)

_Static_assert(SH_POOL_HDR == 16, "the header must keep the body 16-byte aligned");
_Static_assert(SH_POOL_SLAB_HDR % SH_POOL_LINE == 0, "objects must start line-aligned");

/* A worker frees another pool's object o: into its outbox (poolreturn.c). */
void sh_pool_free_foreign(struct sh_pool *self, struct sh_pool_obj *o);
/* Returns the chain head..tail, n objects of class cls, to owner's remote
 * stack; any thread (poolreturn.c). */
void sh_pool_push_remote(struct sh_pool *owner, uint32_t cls, struct sh_pool_obj *head,
                         struct sh_pool_obj *tail, uint32_t n);

#endif
