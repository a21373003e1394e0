/*
 * sh_sim_run (sim.h): one unit of shsim's plan, run as `shsim run` runs it,
 * for callers that are not shsim (a test framework).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <stackhouse/sim.h>

#include "args.h"
#include "runner.h"
#include "unit.h"

int sh_sim_run(const char *scenario, const sh_sim_options *opt, sh_sim_result *out) {
  args a;
  args_default(&a);
  a.cmd = ARGS_CMD_RUN;
  a.target = scenario;
  if (opt != NULL) a.sim = *opt;
  a.seeds = (args_seed_range){a.sim.seed, a.sim.seed};
  a.jobs = 1;
  unit_plan p;
  if (unit_plan_make(&a, &p) != 0) return -ENOENT;
  unit_rec r = runner_run_first(&a, &p, false);
  memset(out, 0, sizeof(*out));
  out->ok = r.ok;
  snprintf(out->kind, sizeof(out->kind), "%s", r.ok ? "" : r.kind);
  snprintf(out->detail, sizeof(out->detail), "%s", r.ok ? "" : r.detail);
  out->hash = r.rep.hash;
  out->steps = r.rep.steps;
  out->vtime_ns = r.rep.vtime_ns;
  out->messages = r.msgs;
  return 0;
}
