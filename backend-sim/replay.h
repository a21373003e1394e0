/*
 * Schedules (replay.c): every switch of a run is recorded (step, fiber,
 * forced or a preemption), and sh_sim_schedule hands the record out. With
 * options.schedule set, the run's choices come from that list instead of
 * the strategy (replay; shrink.c cuts failing schedules down).
 */
#ifndef SH_SIM_REPLAY_H
#define SH_SIM_REPLAY_H

#include <stackhouse/sim.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "run.h"

/* A new simulation: the record is emptied; schedule (NULL: none) is the
 * one to replay, kept alive by the caller. */
void sh_simreplay_reset(const sh_sim_choice *schedule, size_t len);

/* Whether a schedule is being replayed: the run's options name one (the
 * one sh_simreplay_reset was given). Inline: asked at every scheduling point. */
static inline bool sh_simreplay_on(void) { return sh_simrun_state.opt.schedule != NULL; }

/* At a scheduling point of step `step`: the fiber the schedule preempts
 * with there, if it names one that can run, else UINT32_MAX. */
uint32_t sh_simreplay_preempt(const sh_plat *p, uint64_t step);

/* Where a switch must happen at step `step`: the scheduled fiber, else the
 * runnable one of lowest index other than `skip` (UINT32_MAX: none
 * skipped), else UINT32_MAX. */
uint32_t sh_simreplay_pick(const sh_plat *p, uint64_t step, uint32_t skip);

/* Records a switch to `to` at step `step`. */
void sh_simreplay_record(uint64_t step, uint32_t to, bool forced);

#endif
