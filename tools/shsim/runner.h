/*
 * Runs the units of a plan on a pool of children (pool.h): a child runs a
 * chunk of units one after the other (forking costs about as much as a short
 * run) and stops at its first failure; when it dies before reporting a unit,
 * that unit is classified from how the child ended (report.h). Either way a
 * fresh child takes the rest of the chunk.
 *
 * In sanitizer builds LeakSanitizer checks, once per chunk, that the runs
 * freed everything; a leaking chunk is run again one unit per child to find
 * the run that leaks.
 */
#ifndef SHSIM_RUNNER_H
#define SHSIM_RUNNER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "args.h"
#include "unit.h"

typedef struct runner {
  const args *a;
  const unit_plan *p;
  size_t nslots;    /* children at a time */
  uint64_t chunk;   /* units per child */
  bool echo_stderr; /* the children's stderr is shown as it comes */
  bool leak_each;   /* check for leaks after each run, not once per chunk */
  uint64_t deadline_ns; /* pool_now_ns() past it: no new chunk starts (0: none) */
  volatile sig_atomic_t *stop; /* set: the runs stop at once (pool_config.stop); may be NULL */
  /* A directory (or NULL): each failed run's replay file is kept there as
   * SCENARIO-SEED.replay, its outcome added, before on_result sees it. */
  const char *record_dir;
  /* Sees each unit's result exactly once, and then the leaks a recheck finds
   * (r->recheck set). */
  void (*on_result)(void *ctx, const unit_rec *r);
  void (*on_tick)(void *ctx); /* about every POOL_TICK_MS (may be NULL) */
  void *ctx;
} runner;

/* Runs every unit of the plan: 0, or -EINTR when stopped (rn->stop). If
 * shsim cannot go on (no fork, no pipe), it says so and exits with status 2. */
int runner_run(const runner *rn);

/* DIR/SCENARIO-SEED.replay, where rn->record_dir keeps that failure's
 * replay file. */
void runner_replay_path(const char *dir, const char *scenario, uint64_t seed, char *out, size_t cap);

/* One simulation of the plan's first unit, in a child: its record. quiet:
 * its stderr is not shown and its leaks are not checked. */
unit_rec runner_run_first(const args *a, const unit_plan *p, bool quiet);

/* Units per child for a plan on nslots children. */
uint64_t runner_chunk_size(const unit_plan *p, size_t nslots);

#endif
