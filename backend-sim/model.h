/*
 * The reference model (model.c): the simulator's oracle of the runtime's
 * promised semantics, fed by the core's notes (core/base/model.h) and
 * checked at each one. A broken rule fails the run with kind "model" and a
 * detail that begins with the rule's name (docs/simulator.md, "The
 * reference model").
 */
#ifndef SH_SIM_MODEL_H
#define SH_SIM_MODEL_H

#include <stdbool.h>
#include <stdint.h>

/* A new simulation begins: the model forgets the last one's state. */
void sh_simmodel_reset(void);
/* A node crashed (node.c): fiber f's run under way, if any, is gone, and
 * so is every entry of memory dead() says the crash freed. */
void sh_simmodel_fiber_gone(uint32_t f);
void sh_simmodel_forget(bool (*dead)(const void *ctx, uintptr_t a), const void *ctx);

/* Events checked since the last reset (for tests and the cost figure). */
uint64_t sh_simmodel_events(void);

#endif
