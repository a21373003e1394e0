/*
 * Schedule files: the scheduling choices of a run (every switch between
 * fibers), as "# comment" lines, then one "STEP TO KIND" line per
 * decision (sh_sim_choice). Written by a recording run and by shrink; read back to replay.
 */
#ifndef SHSIM_SCHEDULE_H
#define SHSIM_SCHEDULE_H

#include <stddef.h>

#include <stackhouse/sim.h>

/* Writes the schedule of the current run to path (nothing if NULL).
 * Async-signal-safe (open, write, close, no stdio): it also runs in a
 * fatal-signal handler, so that a run that asserts can be shrunk too. */
void schedule_record(const char *path);

/* Reads a schedule file into *out (malloc'd). 0, -errno, or -EINVAL for a bad line. */
int schedule_load(const char *path, sh_sim_choice **out, size_t *n_out);

/* Writes c[0..n) to path, `about` in a comment line. 0 or -errno. */
int schedule_save(const char *path, const sh_sim_choice *c, size_t n, const char *about);

#endif
