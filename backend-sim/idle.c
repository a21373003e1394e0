/*
 * Idle time on demand (sim.h, sh_sim_idle): a fiber that is not a worker
 * lets the simulated system sit for a stretch of virtual time, the way the
 * scenario framework checks that idle workers stay asleep. The stretch is
 * the caller's, not the workload's: it moves the run's virtual-time limit
 * along with it, so a scenario's vtime_limit_ms still bounds its workload.
 */
#include <stackhouse/sim.h>

#include <errno.h>

#include "base/check.h"
#include "misuse.h"
#include "run.h"

static sh_simrun *const S = &sh_simrun_state;

int sh_sim_idle(uint64_t ns) {
  sh_simmisuse_check_thread("sh_sim_idle");
  sh_simtab *p = sh_simrun_active();
  /* Workers never block (loop.c parks them); only a started system idles. */
  if (p == NULL || sh_simrun_is_worker(p, p->cur) || ns == 0) return -EINVAL;
  uint64_t deadline = S->now + ns;
  if (deadline < S->now) return -EINVAL; /* past the clock's range */
  if (S->vtime_limit != UINT64_MAX)
    S->vtime_limit = S->vtime_limit + ns < S->vtime_limit ? UINT64_MAX : S->vtime_limit + ns;
  sh_plat_event *e;
  int rc = sh_plat_event_new(&e);
  if (rc != 0) return rc;
  /* Nobody sets it: the wait ends at its deadline, whatever the workers do
   * meanwhile (a wait, bounded by the deadline and the run's step limit). */
  rc = sh_plat_event_wait_until(e, deadline);
  sh_plat_event_free(e);
  /* A step of its own: the wait's wake is a decision (a forced switch)
   * taken without a step, and a replay tells apart only so many decisions
   * of one step (replay.c), which a caller idling in chunks would pass. */
  sh_simrun_point("sim.idle", false);
  /* Nobody has the event to set it: only the deadline ends the wait. */
  SH_ASSERT(rc == -ETIMEDOUT && S->now >= deadline);
  return 0;
}
