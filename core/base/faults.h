/*
 * Fault points: the libfiu points named `sh/<area>/<op>` at every place the
 * runtime can fail (the table of docs/simulator.md, "Faults"), and the
 * fault spec "PATTERN:P[,PATTERN:P...]" that enables them with a
 * probability each: the simulator decides them from its seeded stream
 * (backend-sim/fault.c); a build with fault points on threads takes the
 * same spec from the environment (SH_FAULTS) at sh_system_new.
 */
#ifndef SH_FAULTS_H
#define SH_FAULTS_H

#include <stdbool.h>
#include <stddef.h>

/*
 * The runtime's fault points are written sh_fault(name) (true: fail here)
 * and sh_fault_return_on(name, value). libfiu's own check costs a few
 * hundred instructions a call even with nothing enabled, and points sit on
 * the path of every message (pools, stacks, wakes): so where the points are
 * compiled in for programs (the simulation library, a library built with
 * -DFIU_ENABLE), they ask libfiu only while sh_faults_armed is set: by a
 * fault spec (the simulator's options, or SH_FAULTS on threads), or on
 * threads by libfiu's own tools (fiu-run enabling points, or its remote
 * control, through which fiu-ctrl enables them at any time; see
 * sh_faults_from_env). The test builds (SH_FAULTS_ALWAYS) always ask, as
 * their tests enable points through libfiu directly.
 */
#if defined(FIU_ENABLE) && !defined(SH_FAULTS_ALWAYS)
/* Written only while no worker runs (a simulation's configure and end, or
 * the first sh_system_new), read by every point: a plain bool. */
extern bool sh_faults_armed;
#define SH_FAULTS_ARMED() __builtin_expect(sh_faults_armed, 0)
#else
#define SH_FAULTS_ARMED() 1
#endif
#if defined(FIU_ENABLE) && !defined(SH_SIM)
/* Counts a fault that fired (sh_faults_fired): a scenario on threads
 * excuses its checks only once one did. Only on the armed path. (The
 * simulator counts its own, without an atomic that would be a scheduling
 * point.) */
void sh_faults_count_fired(void);
static inline int sh_fault_counted(int failed) {
  if (failed) sh_faults_count_fired();
  return failed;
}
#define sh_fault(name) (SH_FAULTS_ARMED() && sh_fault_counted(fiu_fail(name)))
#else
#define sh_fault(name) (SH_FAULTS_ARMED() && fiu_fail(name))
#endif
#define sh_fault_return_on(name, value) \
  do {                                  \
    if (sh_fault(name)) return value;   \
  } while (0)

/* A pattern's bytes, at most (NUL included). */
#define SH_FAULT_NAME_MAX 64

/* Every fault point of the runtime, by name; sh_fault_npoints of them. */
extern const char *const sh_fault_points[];
extern const size_t sh_fault_npoints;

/* Called once per entry of a spec, in order: a non-zero return stops the
 * parse and is its result. */
typedef int (*sh_fault_entry_fn)(void *ctx, const char *pattern, double p);

/* Parses spec, calling fn (if not NULL) per entry. 0, fn's non-zero
 * return, or -EINVAL with *why (a static string) saying what is wrong.
 * PATTERN is a libfiu name, non-empty, with a `*` only at its end (libfiu's
 * wildcard); P a decimal number in 0..1. */
int sh_faults_parse(const char *spec, sh_fault_entry_fn fn, void *ctx, const char **why);

/* Whether point `name` falls under `pattern` (libfiu's rule: equal, or a
 * trailing `*` matching any rest). */
bool sh_fault_matches(const char *pattern, const char *name);

/* Builds with fault points, on threads, once per process: enables the
 * spec in the environment variable SH_FAULTS (if set) with libfiu's own
 * random decisions, and arms the points for it or for libfiu's own tools
 * (sh_faults_tools). A bad SH_FAULTS is reported on stderr and ignored.
 * Elsewhere: nothing. */
void sh_faults_from_env(void);

/* What says that libfiu's own tools drive this process's points, or NULL:
 * fiu-run's preloader enables the points of its FIU_ENABLE variable
 * (non-empty: `fiu-run -c 'enable ...'`) and opens the remote control of
 * FIU_CTRL_FIFO (non-empty: fiu-ctrl can enable points at any time). The
 * simulator refuses both: libfiu's own random decisions are not a seed's. */
const char *sh_faults_tools(void);

#endif
