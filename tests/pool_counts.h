/*
 * What the pool's tests (test_pool.c, test_pool_remote.c) read of a pool
 * (core/mem/pool.h): the body sizes of the classes, free objects cached per
 * class, objects per slab, slabs held, and whether a class's remote stack
 * is empty.
 */
#ifndef TESTS_POOL_COUNTS_H
#define TESTS_POOL_COUNTS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mem/pool.h"

/* Largest body of each class: class size minus the 16-byte header. */
#define BODY(cls) (((size_t)64 << (cls)) - 16)

static uint64_t cached(const sh_pool *p, int cls) { return p->cls[cls].nfree; }

/* Objects per slab of class cls. */
static uint64_t per_slab(int cls) { return sh_pool_slab_objects((uint32_t)cls); }

/* Slabs p holds now: every malloc it made minus those it gave back. */
static uint64_t slabs(const sh_pool *p) { return p->mallocs - p->slab_frees; }

static bool remote_empty(sh_pool *p, int cls) { return atomic_load(&p->cls[cls].remote) == NULL; }

#endif
