/*
 * Allocation counting by interposition (interface and rationale in
 * malloc_count.h).
 *
 * The counters are sharded: each thread takes one of SLOTS cache-line-sized
 * slots on its first allocation and adds to it with a relaxed fetch_add, so
 * threads that allocate a lot (the CAF benches do, per message) do not
 * bounce one cache line between cores and the counting barely perturbs what
 * it measures. Reading sums the slots; a slot shared by two threads (more
 * than SLOTS threads) is still exact because the add is atomic.
 *
 * No function here may allocate: the slot index is a thread-local integer
 * in the executable's static TLS block, which needs no malloc.
 *
 * The definitions are exported explicitly (MC_EXPORT): the project builds
 * with -fvisibility=hidden, and a hidden malloc binds only the executable's
 * own calls, not libc's, so the self-check below failed and the figures
 * missed what libc allocates for us.
 *
 * valloc and pvalloc (obsolete) are not interposed: they still work, from
 * glibc, uncounted. Under a sanitizer (which owns malloc) nothing is
 * interposed and
 * malloc_count_works() says so; the Makefile builds benches in release only.
 */
#include "malloc_count.h"

#include <errno.h>
#include <malloc.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* glibc's own entry points, exported for exactly this use. */
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void *__libc_memalign(size_t align, size_t size);
extern void __libc_free(void *p);

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MALLOC_COUNT_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define MALLOC_COUNT_OFF 1
#endif
#endif

#define SLOTS 64u
#define MC_EXPORT __attribute__((visibility("default")))

typedef struct slot {
  alignas(64) atomic_uint_fast64_t allocs;
  atomic_uint_fast64_t frees;
} slot;

static slot slots[SLOTS];

#ifndef MALLOC_COUNT_OFF
static atomic_uint next_slot;
/* 0: not yet assigned; else slot index + 1. */
static _Thread_local unsigned my_slot;

static slot *this_slot(void) {
  if (my_slot == 0) {
    /* relaxed: only spreads threads over the slots. */
    my_slot = atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed) % SLOTS + 1;
  }
  return &slots[my_slot - 1];
}

static void count_alloc(void) {
  /* relaxed: a statistic; the reader sums the slots after the phase. */
  atomic_fetch_add_explicit(&this_slot()->allocs, 1, memory_order_relaxed);
}

MC_EXPORT void *malloc(size_t size) {
  count_alloc();
  return __libc_malloc(size);
}

MC_EXPORT void *calloc(size_t n, size_t size) {
  count_alloc();
  return __libc_calloc(n, size);
}

MC_EXPORT void *realloc(void *p, size_t size) {
  count_alloc();
  return __libc_realloc(p, size);
}

MC_EXPORT void *memalign(size_t align, size_t size) {
  count_alloc();
  return __libc_memalign(align, size);
}

MC_EXPORT void *aligned_alloc(size_t align, size_t size) {
  count_alloc();
  return __libc_memalign(align, size);
}

MC_EXPORT int posix_memalign(void **out, size_t align, size_t size) {
  /* POSIX: a power of two and a multiple of sizeof(void *). */
  if (align < sizeof(void *) || (align & (align - 1)) != 0) return EINVAL;
  count_alloc();
  void *p = __libc_memalign(align, size);
  if (p == NULL) return ENOMEM;
  *out = p;
  return 0;
}

MC_EXPORT void free(void *p) {
  if (p == NULL) return;
  atomic_fetch_add_explicit(&this_slot()->frees, 1, memory_order_relaxed);
  __libc_free(p);
}
#endif

static uint64_t sum(size_t field) {
  uint64_t n = 0;
  for (unsigned i = 0; i < SLOTS; i++) {
    atomic_uint_fast64_t *c = (atomic_uint_fast64_t *)((char *)&slots[i] + field);
    n += atomic_load_explicit(c, memory_order_relaxed);
  }
  return n;
}

uint64_t malloc_count_read(void) { return sum(offsetof(slot, allocs)); }
uint64_t malloc_count_frees(void) { return sum(offsetof(slot, frees)); }

bool malloc_count_works(void) {
  /* strdup allocates inside libc: the counter moves only if libc's own
   * calls reach our malloc, which is what the libraries we measure rely on
   * (a static libstackhouse.a binds to it at link time anyway). Through a
   * volatile pointer so the compiler cannot fold the call away. */
  char *(*volatile dup)(const char *) = strdup;
  uint64_t before = malloc_count_read();
  char *p = dup("malloc_count");
  bool moved = malloc_count_read() > before;
  free(p);
  return moved && p != NULL;
}
