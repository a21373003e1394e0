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

#include "run.h"

/* A new simulation: the strategy and its options, the schedule's stream
 * seeded from *seed_x (which advances). */
void sh_simstrategy_reset(const sh_sim_options *o, uint64_t *seed_x);

/* The workers are runnable (pct: the initial priorities and change points). */
void sh_simstrategy_start(sh_plat *p);

/* A yield point was passed (pct: maybe a change point). */
void sh_simstrategy_point(sh_plat *p);

/* At a scheduling point: the fiber to preempt the running one with, or
 * UINT32_MAX to stay. polling: the running fiber waits for something. */
uint32_t sh_simstrategy_preempt(sh_plat *p, bool polling);

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
