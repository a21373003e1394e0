/*
 * Memory of simulated nodes: which heap blocks each node allocated, so that
 * a power cut of a node can free all of them (nodemem.c says how and why).
 *
 * Every program linked with libstackhouse-sim.a is linked with the wraps
 * of SIM_WRAP_LDFLAGS (the Makefile; stackhouse-sim.pc and the CMake
 * package carry them too): its calls of malloc, calloc, realloc, free,
 * posix_memalign, aligned_alloc, reallocarray, strdup and strndup come here
 * first. Calls made inside the C library or another shared library do not
 * (docs/simulator.md, "Memory of nodes").
 *
 * Internal to the simulator. The simulation thread is the thread that
 * made the first sh_simnodemem_set_owner with an owner other than 0, until
 * its reset gives the role up. While one holds the role, another thread
 * that sets an owner other than 0, or calls release, reset or the figures
 * (bytes, count, peak, slots), fails an assertion; available, owner,
 * set_owner(0) and sh_simraw_* are for any thread.
 */
#ifndef SH_SIM_NODEMEM_H
#define SH_SIM_NODEMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Owner of allocations: 0 = nobody (not tracked); 1..SH_SIMNODEMEM_MAX_OWNERS-1 a node. */
#define SH_SIMNODEMEM_MAX_OWNERS 64

/* Live tracked blocks, all owners together, at most: far above what a
 * simulation of a few nodes holds; the table then takes 768 MiB. */
#define SH_SIMNODEMEM_MAX_LIVE (1u << 24)

/* The wraps are linked (else nothing is ever tracked). Any thread. */
bool sh_simnodemem_available(void);

/* Allocations made from now on by the calling thread are charged to owner
 * (< SH_SIMNODEMEM_MAX_OWNERS). The first call with owner != 0 marks the
 * calling thread as the simulation thread; other threads never track.
 * Without the wraps it only records the owner. */
void sh_simnodemem_set_owner(uint32_t owner);
uint32_t sh_simnodemem_owner(void);

/* Frees every live allocation charged to owner (1..MAX_OWNERS-1); before
 * each free calls each(ptr, size, ctx) if each != NULL (the simulator
 * purges its own tables of addresses inside it). Returns how many. Order:
 * that of the allocations (deterministic when the run is). each must not
 * free any of owner's blocks (they are freed here); it may allocate, and
 * free other memory, tracked or not: the table is whole while it runs. */
size_t sh_simnodemem_release(uint32_t owner, void (*each)(void *ptr, size_t size, void *ctx),
                             void *ctx);

uint64_t sh_simnodemem_bytes(uint32_t owner); /* live bytes charged to owner */
uint64_t sh_simnodemem_count(uint32_t owner); /* live allocations */
uint64_t sh_simnodemem_peak(uint32_t owner);  /* peak live bytes since the last reset */
/* The table's slots now: 0 while it holds no memory, else a power of two,
 * at least twice the live blocks (for tests, and the simulator's figures). */
uint32_t sh_simnodemem_slots(void);

/* A new simulation: every owner must have 0 live allocations (assert),
 * peaks are zeroed, the table's memory is freed, and, called with owner 0,
 * the calling thread gives up the role of simulation thread. */
void sh_simnodemem_reset(void);

/* For the simulator's own allocations while an owner is set (sockets,
 * segments of the fake network, trace buffers): never tracked. Any thread. */
void *sh_simraw_malloc(size_t n);
void *sh_simraw_calloc(size_t n, size_t sz);
void *sh_simraw_realloc(void *p, size_t n);
void sh_simraw_free(void *p);

#endif
