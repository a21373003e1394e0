/*
 * The clocks of stackhouse.h, callable from any thread: sh_clock_ms (the
 * monotonic clock of timeouts and timers) and sh_time_ms (wall time), both
 * read through the platform seam, so that the simulator's are virtual.
 */
#include <stackhouse/stackhouse.h>

#include "plat.h"

int64_t sh_clock_ms(void) { return (int64_t)(sh_plat_now_ns() / 1000000u); }

int64_t sh_time_ms(void) { return (int64_t)(sh_plat_wall_ns() / 1000000u); }
