/* Schedules: recording and replay (replay.h). */
#include "replay.h"

#include <stdlib.h>
#include <string.h>

/* Switches recorded per run, at most (16 bytes each). */
#define SH_SIM_MAX_LOG (1u << 22)

static struct {
  sh_sim_choice *log; /* the switches of this run, in order */
  size_t nlog, caplog;
  bool log_full;
  const sh_sim_choice *schedule; /* the one replayed, or NULL */
  size_t schedule_len;
  size_t replay_i; /* the next choice of schedule */
} R;

void sh_simreplay_reset(const sh_sim_choice *schedule, size_t len) {
  free(R.log);
  memset(&R, 0, sizeof(R));
  R.schedule = schedule;
  R.schedule_len = len;
}

size_t sh_sim_schedule(const sh_sim_choice **out) {
  *out = R.log;
  return R.log_full ? 0 : R.nlog;
}

/* The fiber the schedule names for this step and kind of switch, if it
 * names one that can run; entries for steps already passed (the run went
 * another way) are dropped. */
static uint32_t replay_choice(const sh_plat *p, uint64_t step, bool forced) {
  const sh_sim_choice *s = R.schedule;
  size_t n = R.schedule_len;
  while (R.replay_i < n && s[R.replay_i].step < step) R.replay_i++;
  /* A preemption and a forced switch can share a step (a yield point, then
   * a park before the next step): each entry is for its own kind. */
  if (R.replay_i == n || s[R.replay_i].step != step || s[R.replay_i].forced != forced)
    return UINT32_MAX;
  uint32_t to = s[R.replay_i++].to;
  return to < p->nfibers && p->f[to].state == SH_SIMRUN_RUNNABLE ? to : UINT32_MAX;
}

uint32_t sh_simreplay_preempt(const sh_plat *p, uint64_t step) {
  return replay_choice(p, step, false);
}

/* The lowest runnable index is a choice that needs no entry. */
uint32_t sh_simreplay_pick(const sh_plat *p, uint64_t step, uint32_t skip) {
  uint32_t c = replay_choice(p, step, true);
  if (c != UINT32_MAX && c != skip) return c;
  for (uint32_t i = 0; i < p->nfibers; i++)
    if (i != skip && p->f[i].state == SH_SIMRUN_RUNNABLE) return i;
  return UINT32_MAX;
}

/* Bounded: past SH_SIM_MAX_LOG the record is incomplete (log_full) and
 * cannot be replayed or shrunk. */
void sh_simreplay_record(uint64_t step, uint32_t to, bool forced) {
  if (R.nlog == R.caplog) {
    size_t cap = R.caplog == 0 ? 1024 : R.caplog * 2;
    sh_sim_choice *n = cap <= SH_SIM_MAX_LOG ? realloc(R.log, cap * sizeof(*n)) : NULL;
    if (n == NULL) {
      R.log_full = true;
      return;
    }
    R.log = n;
    R.caplog = cap;
  }
  R.log[R.nlog++] = (sh_sim_choice){.step = step, .to = to, .forced = forced};
}
