/*
 * The units of work: (scenario, seed) pairs, numbered seed-major, and the
 * record a child sends for each.
 */
#ifndef SHSIM_UNIT_H
#define SHSIM_UNIT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "args.h"
#include <stackhouse/scenario.h>
#include <stackhouse/sim.h>

#define UNIT_SCN_MAX 256 /* the registry holds at most this many */

typedef struct unit_plan {
  const sh_scenario *scs[UNIT_SCN_MAX];
  size_t nscs;
  args_seed_range seeds;
  /* The seeds run: first, first + stride, ... (nseeds of them). A shard of
   * the range takes every stride-th one; else stride 1, first seeds.lo. */
  uint64_t first, stride;
  uint64_t nseeds;
  /* nscs * nseeds, seed-major: the runs of a costly scenario spread over
   * every child instead of filling the last ones. */
  uint64_t nunits;
} unit_plan;

/* Not a hidden test scenario. */
bool unit_visible(const sh_scenario *sc);

/* The plan of a->target over a->seeds: `all` (sweep) is every visible
 * scenario; else the one named (hidden ones too). 0, or -errno (reported). */
int unit_plan_make(const args *a, unit_plan *p);

size_t unit_scn_index(const unit_plan *p, uint64_t u);
const sh_scenario *unit_scn(const unit_plan *p, uint64_t u);
uint64_t unit_seed(const unit_plan *p, uint64_t u);

typedef enum unit_rec_type {
  UNIT_REC_RESULT = 1, /* a unit's result; the child goes on */
  UNIT_REC_LAST,       /* a unit's result, then the child exits: its stderr may hold the detail */
  UNIT_REC_PARTIAL,    /* the figures of a unit that is dying (the wait status classifies) */
  UNIT_REC_LEAKED,     /* the units [unit, unit_end) run by this child leaked memory, together */
} unit_rec_type;

typedef struct unit_rec {
  uint64_t unit;
  uint64_t unit_end; /* UNIT_REC_LEAKED */
  uint8_t type;      /* unit_rec_type */
  uint8_t ok;
  uint8_t recheck;   /* set by the parent: a leak recheck's run, which only reports a leak */
  uint8_t replay_kept; /* set by the parent: a failure's replay file was kept (--out) */
  char kind[32];
  char detail[256];
  sh_sim_report rep;
  uint64_t msgs;    /* stats.delivered, 0 if unknown */
  uint64_t real_ns; /* real time of the run, measured in the child */
} unit_rec;
/* A pipe write of at most PIPE_BUF bytes is atomic: a dying child's record
 * is either whole or absent. */
_Static_assert(sizeof(unit_rec) <= PIPE_BUF, "a record must fit one atomic pipe write");

void unit_rec_init(unit_rec *r, uint64_t unit, unit_rec_type type);
void unit_rec_fail(unit_rec *r, const char *kind, const char *detail);

#endif
