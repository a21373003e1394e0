/*
 * What a child of shsim does: runs units of the plan one after the other
 * and sends a record (unit.h) for each with pool_send().
 */
#ifndef SHSIM_CHILD_H
#define SHSIM_CHILD_H

#include <stdbool.h>
#include <stdint.h>

#include "args.h"
#include "unit.h"

/* In a forked child: runs the units [lo, hi), up to the first failure (a
 * failed run may leave the process broken, so the next one starts in a fresh
 * child). A failure the simulator detects, an assert, a crash, a sanitizer
 * report or the pool's timeout signal each send what is known of the dying
 * unit first (UNIT_REC_LAST or UNIT_REC_PARTIAL).
 * leak_each: a leak check after each run, else one for all of them
 * (UNIT_REC_LEAKED if they leaked). Each run's schedule goes to
 * a->record_path if set. */
void child_run(const args *a, const unit_plan *p, uint64_t lo, uint64_t hi, bool leak_each);

#endif
