/* Schedules: recording and replay (replay.h). */
#include "replay.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "memmodel.h"
#include "nodemem.h"

/* Decisions recorded per run, at most (16 bytes each, 16 more with their context). */
#define SH_SIM_MAX_LOG (1u << 22)
/* Decisions of one step told apart under replay, at most: a step holds a
 * preemption, a forced switch and the faults decided between two
 * scheduling points, a handful; more are matched as if unused. */
#define SH_SIM_STEP_DECISIONS 64u
/* A step's stale reads (memmodel.h) alone never fill what is told apart. */
_Static_assert(SH_SIMMEM_STEP_CANDIDATES < SH_SIM_STEP_DECISIONS,
               "a step's stale reads leave room for its other decisions");
/* Scheduling points kept per run when asked, at most (24 bytes each). */
#define SH_SIM_MAX_POINTS (1u << 20)

static struct {
  sh_sim_choice *log; /* the decisions of this run, in order */
  sh_sim_decision_context *ctx; /* the same decisions' context, if ctx_on */
  bool ctx_on; /* sh_sim_record_points was on at the configure */
  size_t nlog, caplog;
  bool log_full;
  const sh_sim_choice *schedule; /* the one replayed, or NULL */
  size_t schedule_len;
  size_t replay_i; /* the first decision of the current step (or a later one) */
  uint64_t used;   /* bit j: decision replay_i + j was taken */
  sh_sim_point *points; /* sh_sim_record_points */
  size_t npoints, cappoints;
  /* Draws, per stream: how many the run made; under replay, the schedule's
   * values of each stream in order (draw_vals[draw_off[s] ..], draw_len[s]). */
  uint64_t drawn[SH_SIM_STREAMS];
  uint64_t *draw_vals;
  sh_sim_choice *steps_only; /* the schedule without its draws, if it had any */
  size_t draw_off[SH_SIM_STREAMS], draw_len[SH_SIM_STREAMS];
} R;

bool sh_simreplay_points_on; /* kept across runs */
bool sh_simreplay_replaying;
uint64_t sh_simreplay_until = UINT64_MAX;

/* The schedule's draws, split by stream and kept in order: the k-th draw of
 * a stream in the replay takes the k-th of its stream here; the decisions
 * anchored by step are matched in a copy without the draws, whose numbers
 * are no steps. Out of memory, the draws read as run out (0): a replay that
 * may diverge, which its hash comparison shows, rather than a failed run. */
static void draws_index(const sh_sim_choice *s, size_t n) {
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i].kind != SH_SIM_DRAW) continue;
    assert(s[i].to < SH_SIM_STREAMS);
    R.draw_len[s[i].to]++;
    total++;
  }
  if (total == 0) return;
  R.draw_vals = sh_simraw_malloc(total * sizeof(uint64_t));
  R.steps_only = sh_simraw_malloc((n - total + 1) * sizeof(*R.steps_only));
  if (R.draw_vals == NULL || R.steps_only == NULL) {
    memset(R.draw_len, 0, sizeof(R.draw_len));
    R.schedule_len = 0;
    return;
  }
  size_t at = 0, fill[SH_SIM_STREAMS], m = 0;
  for (uint32_t k = 0; k < SH_SIM_STREAMS; k++) {
    R.draw_off[k] = fill[k] = at;
    at += R.draw_len[k];
  }
  for (size_t i = 0; i < n; i++) {
    if (s[i].kind == SH_SIM_DRAW) R.draw_vals[fill[s[i].to]++] = s[i].value;
    else R.steps_only[m++] = s[i];
  }
  R.schedule = R.steps_only;
  R.schedule_len = m;
}

void sh_simreplay_reset(const sh_sim_choice *schedule, size_t len, bool keep_context) {
  sh_simraw_free(R.log);
  sh_simraw_free(R.ctx);
  sh_simraw_free(R.points);
  sh_simraw_free(R.draw_vals);
  sh_simraw_free(R.steps_only);
  memset(&R, 0, sizeof(R));
  R.schedule = schedule;
  R.schedule_len = len;
  /* The context (scheduling point, hash before) of each decision: for a
   * replay file, which carries it, and the determinism check. */
  R.ctx_on = keep_context || sh_simreplay_points_on;
  sh_simreplay_replaying = sh_simrun_state.opt.replay != 0 || schedule != NULL;
  if (schedule != NULL) draws_index(schedule, len);
  /* replay_then_free: the steps up to the last decision replay, the rest
   * is the strategy's (a schedule with none is a free run of the seed). */
  sh_simreplay_until = UINT64_MAX;
  if (sh_simrun_state.opt.replay_then_free != 0)
    sh_simreplay_until = R.schedule_len > 0 ? R.schedule[R.schedule_len - 1].step : 0;
}

uint64_t sh_sim_draw(uint32_t stream, uint64_t bound, uint64_t fresh) {
  assert(stream < SH_SIM_STREAMS);
  if (!sh_simrun_state.configured) return fresh;
  uint64_t k = R.drawn[stream]++, v = fresh;
  /* replay_then_free: past a stream's last value, its draws are fresh. */
  bool free_draw = sh_simrun_state.opt.replay_then_free != 0 && k >= R.draw_len[stream];
  if (sh_simreplay_replaying && !free_draw) {
    v = k < R.draw_len[stream] ? R.draw_vals[R.draw_off[stream] + k] : 0;
    if (bound != 0 && v >= bound) v = bound - 1;
  }
  assert(bound == 0 || v < bound);
  sh_simreplay_record_draw(stream, v);
  return v;
}

size_t sh_sim_schedule(const sh_sim_choice **out) {
  *out = R.log;
  return R.log_full ? 0 : R.nlog;
}

bool sh_sim_schedule_complete(void) { return !R.log_full; }

size_t sh_sim_schedule_context(const sh_sim_decision_context **out) {
  *out = R.ctx;
  return R.log_full || !R.ctx_on ? 0 : R.nlog;
}

uint32_t sh_sim_fault_id(const char *name) {
  uint64_t h = sh_simrun_str_hash_slow(name);
  return (uint32_t)(h ^ (h >> 32));
}

/* Whether a switch to fiber `to` can happen now. */
static bool can_run(const sh_simtab *p, uint32_t to) {
  return to < p->nfibers && p->f[to].state == SH_SIMRUN_RUNNABLE;
}

/* Takes the schedule's first unused decision of this step, kind and `to`
 * (UINT32_MAX: any fiber); entries of steps already passed (the run went
 * another way) are dropped. Within a step, decisions are matched by kind
 * and not by position, so that a shrunk schedule missing one of them still
 * replays the others. A switch (p not NULL) to a fiber that cannot run yet
 * is left for later in the step, not used up: a fiber that gives way when
 * nothing can run asks again after the clock jumps, still in the same step,
 * and the decision the recorded run made then is that one. */
static bool replay_take(const sh_simtab *p, uint64_t step, uint32_t kind, uint32_t to,
                        uint32_t *to_out) {
  const sh_sim_choice *s = R.schedule;
  size_t n = R.schedule_len;
  if (R.replay_i < n && s[R.replay_i].step < step) {
    while (R.replay_i < n && s[R.replay_i].step < step) R.replay_i++;
    R.used = 0;
  }
  for (uint32_t j = 0; j < SH_SIM_STEP_DECISIONS && R.replay_i + j < n; j++) {
    const sh_sim_choice *c = &s[R.replay_i + j];
    if (c->step != step) break;
    if ((R.used >> j & 1u) != 0 || c->kind != kind || (to != UINT32_MAX && c->to != to)) continue;
    if (p != NULL && !can_run(p, c->to)) return false;
    R.used |= 1ull << j;
    *to_out = c->to;
    return true;
  }
  return false;
}

/* The fiber the schedule names for this step and kind of switch, if it
 * names one that can run. */
static uint32_t replay_choice(const sh_simtab *p, uint64_t step, uint32_t kind) {
  uint32_t to;
  return replay_take(p, step, kind, UINT32_MAX, &to) ? to : UINT32_MAX;
}

uint32_t sh_simreplay_preempt(const sh_simtab *p, uint64_t step) {
  return replay_choice(p, step, SH_SIM_PREEMPT);
}

/* Unnamed, the next runnable fiber after the running one, round-robin: a
 * fair default, so that a sequence cut short or mutated (shrink, explore)
 * cannot starve a fiber that two spinning ones wait for, as "the lowest
 * runnable index" could (they would take turns for ever: a livelock no
 * real scheduler makes). */
uint32_t sh_simreplay_pick(const sh_simtab *p, uint64_t step, uint32_t skip) {
  uint32_t c = replay_choice(p, step, SH_SIM_FORCED);
  if (c != UINT32_MAX && c != skip) return c;
  for (uint32_t k = 1; k <= p->nfibers; k++) {
    uint32_t i = (p->cur + k) % p->nfibers;
    if (i != skip && p->f[i].state == SH_SIMRUN_RUNNABLE) return i;
  }
  return UINT32_MAX;
}

bool sh_simreplay_fault(uint64_t step, uint32_t id) {
  uint32_t to;
  return replay_take(NULL, step, SH_SIM_FAULT, id, &to);
}

bool sh_simreplay_stale(uint64_t step, uint32_t rank) {
  uint32_t to;
  return replay_take(NULL, step, SH_SIM_STALE, rank, &to);
}

/* Both arrays grow together (the context's only when kept). */
static bool log_grow(void) {
  size_t cap = R.caplog == 0 ? 1024 : R.caplog * 2;
  if (cap > SH_SIM_MAX_LOG) return false;
  sh_sim_choice *n = sh_simraw_realloc(R.log, cap * sizeof(*n));
  if (n == NULL) return false;
  R.log = n;
  if (!R.ctx_on) {
    R.caplog = cap;
    return true;
  }
  sh_sim_decision_context *c = sh_simraw_realloc(R.ctx, cap * sizeof(*c));
  if (c == NULL) return false;
  R.ctx = c;
  R.caplog = cap;
  return true;
}

/* Bounded: past SH_SIM_MAX_LOG the record is incomplete (log_full) and
 * cannot be replayed or shrunk. */
static void record(const sh_sim_choice *c, const char *where) {
  if (R.log_full) return;
  if (R.nlog == R.caplog && !log_grow()) {
    R.log_full = true;
    return;
  }
  SH_ASSERT(R.nlog < R.caplog && R.caplog <= SH_SIM_MAX_LOG);
  if (R.ctx_on)
    R.ctx[R.nlog] = (sh_sim_decision_context){.where = where, .hash = sh_simrun_state.hash};
  R.log[R.nlog++] = *c;
}

void sh_simreplay_record_at(uint64_t step, uint32_t to, sh_sim_choice_kind kind,
                            const char *where) {
  record(&(sh_sim_choice){.step = step, .to = to, .kind = kind}, where);
}

void sh_simreplay_record_draw(uint32_t stream, uint64_t value) {
  record(&(sh_sim_choice){.value = value, .to = stream, .kind = SH_SIM_DRAW}, NULL);
}

void sh_simreplay_record(uint64_t step, uint32_t to, sh_sim_choice_kind kind) {
  sh_simreplay_record_at(step, to, kind, NULL);
}

void sh_sim_record_points(bool on) { sh_simreplay_points_on = on; }

size_t sh_sim_points(const sh_sim_point **out) {
  *out = R.points;
  return R.npoints;
}

/* Bounded by SH_SIM_MAX_POINTS: the points past it are not kept. */
void sh_simreplay_point_keep(uint64_t step, const char *where) {
  if (R.npoints == R.cappoints) {
    size_t cap = R.cappoints == 0 ? 4096 : R.cappoints * 2;
    sh_sim_point *n =
        cap <= SH_SIM_MAX_POINTS ? sh_simraw_realloc(R.points, cap * sizeof(*n)) : NULL;
    if (n == NULL) return;
    R.points = n;
    R.cappoints = cap;
  }
  SH_ASSERT(R.npoints < R.cappoints && R.cappoints <= SH_SIM_MAX_POINTS);
  R.points[R.npoints++] =
      (sh_sim_point){.step = step, .where = where, .hash = sh_simrun_state.hash};
}
