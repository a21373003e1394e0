/*
 * The worker loop: what a worker does with its queues.
 *   mounting -> IO actors (no budget) -> timers -> state actors (under a
 *   deadline checked every 16 houses) -> stealing -> poll briefly -> park.
 */
#ifndef SH_LOOP_H
#define SH_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "sched/worker.h"

/* Houses a turn takes from the mounting and IO-actor queues at most. Kept
 * where a turn is counted, in loop.c's loops, which compare each take with
 * it: a header holds no turn to check it in. */
#define SH_TURN_MAX_HOUSES 4096u
/* Readiness reports one IO phase takes from the platform at most: the
 * `max` loop.c passes to sh_plat_wait, which reports no more (plat.h;
 * the backends keep it, epoll checks it). */
#define SH_TURN_MAX_IO_EVENTS 256u

/* The plat entry (sh_plat_entry): worker `index` of system `sys` runs its
 * loop until told to stop. */
void sh_loop_main(void *sys, uint32_t index);
/* One pass over w's queues with no time budget, up to SH_TURN_MAX_HOUSES
 * houses of each, counted as a turn's are (the shutdown's drain, on the
 * thread acting as w): whether it ran anything. */
bool sh_loop_drain(sh_worker *w);

#endif
