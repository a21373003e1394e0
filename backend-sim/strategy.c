/*
 * The scheduling strategies (strategy.h). At each scheduling point:
 *   random  switch with probability switch_permille/1000 (at a polling step
 *           at least 1/2) to a runnable fiber chosen uniformly;
 *   pct     run the runnable fiber of highest priority (PCT: random distinct
 *           initial priorities, pct_depth - 1 change points among the first
 *           pct_steps yield points, each dropping the running fiber below all);
 *   msgpct  the same over messages (msgpct.c): a fiber running a house has
 *           the house's priority, and the change points count deliveries;
 *   none    never switch at a step;
 *   delay   none's schedule, but deterministic, with pct_depth - 1 delays
 *           among the first pct_steps yield points: at a delay the running
 *           fiber gives way to the next runnable one (delay-bounded search).
 * A thread fiber created under pct gets a priority of a random rank among
 * the live fibers still at their initial priorities (those above every change
 * point), drawn from the schedule's generator.
 * Where a switch must happen, random and none pick a runnable fiber
 * uniformly, pct the one of highest priority. A fiber that yields its CPU
 * (a spin wait) or spent its quantum drops, under pct, to the lowest
 * priority so that the fiber it waits for runs.
 */
#include "strategy.h"

#include "base/check.h"
#include "replay.h"

#include <assert.h>

#include <errno.h>
#include <string.h>

sh_simstrategy sh_simstrategy_state;

/* The one strategy state (strategy.h), by a short name. */
#define T sh_simstrategy_state

static const char *const strategy_names[] = {"random", "pct", "none", "msgpct", "delay"};
#define NSTRATEGIES (sizeof strategy_names / sizeof strategy_names[0])

int sh_sim_strategy_parse(const char *name, sh_sim_strategy *out) {
  for (unsigned i = 0; i < NSTRATEGIES; i++) {
    if (name != NULL && strcmp(name, strategy_names[i]) == 0) {
      *out = (sh_sim_strategy)i;
      return 0;
    }
  }
  return -EINVAL;
}

const char *sh_sim_strategy_name(sh_sim_strategy s) {
  return (unsigned)s < NSTRATEGIES ? strategy_names[s] : "?";
}

void sh_simstrategy_reset(const sh_sim_options *o, uint64_t *seed_x) {
  memset(&T, 0, sizeof(T));
  T.kind = o->strategy;
  T.switch_permille = o->switch_permille;
  T.pct_depth = o->pct_depth;
  if (T.pct_depth == 0) T.pct_depth = 1;
  if (T.pct_depth > SH_SIM_MAX_CHANGES + 1) T.pct_depth = SH_SIM_MAX_CHANGES + 1;
  T.pct_steps = o->pct_steps != 0 ? o->pct_steps : 1;
  sh_simrng_seed(&T.rng, seed_x);
}

static uint64_t rng_below(uint64_t n) { return sh_simrng_below(&T.rng, n); }

/* ---- picking a fiber ------------------------------------------------------- */

/* The runnable set's words (run.h) in use. */
#define WORDS(p) (((p)->nfibers + 63u) / 64u)

/* Runnable fibers but `skip`, from the runnable set. */
static uint32_t count_but(const sh_simtab *p, uint32_t skip) {
  uint32_t n = p->nrunnable;
  if (skip < p->nfibers && p->f[skip].state == SH_SIMRUN_RUNNABLE) n--;
  return n;
}

/* Counts the candidates, draws one, then finds it (in the order of their
 * indices): no list to fill. */
uint32_t sh_simstrategy_pick_uniform(sh_simtab *p, uint32_t skip) {
  uint32_t n = count_but(p, skip);
  if (n == 0) return UINT32_MAX;
  uint64_t k = rng_below(n);
  for (uint32_t w = 0; w < WORDS(p); w++) {
    /* Bounded by the bits of a word. */
    for (uint64_t bits = p->runnable[w]; bits != 0; bits &= bits - 1) {
      uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(bits);
      if (i != skip && k-- == 0) return i;
    }
  }
  assert(0 && "the runnable set changed under the pick");
  return UINT32_MAX;
}

uint32_t sh_simstrategy_pick_highest(sh_simtab *p) {
  uint32_t best = UINT32_MAX;
  for (uint32_t w = 0; w < WORDS(p); w++) {
    for (uint64_t bits = p->runnable[w]; bits != 0; bits &= bits - 1) {
      uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(bits);
      if (best == UINT32_MAX || p->f[i].prio > p->f[best].prio) best = i;
    }
  }
  return best;
}

static bool candidate(const sh_simtab *p, uint32_t i, uint32_t skip) {
  return i != skip && p->f[i].state == SH_SIMRUN_RUNNABLE;
}

/* The first runnable fiber after `from` by index, round-robin, other than
 * `skip`, or UINT32_MAX. */
static uint32_t pick_round_robin(const sh_simtab *p, uint32_t from, uint32_t skip) {
  for (uint32_t k = 1; k <= p->nfibers; k++) {
    uint32_t i = (from + k) % p->nfibers;
    if (candidate(p, i, skip)) return i;
  }
  return UINT32_MAX;
}

uint32_t sh_simstrategy_pick(sh_simtab *p, uint32_t skip) {
  if (T.kind == SH_SIM_DELAY) return pick_round_robin(p, p->cur, skip);
  if (!sh_simstrategy_by_priority()) return sh_simstrategy_pick_uniform(p, skip);
  uint32_t b = sh_simstrategy_pick_highest(p);
  if (b != skip || b == UINT32_MAX) return b;
  /* skip is the highest: the next highest below it. */
  int64_t keep = p->f[skip].prio;
  p->f[skip].prio = INT64_MIN;
  b = sh_simstrategy_pick_highest(p);
  p->f[skip].prio = keep;
  return b == skip ? UINT32_MAX : b;
}

/* Whether a fiber other than the running one could run now. */
static bool others_runnable(const sh_simtab *p) { return count_but(p, p->cur) > 0; }

/* none never switches at a polling step; pct not while the poller has the
 * highest priority. */
bool sh_simstrategy_polls_alone(sh_simtab *p) {
  switch (T.kind) {
  case SH_SIM_NONE:
  case SH_SIM_DELAY: /* its delays fall on yield points that do not poll */
    return true;
  case SH_SIM_PCT:
  case SH_SIM_MSGPCT:
    return sh_simstrategy_pick_highest(p) == p->cur;
  case SH_SIM_RANDOM:
    break;
  }
  return !others_runnable(p);
}

/* ---- PCT's priorities ------------------------------------------------------ */

void sh_simstrategy_draw_points(void) {
  T.nchanges = T.pct_depth - 1;
  for (uint32_t i = 0; i < T.nchanges; i++) T.changes[i] = 1 + rng_below(T.pct_steps);
  /* Sorted, so the step loop checks only the next one (insertion sort: d <= 17). */
  for (uint32_t i = 1; i < T.nchanges; i++)
    for (uint32_t j = i; j > 0 && T.changes[j - 1] > T.changes[j]; j--) {
      uint64_t t = T.changes[j];
      T.changes[j] = T.changes[j - 1];
      T.changes[j - 1] = t;
    }
}

/* Distinct random initial priorities d .. d+n-1 and d-1 change points. */
static void pct_init(sh_simtab *p) {
  uint32_t n = p->nfibers;
  int64_t order[SH_SIM_MAX_FIBERS];
  for (uint32_t i = 0; i < n; i++) order[i] = i;
  for (uint32_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
    uint32_t j = (uint32_t)rng_below(i + 1);
    int64_t t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  for (uint32_t i = 0; i < n; i++) p->f[i].prio = (int64_t)T.pct_depth + order[i];
  sh_simstrategy_draw_points();
  T.prio_floor = 0;
}

void sh_simstrategy_start(sh_simtab *p) {
  if (T.kind == SH_SIM_PCT) pct_init(p);
  if (T.kind == SH_SIM_MSGPCT) sh_simmsgpct_start(p);
  if (T.kind == SH_SIM_DELAY) sh_simstrategy_draw_points();
  /* pct keeps its old count (a second system's points may then pass
   * unseen); the newer strategies count from each system's start. */
  if (T.kind == SH_SIM_DELAY || T.kind == SH_SIM_MSGPCT) T.next_change = 0;
  T.points_base = T.points;
  T.delay_due = false;
}

/* ---- delay ------------------------------------------------------------------- */

void sh_simstrategy_delay_point(void) {
  SH_ASSERT(T.kind == SH_SIM_DELAY && T.next_change < T.nchanges);
  T.next_change++;
  /* Under a replay the schedule decides: a delay of its prefix
   * (replay_then_free) is not owed to the free part. */
  T.delay_due = !sh_simreplay_on();
}

uint32_t sh_simstrategy_delay_preempt(sh_simtab *p) {
  if (!T.delay_due) return UINT32_MAX;
  T.delay_due = false;
  return pick_round_robin(p, p->cur, p->cur);
}

void sh_simstrategy_change(sh_simtab *p) {
  /* Change point i drops the running fiber to priority d - i: below every
   * initial priority, and below the earlier change points. */
  T.next_change++;
  p->f[p->cur].prio = (int64_t)T.pct_depth - (int64_t)T.next_change;
}

void sh_simstrategy_demote(sh_simtab *p) {
  if (sh_simstrategy_by_priority()) p->f[p->cur].prio = --T.prio_floor;
}

/* pct: the new fiber nf takes a random rank among the live fibers still at
 * their initial priorities (>= pct_depth: change points and CPU yields drop
 * a fiber below all of them), and those at or above that rank move up one,
 * so priorities stay distinct. */
static void pct_place(sh_simtab *p, sh_simrun_fiber *nf) {
  int64_t base = (int64_t)T.pct_depth;
  uint32_t ranked = 0;
  int64_t top = base - 1;
  for (uint32_t i = 0; i < p->nfibers; i++) {
    const sh_simrun_fiber *f = &p->f[i];
    if (f == nf || f->prio < base) continue;
    if (f->state != SH_SIMRUN_DONE) ranked++;
    if (f->prio > top) top = f->prio;
  }
  uint32_t rank = (uint32_t)rng_below((uint64_t)ranked + 1);
  /* The priority of the live fiber with `rank` live ones below it; above all if none. */
  int64_t at = top + 1;
  for (uint32_t i = 0; i < p->nfibers && rank < ranked; i++) {
    const sh_simrun_fiber *f = &p->f[i];
    if (f == nf || f->prio < base || f->state == SH_SIMRUN_DONE) continue;
    uint32_t below = 0;
    for (uint32_t j = 0; j < p->nfibers; j++) {
      const sh_simrun_fiber *g = &p->f[j];
      below += g != nf && g->state != SH_SIMRUN_DONE && g->prio >= base && g->prio < f->prio;
    }
    if (below == rank) at = f->prio;
  }
  for (uint32_t i = 0; i < p->nfibers; i++)
    if (&p->f[i] != nf && p->f[i].prio >= at) p->f[i].prio++;
  nf->prio = at;
}

void sh_simstrategy_place(sh_simtab *p, sh_simrun_fiber *nf) {
  if (T.kind == SH_SIM_PCT) pct_place(p, nf);
  if (T.kind == SH_SIM_MSGPCT) sh_simmsgpct_place(nf);
}
