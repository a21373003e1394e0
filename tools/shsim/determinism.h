/*
 * --check-determinism: a seed run twice in one process must make the same
 * decisions with the same trace hash before each. Where the two runs part,
 * the check names the first decision that differs (step, kind, fiber, the
 * scheduling point of each run), or the stretch between two equal decisions
 * where the trace hashes part (a delivery or a trace point went another way),
 * narrowed to two scheduling points when both runs kept theirs.
 */
#ifndef SHSIM_DETERMINISM_H
#define SHSIM_DETERMINISM_H

#include <stdbool.h>
#include <stddef.h>

#include <stackhouse/sim.h>

/* The first run's decisions, kept across the second run's configure. */
typedef struct det_log {
  sh_sim_choice *c;
  sh_sim_decision_context *x;
  size_t n;
  sh_sim_point *pt; /* its scheduling points, if recorded (sh_sim_record_points) */
  size_t npt;
  sh_sim_report rep;
} det_log;

/* Keeps the current run's decisions and report. 0 or -ENOMEM. */
int det_keep(det_log *l);

/* Compares the current run with the kept one: true if they are the same
 * run; else the first difference, in words, to detail. */
bool det_same(const det_log *first, char *detail, size_t size);

/* The same for two kept runs (b's points are not compared; the current
 * process's are, against first's, if both kept theirs). */
bool det_diff(const det_log *first, const det_log *b, char *detail, size_t size);

void det_free(det_log *l);

#endif
