/*
 * Objects coming back to their pool from other threads (pool.h): the
 * outboxes a worker fills with other pools' objects and the remote stack each
 * class has.
 *
 * Other threads push the objects they free onto the class's `remote`
 * Treiber stack; the owner never pops single objects from it: it takes the
 * whole stack at once (atomic exchange) and walks it privately. A worker
 * batches what it frees of another pool per class and owner, in an outbox
 * of at most SH_POOL_OUTBOX objects, pushed with one atomic operation.
 * (The owner's drain of the stack is pool.c's: it gives objects back to
 * their slabs, so that calls go one way, pool.c to this file.)
 */
#include "mem/pool.h"
#include "mem/poolslab.h"

#include "base/atomic.h"
#include "base/check.h"
#include "plat.h"

/*
 * Another thread (a worker or not) returns the chain head..tail (n objects of
 * one class) to their owner. The remote stack only sees pushes from any
 * thread and a take-all exchange by its single owner; no thread ever pops
 * one node or reads through the head it sees, so there is no ABA problem: a
 * CAS that succeeds links the chain to whatever is the head at that instant,
 * which is exactly right even if that head was taken and pushed again. The
 * stack needs no bound of its own: it holds objects of the owner's slabs,
 * which exist anyway, and the owner gives their slabs back once it drains.
 */
void sh_pool_push_remote(sh_pool *owner, uint32_t cls, sh_pool_obj *head, sh_pool_obj *tail,
                         uint32_t n) {
  sh_pool_class *c = &owner->cls[cls];
  /* relaxed: a statistic, exact once the freeing threads are joined. */
  sh_atomic_fetch_add(&owner->remote_frees, n, memory_order_relaxed);
  /* relaxed: we only store the head as our link, never read through it. */
  sh_pool_obj *top = sh_atomic_load(&c->remote, memory_order_relaxed);
  do {
    SH_YIELD("pool.remote.push");
    tail->next = top;
    SH_MEM_HANDOFF(tail); /* and the others since sh_pool_free_foreign */
    /* success release: our writes of the links and states (and the callers'
     * of the bodies) become visible to the owner's acquire exchange.
     * failure relaxed: we just retry with the new head. Lock-free: a failed
     * CAS means another push succeeded. */
  } while (!sh_atomic_cas_weak(&c->remote, &top, head, memory_order_release,
                                                  memory_order_relaxed));
}

/* nout has one writer, the pool's owner: a relaxed load and store. */
static uint32_t nout(const sh_pool_class *c) {
  return (uint32_t)sh_atomic_load(&c->nout, memory_order_relaxed);
}
static void set_nout(sh_pool_class *c, uint32_t n) {
  sh_atomic_store(&c->nout, n, memory_order_relaxed);
}

static void flush_class(sh_pool_class *c, uint32_t cls) {
  uint32_t n = nout(c);
  if (n == 0) return;
  sh_pool_push_remote(c->out_owner, cls, c->out_head, c->out_tail, n);
  c->out_head = c->out_tail = NULL;
  set_nout(c, 0);
}

/* A worker frees another pool's object: batch it per class and owner, so
 * the owner's shared line is touched once per SH_POOL_OUTBOX objects. */
void sh_pool_free_foreign(sh_pool *self, sh_pool_obj *o) {
  sh_pool_class *c = &self->cls[o->cls];
  sh_pool *owner = o->slab->owner;
  if (nout(c) > 0 && c->out_owner != owner) flush_class(c, o->cls);
  c->out_owner = owner;
  o->next = c->out_head;
  if (c->out_head == NULL) c->out_tail = o;
  c->out_head = o;
  SH_MEM_HANDOFF(o); /* its state and link: the push hands it to the owner */
  uint32_t n = nout(c) + 1;
  SH_ASSERT(n <= SH_POOL_OUTBOX); /* flushed as it fills */
  set_nout(c, n);
  if (n == SH_POOL_OUTBOX) flush_class(c, o->cls);
}

void sh_pool_flush(sh_pool *p) {
  for (uint32_t i = 0; i < SH_POOL_CLASSES; i++) flush_class(&p->cls[i], i);
}

uint64_t sh_pool_in_outboxes(const sh_pool *p) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < SH_POOL_CLASSES; i++) n += nout(&p->cls[i]);
  return n;
}
