/*
 * The scheduling strategies (strategy.c; msgpct.c for PCT over messages):
 * random, pct, none, msgpct and delay. They own the schedule's random
 * stream, the priorities, change points and delays; the run asks them what
 * to do at each scheduling point. Under replay their choices are not asked
 * for, but their bookkeeping (sh_simstrategy_start, _point, _demote, _place,
 * msgpct's runs and deliveries) still runs, so the clock advances as it did.
 */
#ifndef SH_SIM_STRATEGY_H
#define SH_SIM_STRATEGY_H

#include <stackhouse/sim.h>
#include <stdbool.h>
#include <stdint.h>

#include "rng.h"
#include "run.h"

/* PCT change points, at most (pct_depth is clamped to this + 1). */
#define SH_SIM_MAX_CHANGES 16

/* random: a poll touches nothing another fiber could race with, so where it
 * gives way matters little; it gives way at least this often (permille), as
 * a spinning thread and its producer would both run on a real machine. */
#define SH_SIM_POLL_SWITCH_PERMILLE 500u

/* The strategy's state, one per simulation. Only strategy.c and the inline
 * functions below touch it: it is in the header so that the two questions
 * asked at every scheduling point compile to a few instructions. */
typedef struct sh_simstrategy {
  sh_sim_strategy kind;
  uint32_t switch_permille;
  uint32_t pct_depth;
  uint64_t pct_steps;
  sh_simrng rng;   /* the schedule's choices */
  uint64_t points; /* yield points passed (pct's change points count these) */
  int64_t prio_floor;
  uint64_t changes[SH_SIM_MAX_CHANGES]; /* pct, msgpct: change points; delay: delays (sorted) */
  uint32_t nchanges, next_change;
  bool delay_due; /* delay: a delay point was passed, the next preemption is owed */
  uint64_t points_base; /* delay: `points` at the system's start (its delays count from there) */
  /* msgpct (msgpct.c): priorities are hashes of a house's creation number
   * (or a fiber's index) with this salt, drawn at the start, so no table
   * grows with the houses; only the houses a change point dropped are kept. */
  uint64_t salt;
  uint64_t deliveries; /* messages handed over (msgpct's change points count these) */
  uint64_t dropped[SH_SIM_MAX_CHANGES]; /* the house each change point dropped, in order */
  uint32_t ndropped;
} sh_simstrategy;

extern sh_simstrategy sh_simstrategy_state;

/* A new simulation: the strategy and its options, the schedule's stream
 * seeded from *seed_x (which advances). */
void sh_simstrategy_reset(const sh_sim_options *o, uint64_t *seed_x);

/* pct, msgpct, delay: pct_depth - 1 points drawn among 1..pct_steps, sorted. */
void sh_simstrategy_draw_points(void);

/* The workers are runnable (pct: the initial priorities and change points). */
void sh_simstrategy_start(sh_simtab *p);

/* A runnable fiber other than `skip` (UINT32_MAX: none skipped), uniformly,
 * or UINT32_MAX if there is none. */
uint32_t sh_simstrategy_pick_uniform(sh_simtab *p, uint32_t skip);

/* The runnable fiber of highest priority (ties: lowest index), or UINT32_MAX. */
uint32_t sh_simstrategy_pick_highest(sh_simtab *p);

/* pct: the running fiber passed change point next_change. */
void sh_simstrategy_change(sh_simtab *p);

/* delay: the yield points reached a delay point. */
void sh_simstrategy_delay_point(void);

/* A yield point was passed (pct: maybe a change point; delay: maybe a delay). */
static inline void sh_simstrategy_point(sh_simtab *p) {
  sh_simstrategy *t = &sh_simstrategy_state;
  t->points++;
  if (t->next_change >= t->nchanges) return;
  if (t->kind == SH_SIM_PCT && t->points == t->changes[t->next_change])
    sh_simstrategy_change(p);
  else if (t->kind == SH_SIM_DELAY && t->points - t->points_base >= t->changes[t->next_change])
    sh_simstrategy_delay_point();
}

/* delay: the fiber a delay owes the CPU to (the next runnable one after the
 * running fiber, by index, round-robin), or UINT32_MAX when none is owed. */
uint32_t sh_simstrategy_delay_preempt(sh_simtab *p);

/* ---- msgpct (msgpct.c) ---- */

/* The workers are runnable: the salt, the fibers' priorities, the change points. */
void sh_simmsgpct_start(sh_simtab *p);
/* A thread fiber was added: its priority. */
void sh_simmsgpct_place(sh_simrun_fiber *nf);
/* The running fiber begins (begin) or ends a run of house `house`. */
void sh_simmsgpct_run(sh_simtab *p, uint64_t house, bool begin);
/* The running fiber hands a message over to house `house`. */
void sh_simmsgpct_deliver(sh_simtab *p, uint64_t house);
/* Whether the strategy picks by priority (pct, msgpct). */
static inline bool sh_simstrategy_by_priority(void) {
  return sh_simstrategy_state.kind == SH_SIM_PCT || sh_simstrategy_state.kind == SH_SIM_MSGPCT;
}

/* At a scheduling point: the fiber to preempt the running one with, or
 * UINT32_MAX to stay. polling: the running fiber waits for something. */
static inline uint32_t sh_simstrategy_preempt(sh_simtab *p, bool polling) {
  sh_simstrategy *t = &sh_simstrategy_state;
  uint32_t permille = t->switch_permille;
  if (polling && permille < SH_SIM_POLL_SWITCH_PERMILLE) permille = SH_SIM_POLL_SWITCH_PERMILLE;
  switch (t->kind) {
  case SH_SIM_RANDOM:
    return sh_simrng_below(&t->rng, 1000) < permille ? sh_simstrategy_pick_uniform(p, p->cur)
                                                     : UINT32_MAX;
  case SH_SIM_PCT:
  case SH_SIM_MSGPCT:
    return sh_simstrategy_pick_highest(p);
  case SH_SIM_DELAY:
    return sh_simstrategy_delay_preempt(p);
  case SH_SIM_NONE:
    break;
  }
  return UINT32_MAX;
}

/* Where a switch must happen: a runnable fiber other than `skip`
 * (UINT32_MAX: none skipped), or UINT32_MAX if there is none. */
uint32_t sh_simstrategy_pick(sh_simtab *p, uint32_t skip);

/* The running fiber gave way by itself (a CPU yield, a spent quantum):
 * pct drops it below every other, so that the one it waits for runs. */
void sh_simstrategy_demote(sh_simtab *p);

/* The thread fiber nf was just added (pct: its priority). */
void sh_simstrategy_place(sh_simtab *p, sh_simrun_fiber *nf);

/* Whether nothing but time can happen while the running fiber polls: no
 * other fiber can run, or the strategy would not switch to one at a
 * polling step anyway. */
bool sh_simstrategy_polls_alone(sh_simtab *p);

#endif
