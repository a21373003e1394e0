/*
 * shsim fuzz: a sweep whose seeds draw their own options (swarm.h), on
 * every core, a shard of the range and a time budget at will, its failures
 * grouped and its summary written as JSON; shsim merge: the summaries of
 * several campaigns (shards, machines) as one.
 */
#ifndef SHSIM_FUZZ_H
#define SHSIM_FUZZ_H

#include "args.h"
#include "unit.h"

/* Exit status: 0, 1 if a run failed, 2 if shsim could not go on. */
int fuzz_cmd(const args *a, const unit_plan *p);
int fuzz_merge_cmd(const args *a);

#endif
