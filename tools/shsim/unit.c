/*
 * The units of work and their records (unit.h).
 */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define UNITS_MAX 1000000000ull /* (scenario, seed) pairs in one sweep */

bool unit_visible(const sh_scenario *sc) { return !(sc->flags & SH_SCN_HIDDEN); }

int unit_plan_make(const args *a, unit_plan *p) {
  memset(p, 0, sizeof(*p));
  p->seeds = a->seeds;
  p->first = a->seeds.lo + (a->shard_i - 1);
  p->stride = a->shard_n;
  /* The shard's seeds in the range (none if it starts past the end). */
  uint64_t span = a->seeds.hi - a->seeds.lo;
  p->nseeds = a->shard_i - 1 > span ? 0 : (span - (a->shard_i - 1)) / a->shard_n + 1;
  if ((a->cmd & (ARGS_CMD_SWEEP | ARGS_CMD_FUZZ | ARGS_CMD_EXPLORE)) &&
      strcmp(a->target, "all") == 0) {
    size_t n = sh_scenario_count();
    for (size_t i = 0; i < n && p->nscs < UNIT_SCN_MAX; i++)
      if (unit_visible(sh_scenario_at(i))) p->scs[p->nscs++] = sh_scenario_at(i);
  } else {
    p->scs[0] = sh_scenario_find(a->target);
    if (p->scs[0] == NULL) {
      fprintf(stderr, "shsim: no scenario '%s' (shsim list --all)\n", a->target);
      return -ENOENT;
    }
    p->nscs = 1;
  }
  if (p->nscs == 0) {
    fprintf(stderr, "shsim: no scenario to run\n");
    return -ENOENT;
  }
  if (p->nseeds > UNITS_MAX / p->nscs) {
    fprintf(stderr, "shsim: more than %llu runs in one sweep\n", UNITS_MAX);
    return -ERANGE;
  }
  p->nunits = p->nscs * p->nseeds;
  return 0;
}

size_t unit_scn_index(const unit_plan *p, uint64_t u) { return (size_t)(u % p->nscs); }
const sh_scenario *unit_scn(const unit_plan *p, uint64_t u) { return p->scs[unit_scn_index(p, u)]; }
uint64_t unit_seed(const unit_plan *p, uint64_t u) { return p->first + u / p->nscs * p->stride; }

void unit_rec_init(unit_rec *r, uint64_t unit, unit_rec_type type) {
  memset(r, 0, sizeof(*r));
  r->unit = unit;
  r->type = (uint8_t)type;
}

void unit_rec_fail(unit_rec *r, const char *kind, const char *detail) {
  r->ok = 0;
  snprintf(r->kind, sizeof(r->kind), "%s", kind);
  snprintf(r->detail, sizeof(r->detail), "%s", detail);
}
