/*
 * Driving a system by hand, single-threaded, for the unit tests of the core:
 * the system (th_sys) is never started; the test thread takes a worker's
 * identity (sh_plat_set_local) and runs that worker's queues itself, to
 * quiet (th_drain) or one house run at a time (th_step). Uses core headers.
 */
#ifndef TESTS_SUPPORT_MANUAL_H
#define TESTS_SUPPORT_MANUAL_H

#include <stdint.h>

#include <stackhouse/stackhouse.h>

#include "harness.h"
#include "actor/house.h"
#include "sched/system.h"
#include "sched/worker.h"

/* The system the test drives; set it with th_system() in the setup. */
extern sh_system *th_sys;

sh_worker *th_worker(uint32_t i);
/* The test thread is worker i from now on. */
void th_act_as(uint32_t i);
/* th_spawn_on(th_sys, c, NULL, worker). */
const sh_addr *th_spawn(const sh_actor_class *c, uint32_t worker);
/* Runs everything queued on worker i to quiet, as worker i; then acts as 0. */
void th_drain(uint32_t i);
/* One house run on worker i, taken the way the worker loop takes it (IO
 * queue first, then state), as worker i; then acts as 0. NULL when nothing
 * was queued. */
sh_house *th_step(uint32_t i);
/* Every worker mounts what was spawned on it; then the test acts as 0. */
void th_mount_all(void);
sh_stats th_stats(void);
/* Off-worker, th_end(th_sys) (shutdown checked, pools empty), th_sys = NULL. */
sh_stats th_sys_end(void);
/* cmocka teardown: off-worker; if th_sys is still there, shuts it down and
 * frees it, failing (-1) when pooled objects are outstanding. */
int th_sys_teardown(void **state);

#endif
