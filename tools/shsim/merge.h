/*
 * shsim merge: the JSON summaries of several shards of a campaign (sweep
 * or fuzz; shards, machines, batch jobs) as one, printed and written as
 * JSON (--json) and JUnit (--junit).
 */
#ifndef SHSIM_MERGE_H
#define SHSIM_MERGE_H

#include "args.h"

/* Exit status: 0; 1 if a run failed or a shard is missing; 2 if a file
 * cannot be read or merged (a shard given twice). */
int merge_cmd(const args *a);

#endif
