/*
 * shsim explore: coverage-guided exploration of choice sequences (the
 * representation replay and shrink use). A corpus of runs that reached new
 * coverage (code edges in a `make explore` build, the runtime's
 * sometimes-points in any build) is mutated and replayed; a mutant that
 * reaches something new joins the corpus; the first failure stops the
 * campaign with its replay file and the commands that replay and shrink it.
 * Sometimes-points no run reached are reported.
 */
#ifndef SHSIM_EXPLORE_H
#define SHSIM_EXPLORE_H

#include "args.h"
#include "unit.h"

/* Exit status: 0, 1 if a run failed, 2 if shsim could not go on. */
int explore_cmd(const args *a, const unit_plan *p);

#endif
