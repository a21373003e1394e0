/*
 * shsim fuzz: a sweep whose seeds draw their own options (swarm.h), on
 * every core, a shard of the range and a time budget at will, its failures
 * grouped and its summaries written (campaign_run.h).
 */
#ifndef SHSIM_FUZZ_H
#define SHSIM_FUZZ_H

#include "args.h"
#include "unit.h"

/* Exit status: 0, 1 if a run failed, 2 if shsim could not go on. */
int fuzz_cmd(const args *a, const unit_plan *p);

#endif
