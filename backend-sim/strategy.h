/*
 * The scheduling strategies (strategy.c): random, pct and none. They own
 * the schedule's random stream and PCT's priorities and change points; the
 * run asks them what to do at each scheduling point. Under replay their
 * choices are not asked for, but their bookkeeping (sh_simstrategy_start,
 * _point, _demote, _place) still runs, so the clock advances as it did.
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
  uint64_t changes[SH_SIM_MAX_CHANGES];
  uint32_t nchanges, next_change;
} sh_simstrategy;

extern sh_simstrategy sh_simstrategy_state;

/* A new simulation: the strategy and its options, the schedule's stream
 * seeded from *seed_x (which advances). */
void sh_simstrategy_reset(const sh_sim_options *o, uint64_t *seed_x);

/* The workers are runnable (pct: the initial priorities and change points). */
void sh_simstrategy_start(sh_plat *p);

/* A runnable fiber other than `skip` (UINT32_MAX: none skipped), uniformly,
 * or UINT32_MAX if there is none. */
uint32_t sh_simstrategy_pick_uniform(sh_plat *p, uint32_t skip);

/* The runnable fiber of highest priority (ties: lowest index), or UINT32_MAX. */
uint32_t sh_simstrategy_pick_highest(sh_plat *p);

/* pct: the running fiber passed change point next_change. */
void sh_simstrategy_change(sh_plat *p);

/* A yield point was passed (pct: maybe a change point). */
static inline void sh_simstrategy_point(sh_plat *p) {
  sh_simstrategy *t = &sh_simstrategy_state;
  t->points++;
  if (t->kind == SH_SIM_PCT && t->next_change < t->nchanges &&
      t->points == t->changes[t->next_change])
    sh_simstrategy_change(p);
}

/* At a scheduling point: the fiber to preempt the running one with, or
 * UINT32_MAX to stay. polling: the running fiber waits for something. */
static inline uint32_t sh_simstrategy_preempt(sh_plat *p, bool polling) {
  sh_simstrategy *t = &sh_simstrategy_state;
  uint32_t permille = t->switch_permille;
  if (polling && permille < SH_SIM_POLL_SWITCH_PERMILLE) permille = SH_SIM_POLL_SWITCH_PERMILLE;
  switch (t->kind) {
  case SH_SIM_RANDOM:
    return sh_simrng_below(&t->rng, 1000) < permille ? sh_simstrategy_pick_uniform(p, p->cur)
                                                     : UINT32_MAX;
  case SH_SIM_PCT:
    return sh_simstrategy_pick_highest(p);
  case SH_SIM_NONE:
    break;
  }
  return UINT32_MAX;
}

/* Where a switch must happen: a runnable fiber other than `skip`
 * (UINT32_MAX: none skipped), or UINT32_MAX if there is none. */
uint32_t sh_simstrategy_pick(sh_plat *p, uint32_t skip);

/* The running fiber gave way by itself (a CPU yield, a spent quantum):
 * pct drops it below every other, so that the one it waits for runs. */
void sh_simstrategy_demote(sh_plat *p);

/* The thread fiber nf was just added (pct: its priority). */
void sh_simstrategy_place(sh_plat *p, sh_simrun_fiber *nf);

/* Whether nothing but time can happen while the running fiber polls: no
 * other fiber can run, or the strategy would not switch to one at a
 * polling step anyway. */
bool sh_simstrategy_polls_alone(sh_plat *p);

#endif
