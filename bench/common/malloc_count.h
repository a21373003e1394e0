/*
 * Counts heap allocations of the whole bench process (every thread), so a
 * bench can report mallocs per message over its measured phase.
 *
 * malloc_count.c defines malloc, calloc, realloc, aligned_alloc,
 * posix_memalign and memalign in the bench executable; the dynamic linker
 * binds every call (the static libstackhouse.a, libc itself, libstdc++'s
 * operator new) to these definitions, which count and forward to glibc's
 * __libc_* entry points. free forwards to __libc_free uncounted. This is
 * glibc's documented way of replacing malloc; it needs no LD_PRELOAD.
 */
#ifndef BENCH_MALLOC_COUNT_H
#define BENCH_MALLOC_COUNT_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Allocation calls so far (malloc, calloc, realloc, aligned_alloc,
 * posix_memalign, memalign), all threads. Relaxed: a statistic that is
 * read before and after a phase. */
uint64_t malloc_count_read(void);
/* free calls of non-NULL pointers so far, all threads. */
uint64_t malloc_count_frees(void);
/* Whether the interposition is in effect: a malloc through an opaque
 * pointer moves the counter. A bench whose figure would be meaningless
 * says so rather than printing zeros. */
bool malloc_count_works(void);

#ifdef __cplusplus
}
#endif
#endif
