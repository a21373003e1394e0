/*
 * What sweep and fuzz share as campaigns: the summary they build
 * (campaign.h) from their runs, the findings written as they come (--out
 * DIR: a line of DIR/failures.jsonl and a replay file per failure), the
 * summaries written at the end (--json, --junit, DIR/summary.json), also
 * when SIGINT or SIGTERM or the time budget stops the campaign.
 */
#ifndef SHSIM_CAMPAIGN_RUN_H
#define SHSIM_CAMPAIGN_RUN_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "args.h"
#include "campaign.h"
#include "runner.h"
#include "unit.h"

typedef struct campaign_run {
  const args *a;
  const unit_plan *p;
  campaign c;
  FILE *jsonl; /* DIR/failures.jsonl, or NULL */
  uint64_t started_ns;
} campaign_run;

/* Set by SIGINT or SIGTERM once campaign_run_init has installed the
 * handlers: the signal's number. */
extern volatile sig_atomic_t campaign_run_stop;
/* Installs those handlers (campaign_run_init does; explore on its own). */
void campaign_run_install_stop(void);

/* A campaign of command ("sweep", "fuzz"): its summary's description,
 * the --out directory made and its failures.jsonl started, the handlers
 * of SIGINT and SIGTERM installed. 0, or -errno (reported). */
int campaign_run_init(campaign_run *cr, const args *a, const unit_plan *p, const char *command);

/* Settings of rn for the campaign: the stop flag, the record directory. */
void campaign_run_setup(const campaign_run *cr, runner *rn);

/* A result (r->recheck: only its failure is news): counted, and a failure
 * kept, grouped and written to failures.jsonl at once. */
void campaign_run_result(campaign_run *cr, const unit_rec *r);

/* The end, by the plan's end, the budget or a signal (rc -EINTR from
 * runner_run): the summaries written. 0, or 2 when one could not be
 * (reported). */
int campaign_run_finish(campaign_run *cr, int runner_rc);

/* After finish: "stopped by SIGTERM: R of P runs done" (or "time budget
 * spent: ..."), if the campaign stopped early. */
void campaign_run_print_stop(const campaign_run *cr);

void campaign_run_free(campaign_run *cr);

/* The exit status of a campaign: 128 + the signal that stopped it, else 2
 * if its summaries could not be written, else 1 if a run failed, else 0. */
int campaign_run_status(const campaign_run *cr, int finish_rc);

#endif
