/*
 * Swarm testing: each seed of a fuzz campaign draws the options of its run
 * (strategy, switch rate, PCT depth and steps, worker count unless the
 * scenario declares one, network weather if it uses the network) from
 * itself and its scenario, so
 * that a campaign tries many configurations and one seed still names one
 * exact run, replayable with `shsim run` and the drawn options.
 */
#ifndef SHSIM_SWARM_H
#define SHSIM_SWARM_H

#include <stdint.h>
#include <stdio.h>

#include <stackhouse/scenario.h>

#include "args.h"

/* The options of seed's run of sc: o's strategy and the fields that
 * strategy reads, and *workers (sc's own if it declares them); network
 * weather (o->faults, without a campaign's) only if sc is SH_SCN_NET. Fields the drawn strategy does not read are left as
 * they are (the defaults), so that the replay command need not name them.
 * With o->faults set, each entry's rate is scaled by a factor drawn from
 * {0, 0.1, 1, 10} (at most 1): o->faults then points to a spec of this
 * module's, valid until the next draw. */
void swarm_draw(const sh_scenario *sc, uint64_t seed, sh_sim_options *o, uint32_t *workers);

/* Writes "PROG run NAME --seed N --strategy S --workers K ..." (no newline):
 * the run of seed as a fuzz campaign with a's options ran it. */
void swarm_fprint_command(FILE *f, const args *a, const char *name, uint64_t seed);
/* The same as command `cmd` (its options those of mask, ARGS_CMD_*). */
void swarm_fprint_as(FILE *f, const args *a, const char *cmd, unsigned mask, const char *name,
                     uint64_t seed);

#endif
