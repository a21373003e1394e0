/*
 * Memory for the runtime's own objects (messages, stacks, futures, timers,
 * waiters): the calling worker's pool, or plain malloc on a thread that is
 * not a worker. Below the worker: it finds the pool through the platform's
 * thread-local context, which on a worker is that worker's pool
 * (sh_worker_enter), so that nothing here needs to know what a worker is.
 */
#ifndef SH_MEM_H
#define SH_MEM_H

#include <stddef.h>

#include "plat.h"
#include "mem/pool.h"

/* The calling worker's pool, or NULL on a thread that is not a worker. */
static inline sh_pool *sh_mem_pool(void) { return (sh_pool *)sh_plat_local(); }

/* size bytes, not zeroed; NULL when out of memory. */
static inline void *sh_mem_alloc(size_t size) { return sh_pool_alloc(sh_mem_pool(), size); }
/* Frees what sh_mem_alloc gave, on any thread. NULL is a no-op. */
static inline void sh_mem_free(void *p) { sh_pool_free(sh_mem_pool(), p); }

#endif
