/*
 * Choice sequences (replay.c): every decision of a run is recorded (a
 * switch: its step, fiber, forced or a preemption; a fault that fired: its
 * step and point; a stale read; a value drawn from a stream), and
 * sh_sim_schedule hands the record out. Under replay (options.replay or a
 * schedule) the run's decisions come from that list instead of the
 * strategy, the fault rates and the streams (shrink.c cuts failing
 * sequences down).
 */
#ifndef SH_SIM_REPLAY_H
#define SH_SIM_REPLAY_H

#include <stackhouse/sim.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "run.h"

/* A new simulation: the record is emptied; schedule (NULL: none) is the
 * one to replay, kept alive by the caller; keep_context: each decision's
 * context is kept too. */
void sh_simreplay_reset(const sh_sim_choice *schedule, size_t len, bool keep_context);

/* Whether a schedule is being replayed: the run's options ask for a replay
 * (an empty schedule is one) or name a schedule, and, with
 * options.replay_then_free, the run has not passed the schedule's last
 * decision (sh_simreplay_until) yet; set by sh_simreplay_reset. Inline, two
 * loads: asked at every scheduling point. */
extern bool sh_simreplay_replaying;
extern uint64_t sh_simreplay_until; /* the last step replayed (UINT64_MAX: every one) */
static inline bool sh_simreplay_on(void) {
  return sh_simreplay_replaying && sh_simrun_state.steps <= sh_simreplay_until;
}

/* At a scheduling point of step `step`: the fiber the schedule preempts
 * with there, if it names one that can run, else UINT32_MAX. */
uint32_t sh_simreplay_preempt(const sh_simtab *p, uint64_t step);

/* Where a switch must happen at step `step`: the scheduled fiber, else the
 * next runnable one after the running fiber (round-robin) other than
 * `skip` (UINT32_MAX: none skipped), else UINT32_MAX. */
uint32_t sh_simreplay_pick(const sh_simtab *p, uint64_t step, uint32_t skip);

/* Under replay, at fault point `id` (sh_sim_fault_id) at step `step`:
 * whether the schedule has it fire there. */
bool sh_simreplay_fault(uint64_t step, uint32_t id);

/* Under replay, at the rank-th load of step `step` that could read a stale
 * value (memmodel.h): whether the schedule has it read stale. */
bool sh_simreplay_stale(uint64_t step, uint32_t rank);

/* Records a decision at step `step`: a switch to fiber `to`, or the fault
 * point `to` fired (SH_SIM_FAULT); with the trace hash so far. */
void sh_simreplay_record(uint64_t step, uint32_t to, sh_sim_choice_kind kind);

/* The same, at the scheduling point named `where` (a static string). */
void sh_simreplay_record_at(uint64_t step, uint32_t to, sh_sim_choice_kind kind,
                            const char *where);

/* Records a value drawn from stream `stream` (SH_SIM_DRAW). */
void sh_simreplay_record_draw(uint32_t stream, uint64_t value);

/* At a scheduling point named `where`, its step passed: kept if
 * sh_sim_record_points is on. Inline: asked at every step, and off but for
 * a determinism check. */
extern bool sh_simreplay_points_on;
void sh_simreplay_point_keep(uint64_t step, const char *where);
static inline void sh_simreplay_point(uint64_t step, const char *where) {
  if (sh_simreplay_points_on) sh_simreplay_point_keep(step, where);
}

#endif
