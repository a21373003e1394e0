/*
 * The commands that work on replay files (replayfile.h): `run --record`
 * adds the outcome, `replay` runs a file again and compares, `shrink` cuts
 * a failing run's decisions down and writes them as a replay file.
 */
#ifndef SHSIM_REPLAYCMD_H
#define SHSIM_REPLAYCMD_H

#include "args.h"
#include "replayfile.h"
#include "unit.h"

/* `replay FILE`: reads a->target and sets *a up to run it exactly (a->sim,
 * a->workers, the scenario and seed; f keeps the decisions alive). 0, or
 * non-zero when it cannot (reported). */
int replaycmd_load(args *a, replay_file *f);

/* `run --schedule FILE`: reads it into f and sets a->sim to follow it. A
 * replay file recorded with other options than the command line's, or by
 * another binary, is refused. 0, or 2 (reported). */
int replaycmd_schedule(args *a, replay_file *f);

/* After a run: adds its outcome to a->record_path (if set), and under
 * replay (f not NULL) says whether the run matches f's recording: the
 * outcome and hash, and, for a file that holds a run's whole record, each
 * decision and the trace hash before it (the first that differs is named).
 * True if the replay diverged. */
bool replaycmd_after_run(const args *a, const replay_file *f, const unit_rec *r);

/* `shrink`: exit status. */
int replaycmd_shrink(args *a, const unit_plan *p);

#endif
