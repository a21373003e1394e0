/*
 * What the rest of the simulator tells coverage.c (sim.h, "Coverage").
 */
#ifndef SH_SIM_COVERAGE_H
#define SH_SIM_COVERAGE_H

#include <stdint.h>

/* A trace point of the runtime on fiber `fiber`: kind (sh_trace_kind) and
 * its type or class name's hash, paired with the fiber's previous one. */
void sh_simcoverage_trace(uint32_t fiber, uint32_t kind, uint64_t name_hash);

#endif
