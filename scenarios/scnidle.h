/*
 * The scenario framework's idle check (scnidle.c): after a run's workload,
 * the simulated system sits idle and its workers must stay asleep. Internal
 * to the framework (scenario.c calls it); the rule is in scnidle.c and
 * docs/simulator.md, "The idle check".
 */
#ifndef SH_SCNIDLE_H
#define SH_SCNIDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

typedef enum sh_scn_idle_verdict {
  SH_SCN_IDLE_HELD = 0,  /* idle, and the workers stayed asleep */
  SH_SCN_IDLE_ACTIVE,    /* the system kept working: nothing claimed */
  SH_SCN_IDLE_SKIPPED,   /* not in the simulator: nothing measured */
  SH_SCN_IDLE_BUSY,      /* idle, and a worker kept waking: `why` says how */
} sh_scn_idle_verdict;

/* Lets sys (started, its workload over, not shut down) idle and checks its
 * workers. pool_idle_ns and spin_ns are the system's (sh_config). On
 * SH_SCN_IDLE_BUSY, `why` (n bytes) holds the failure's text. */
sh_scn_idle_verdict sh_scn_idle_check(sh_system *sys, uint64_t pool_idle_ns, uint64_t spin_ns,
                                      char *why, size_t n);

#endif
