/*
 * Timeouts, one convention for every call that takes one (stackhouse.h):
 * an int64_t count of milliseconds; SH_NOWAIT (0) does not wait at all,
 * SH_FOREVER (-1) waits without limit, a positive value waits at most that
 * long; any other negative value is a programming error (-EINVAL).
 */
#ifndef SH_TIMEOUT_H
#define SH_TIMEOUT_H

#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

#include "base/check.h"
#include "plat.h"

/* Delays are capped far below the clock's range (about 36 years), so that
 * no sum with the current time overflows. */
#define SH_TIMEOUT_MAX_NS (UINT64_MAX / 16)

static inline bool sh_timeout_valid(int64_t ms) { return ms >= SH_FOREVER; }

/* A non-negative count of milliseconds in nanoseconds, capped. */
static inline uint64_t sh_timeout_ns(int64_t ms) {
  SH_ASSERT(ms >= 0); /* SH_FOREVER is a deadline's business */
  return (uint64_t)ms > SH_TIMEOUT_MAX_NS / 1000000u ? SH_TIMEOUT_MAX_NS : (uint64_t)ms * 1000000u;
}

/* The absolute deadline of a valid timeout, on the sh_plat_now_ns clock:
 * SH_PLAT_NO_DEADLINE for SH_FOREVER. */
static inline uint64_t sh_timeout_deadline(int64_t ms) {
  if (ms == SH_FOREVER) return SH_PLAT_NO_DEADLINE;
  uint64_t now = sh_plat_now_ns(), delay = sh_timeout_ns(ms);
  SH_ASSERT(now <= UINT64_MAX - delay); /* the cap above: about 548 years of uptime */
  return now + delay;
}

#endif
