/*
 * Faults in a simulation (fault.h).
 *
 * Each entry of the spec enables, through libfiu's external decisions,
 * every known point of the runtime it matches by that point's own name,
 * then the pattern itself for the others (a program's own points): libfiu
 * hands the decision the name it was enabled under, and a schedule names a
 * point by the id of that name (sh_sim_fault_id). Points are enabled from
 * sh_sim_configure to the end of the run (sh_plat_free, in
 * sh_system_free): one hit outside a run never fires. A point that fires is recorded in the
 * schedule and mixed into the trace hash; under replay a point fires
 * exactly where the schedule says, and nothing is drawn.
 */
#include "fault.h"

#include <errno.h>
#include <fiu-control.h>
#include <fiu.h>
#include <stackhouse/probe.h>
#include <stdio.h>
#include <string.h>

#include "base/faults.h"
#include "replay.h"
#include "run.h"

/* Names enabled per run, at most: a spec's entries, each expanded to the
 * runtime's points it matches. */
#define SH_SIMFAULT_MAX 128

typedef struct sh_simfault_point {
  char name[SH_FAULT_NAME_MAX];
  uint32_t id;
  double p;
  uint64_t step; /* the step of the last hit */
  uint32_t hits; /* hits in that step */
} sh_simfault_point;

static struct {
  sh_simfault_point pt[SH_SIMFAULT_MAX];
  size_t n;
  sh_simrng rng;
  uint64_t fired;
} F;

/* What a schedule names this hit by: the point's id for its first hit in
 * the step, the id mixed with k for the k-th hit after it. A point is often
 * hit several times in one step (a batch's stack and messages), and a
 * replay must fire the very hit that fired. */
static uint32_t hit_id(sh_simfault_point *pt, uint64_t step) {
  if (pt->step != step) {
    pt->step = step;
    pt->hits = 0;
  }
  uint64_t k = pt->hits++;
  return k == 0 ? pt->id : pt->id ^ (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> 32);
}

static bool fires(const sh_simfault_point *pt, uint32_t hit) {
  sh_simrun *s = &sh_simrun_state;
  if (sh_simreplay_on()) return sh_simreplay_fault(s->steps, hit);
  /* 53 bits, uniform in [0, 1): p = 1 always fires, p = 0 never. */
  return (double)(sh_simrng_next(&F.rng) >> 11) * 0x1.0p-53 < pt->p;
}

/* libfiu's external decision; failinfo is the point's entry. */
static int decide(const char *name, int *failnum, void **failinfo, unsigned int *flags) {
  (void)name;
  (void)failnum;
  (void)flags;
  sh_simfault_point *pt = *failinfo;
  sh_simrun *s = &sh_simrun_state;
  uint32_t hit = hit_id(pt, s->steps);
  if (!fires(pt, hit)) return 0;
  F.fired++;
  sh_simreplay_record(s->steps, hit, SH_SIM_FAULT);
  sh_simrun_mix(SH_SIMRUN_MIX_FAULT);
  sh_simrun_mix(((uint64_t)pt->id << 32) | sh_simrun_cur());
  if (s->trace != NULL) sh_simtrace_instant(s->trace, s->now, sh_simrun_cur(), pt->name);
  return 1;
}

static bool enabled(const char *name) {
  for (size_t i = 0; i < F.n; i++)
    if (strcmp(F.pt[i].name, name) == 0) return true;
  return false;
}

/* The first entry naming a point decides its rate. */
static int enable(const char *name, double p) {
  if (enabled(name)) return 0;
  if (F.n == SH_SIMFAULT_MAX) return -E2BIG;
  sh_simfault_point *pt = &F.pt[F.n];
  snprintf(pt->name, sizeof(pt->name), "%s", name);
  pt->id = sh_sim_fault_id(name);
  pt->p = p;
  pt->step = UINT64_MAX;
  pt->hits = 0;
  if (fiu_enable_external(pt->name, 1, pt, 0, decide) != 0) return -ENOMEM;
  F.n++;
  return 0;
}

static int enable_entry(void *ctx, const char *pattern, double p) {
  (void)ctx;
  int rc = 0;
  for (size_t i = 0; i < sh_fault_npoints && rc == 0; i++)
    if (sh_fault_matches(pattern, sh_fault_points[i])) rc = enable(sh_fault_points[i], p);
  return rc != 0 ? rc : enable(pattern, p);
}

/* The points ask libfiu only while a spec is in force (faults.h). */
static void arm(bool on) {
#ifndef SH_FAULTS_ALWAYS
  sh_faults_armed = on;
#else
  (void)on;
#endif
}

void sh_simfault_end(void) {
  for (size_t i = 0; i < F.n; i++) fiu_disable(F.pt[i].name);
  F.n = 0;
  arm(false);
}

void sh_simfault_configure(const sh_sim_options *o, uint64_t *x) {
  sh_simfault_end();
  F.fired = 0;
  sh_simrng_seed(&F.rng, x);
  /* Points fiu-run or fiu-ctrl enabled would fire by libfiu's own draws as
   * soon as a spec arms the points, and a seed would no longer name a run:
   * say so rather than run without them or with them unreproducibly. */
  const char *tools = sh_sim_fiu_tools();
  if (tools != NULL) {
    char d[240];
    snprintf(d, sizeof(d), "%s: %s", tools, SH_SIM_FIU_ADVICE);
    sh_simrun_fail("setup", d);
  }
  if (o->faults == NULL) return;
  fiu_init(0);
  const char *why = "too many points enabled";
  int rc = sh_faults_parse(o->faults, NULL, NULL, &why);
  if (rc == 0) rc = sh_faults_parse(o->faults, enable_entry, NULL, &why);
  if (rc == 0) {
    arm(true);
    return;
  }
  sh_simfault_end();
  char d[200];
  snprintf(d, sizeof(d), "bad faults spec '%.100s': %s", o->faults, why);
  sh_simrun_fail("setup", d);
}

uint64_t sh_simfault_fired(void) { return F.fired; }

/* ---- the public face (sim.h) --------------------------------------------------- */

int sh_sim_faults_parse(const char *spec, sh_sim_fault_entry_fn fn, void *ctx, const char **why) {
  return sh_faults_parse(spec, fn, ctx, why);
}

size_t sh_sim_fault_points(const char *const **out) {
  *out = sh_fault_points;
  return sh_fault_npoints;
}

bool sh_sim_faults_active(void) { return F.n > 0; }

const char *sh_sim_fiu_tools(void) { return sh_faults_tools(); }

/* probe.h's view of the simulator's faults: the current run's. */
bool sh_faults_enabled(void) { return F.n > 0; }
uint64_t sh_faults_fired(void) { return F.fired; }

/* The network's weather: what a correct program copes with and still
 * does all it should, only later (in the simulator a short read or write
 * is no error). */
static const char *const benign_points[] = {
    "sh/net/delay", "sh/net/partition", "sh/net/read",    "sh/net/write",
    "sh/net/drop",  "sh/net/dup",       "sh/net/reorder",
};

static bool is_benign(const char *name) {
  for (size_t i = 0; i < sizeof(benign_points) / sizeof(benign_points[0]); i++)
    if (strcmp(name, benign_points[i]) == 0) return true;
  return false;
}

/* A name enabled: a benign point, or a pattern whose runtime points are
 * all benign (it is also enabled for a program's own points under it). A
 * pattern of a program's own points alone is not: its faults are the
 * program's, and may excuse its checks. */
static bool entry_benign(const char *name) {
  if (is_benign(name)) return true;
  size_t len = strlen(name);
  if (len == 0 || name[len - 1] != '*') return false;
  size_t matched = 0;
  for (size_t i = 0; i < sh_fault_npoints; i++) {
    if (!sh_fault_matches(name, sh_fault_points[i])) continue;
    if (!is_benign(sh_fault_points[i])) return false;
    matched++;
  }
  return matched > 0;
}

bool sh_sim_faults_benign(void) {
  for (size_t i = 0; i < F.n; i++)
    if (F.pt[i].p > 0 && !entry_benign(F.pt[i].name)) return false;
  return true;
}

void sh_sim_faults_disable(void) { sh_simfault_end(); }
