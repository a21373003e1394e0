/*
 * Faults in a simulation (fault.c): the fault points of options.faults,
 * each decided by the run's fault stream (a stream of its own, so that
 * enabling faults leaves the schedule's and the core's draws as they were)
 * or, under replay, by the schedule alone.
 */
#ifndef SH_SIM_FAULT_H
#define SH_SIM_FAULT_H

#include <stackhouse/sim.h>
#include <stdint.h>

/* A new simulation: the last one's points are disabled, the count reset,
 * the fault stream seeded from *x (which advances), and o->faults (if not
 * NULL) enabled. A bad spec fails the run (FAIL:setup). */
void sh_simfault_configure(const sh_sim_options *o, uint64_t *x);

/* The run is over: its points are disabled (the count is kept). */
void sh_simfault_end(void);

/* Faults fired since the last configure. */
uint64_t sh_simfault_fired(void);

#endif
