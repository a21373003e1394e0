/*
 * A simulated program that leaves the simulator's world (misuse.c): a call
 * that blocks the one OS thread every fiber runs on (blocking.c), or a real
 * OS thread of its own that enters the runtime. Both end the run with a
 * failure that names the culprit instead of a stall or a wrong result.
 */
#ifndef SH_SIM_MISUSE_H
#define SH_SIM_MISUSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "run.h"

/* True on the OS thread that made the running simulation's platform. A
 * thread-local flag, so that the check in the platform's entry points is one
 * load; initial-exec, as the simulation library is linked into programs
 * only (never a shared library), where that model costs no call. */
extern _Thread_local bool sh_simmisuse_sim_thread __attribute__((tls_model("initial-exec")));

/* The calling OS thread runs the simulation from now (sh_plat_new) until
 * sh_simmisuse_unbind (sh_plat_free). */
void sh_simmisuse_bind(void);
void sh_simmisuse_unbind(void);

/* A call from an OS thread that is not the simulation's: FAIL:thread. */
__attribute__((noreturn)) void sh_simmisuse_foreign_thread(const char *entry, const void *caller);

/* The platform's entry points call this first: the runtime entered from a
 * real thread of the program's own would run beside the fibers, unseen by
 * the scheduler, and the simulation would be neither right nor repeatable. */
static inline void sh_simmisuse_check_thread(const char *entry) {
  if (__builtin_expect(!sh_simmisuse_sim_thread && sh_simrun_state.tab != NULL, 0))
    sh_simmisuse_foreign_thread(entry, __builtin_return_address(0));
}

/* A call that would block (or spin on) the simulation's OS thread must fail
 * the run: true while a simulation runs (its platform started, no failure
 * being reported) and the caller is on its OS thread. */
bool sh_simmisuse_simulating_here(void);

/* The run ends with FAIL:blocking: `call` (a function's name) was called at
 * `caller` by the running fiber. */
__attribute__((noreturn)) void sh_simmisuse_blocking(const char *call, const void *caller);

/* "worker N", "the outside thread" or "thread fiber N": fiber i of p. */
void sh_simmisuse_fiber_name(const sh_simtab *p, uint32_t i, char *buf, size_t cap);

/* Where code address `addr` is, for a person: its function (when the
 * dynamic symbol table knows it) and a command that finds its line,
 * "addr2line -e BINARY 0xOFFSET". */
void sh_simmisuse_locate(const void *addr, char *buf, size_t cap);

#endif
