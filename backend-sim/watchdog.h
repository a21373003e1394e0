/*
 * The simulation's real-time watchdog (watchdog.c): a fiber that loops
 * without passing a scheduling point (a busy poll of a flag another fiber
 * should set) stops the whole simulation, as no other fiber runs until it
 * gives way. If the step counter has not moved for hang_real_ms of real
 * time, the run ends with FAIL:hang, naming the fiber, the last scheduling
 * point it passed and where it was interrupted. The real clock only decides
 * whether the run ends, never what it does: determinism holds.
 */
#ifndef SH_SIM_WATCHDOG_H
#define SH_SIM_WATCHDOG_H

#include <stdint.h>

/* The signal the watchdog's timer sends to the simulation's thread. */
#define SH_SIMWATCHDOG_SIGNAL SIGVTALRM

/* Watches the running simulation from its own OS thread: FAIL:hang after
 * limit_ms of real time without a step (0: no watch). */
void sh_simwatchdog_arm(uint64_t limit_ms);
/* Stops watching (the platform is freed, or the run is failing). */
void sh_simwatchdog_disarm(void);

#endif
