/*
 * The simulator's memory model (memmodel.c): weak loads.
 *
 * Every fiber runs on one OS thread, so every atomic of the core is, as
 * executed, sequentially consistent. The model gives back some of what a
 * weakly ordered machine allows: the core's atomics (core/base/atomic.h) report
 * each store and read-modify-write, and a load weaker than seq_cst may be
 * handed the value a store of another fiber overwrote, if that store was
 * one of the last SH_SIMMEM_WINDOW stores the model heard of and it does
 * not happen before the load. "Happens before" is over-approximated, so the
 * model never invents a value the C11 model forbids: a fiber is taken to
 * have seen everything up to the latest store that any of its acquire (or
 * stronger) operations read, everything up to the moment it was made
 * runnable after a park, a block or its start, and everything up to each
 * moment the program's own code gave control to the runtime (a call of the
 * public API, the return of a handler or hook: core/base/atomic.h), since the
 * program may synchronize in ways the model does not see. Which loads read
 * stale is a decision of the schedule (SH_SIM_STALE): recorded, replayed,
 * shrunk. A plain store may likewise be ordered before another fiber's
 * newer one to the same word (the word keeps the newer value), and an
 * acquire synchronizes only with a release (or a release sequence).
 *
 * Plain data is not modelled, but its hand-offs are: the runtime marks
 * where it hands written data to another thread (SH_MEM_HANDOFF) and where
 * the receiver learns of it (SH_MEM_RECEIVE), and a receipt that the
 * writes do not happen before fails the run (rule mem.handoff).
 */
#ifndef SH_SIM_MEMMODEL_H
#define SH_SIM_MEMMODEL_H

#include <stackhouse/sim.h>
#include <stdint.h>

/* Stores a fiber may not see yet, at most: a store older than the last
 * SH_SIMMEM_WINDOW is visible to every fiber (a store buffer drains). */
#define SH_SIMMEM_WINDOW 16u

/* Hand-offs of plain data remembered (SH_MEM_HANDOFF); an older one is
 * taken as received in order. A power of two. */
#define SH_SIMMEM_HANDOFFS 64u

/* The rate at most (permille): a fiber polling a word another fiber wrote
 * must come to see the write (C11 asks it of every store), so each look
 * keeps a chance of reading fresh. */
#define SH_SIMMEM_MAX_PERMILLE 900u

/* Loads of one step that may read stale, at most; the later ones read the
 * newest value. A step's decisions are told apart under replay only up to
 * a bound (replay.c), and such a step is a loop without a scheduling
 * point. */
#define SH_SIMMEM_STEP_CANDIDATES 32u

/* A new simulation: no store is remembered; the decisions' stream is
 * seeded from *x (which advances). */
void sh_simmem_configure(const sh_sim_options *o, uint64_t *x);

/* A node crashed (node.c): the model forgets every store and hand-off it
 * remembers (they may be of the node's freed memory). */
void sh_simmem_forget_all(void);

/* Fiber `f` synchronized with everything so far (it was started, woken, or
 * unblocked). */
void sh_simmem_sync(uint32_t f);

/* Loads that read a stale value in this run. */
uint64_t sh_simmem_stale_reads(void);

#endif
