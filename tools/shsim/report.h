/*
 * What shsim makes of a run and prints: the classification of a child's
 * death, the result line of `run`, the table and failure list of `sweep`.
 */
#ifndef SHSIM_REPORT_H
#define SHSIM_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "args.h"
#include "pool.h"
#include "unit.h"

/* *r: the result of `unit`, whose child died before reporting it. From the
 * record the child sent while dying (UNIT_REC_LAST or UNIT_REC_PARTIAL; NULL
 * if none), how it ended, and its stderr. timeout_s: the watchdog's, named
 * when it killed the child. */
void report_classify(const unit_rec *held, uint64_t unit, uint64_t timeout_s, const pool_end *end,
                     unit_rec *r);

/* run: "scenario=NAME seed=N result=ok|FAIL:<kind> hash=... steps=... vtime_ns=... msgs=..." */
void report_run_line(const sh_scenario *sc, uint64_t seed, const unit_rec *r);

/* The figures of a sweep's runs of one scenario. */
typedef struct report_tally {
  uint64_t runs, fails, msgs, real_ns, vtime_ns;
} report_tally;

typedef struct report_failure {
  size_t scn; /* index in the plan: failures are listed by scenario, then seed */
  uint64_t seed;
  char kind[32];
  char detail[256];
} report_failure;

/* sweep: the line that says what ran, then a row per scenario of the plan
 * (per[i] for p->scs[i]) and a total where there are several. */
void report_sweep_table(const args *a, const unit_plan *p, size_t nslots, uint64_t real_ns,
                        const report_tally *per);

/* sweep: fails[0..nkept) (sorted here), each with the commands that replay
 * and shrink it, of nfails in all. */
void report_failures(const args *a, const unit_plan *p, report_failure *fails, size_t nkept,
                     uint64_t nfails);

#endif
