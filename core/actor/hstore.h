/*
 * Where houses live. A system's houses are carved from slabs of
 * SH_SLAB_HOUSES and are returned to malloc only by sh_system_free, so an
 * address that outlived its actor still names valid memory (house.h,
 * "Generations"). When a stopped actor has nothing left, its runner retires
 * the house into the free FIFO of the worker it runs on; the next spawn on
 * that worker takes it back with no lock. A worker keeps at most
 * SH_HSTORE_KEEP retired houses after each retirement (checked there; a
 * take that found none of them usable may have brought a batch more, and
 * a slab) and hands the surplus to the system's spare list, from which
 * workers that have none (and threads that are not workers) take batches
 * under a lock, before a new slab is made.
 *
 * Memory is bounded by the most houses live at once, plus per worker its
 * free list's bound, plus one slab. Not checked: it is a sum over the
 * workers and the peak of the program's own spawns, which no one place
 * sees; the slabs are counted (sh_hstore_count) for a test to compare.
 */
#ifndef SH_HSTORE_H
#define SH_HSTORE_H

#include <stdbool.h>
#include <stdint.h>

#include "actor/house.h"

#define SH_SLAB_HOUSES 64u
#define SH_HSTORE_KEEP 256u
/* Houses moved at once between a worker's list and the spare list. */
#define SH_HSTORE_BATCH 64u

/* A house for a spawn: CREATED, vacant, stopped in its current generation
 * (the spawn sets it live); NULL when out of memory. On a worker of sys,
 * from that worker's free list; elsewhere from the spare list. */
sh_house *sh_hstore_take(sh_system *sys);
/* The memory of an actor of class size `size` for house h: inside the
 * house when it fits, else from the worker's pool; NULL when out of
 * memory. sh_hstore_actor_free gives it back (NULL actor: nothing). */
sh_actor *sh_hstore_actor_new(sh_house *h, size_t size);
void sh_hstore_actor_free(sh_house *h);
/* A house from sh_hstore_take that was never published goes back. */
void sh_hstore_untake(sh_house *h);
/* Its runner retires h: stopped, mounted and done with, nothing left in
 * it. The actor's memory is freed. With `reuse`, the generation moves on
 * and the house goes to the current worker's free list (unless its
 * generations are used up); without (shutdown's drain: nothing will be
 * spawned again), it keeps its generation, so that the actor's figures
 * stay readable until the system is freed. */
void sh_hstore_retire(sh_house *h, bool reuse);
/* fn on every house of sys ever made, in the order they were made (in the
 * simulator: the same order every run). The workers are stopped. */
void sh_hstore_each(sh_system *sys, void (*fn)(sh_house *h, void *arg), void *arg);
/* Houses in the store (live and retired): for tests and figures. */
uint64_t sh_hstore_count(sh_system *sys);
/* Frees every house and what it still holds, and the slabs. sh_system_free. */
void sh_hstore_free(sh_system *sys);

#endif
