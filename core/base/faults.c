/* Fault points and the fault spec (faults.h). */
#include "base/faults.h"

#include <stackhouse/probe.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"

#ifdef FIU_ENABLE
#include <fiu-control.h>
#include <fiu.h>
#include <pthread.h>
#endif

/* Keep in step with the table in docs/simulator.md ("Faults"); a test
 * fails if one is never hit. */
const char *const sh_fault_points[] = {
    "sh/system/new",    /* lifecycle.c: the system, its workers, platform, exit event */
    "sh/system/start",  /* lifecycle.c: the worker threads cannot start */
    "sh/system/house",  /* spawn.c: an actor's house */
    "sh/spawn/group",   /* spawn.c: a group address */
    "sh/house/slab",    /* hstore.c: a slab of houses */
    "sh/pool/alloc",    /* pool.c: a pooled object (message, future, timer, ...) */
    "sh/stack/new",     /* stack.c: a stack */
    "sh/gate/new",      /* gate.c: a gate */
    "sh/gate/waiter",   /* send.c: a gate's waiter */
    "sh/timer/new",     /* timer.c: a timer's registration */
    "sh/futtable/alloc", /* futtable.c: an actor's table of pending asks */
    "sh/bridge/new",    /* bridge.c: an outside-thread bridge */
    "sh/thread/start",  /* probe.c: a program's thread */
    "sh/worker/wake",   /* worker.c: a wake of a parked worker, refused for a while */
    /* The network (backend-epoll/net.c on a machine, backend-sim/net*.c in
     * the simulator: the same names, each backend's own failure). */
    "sh/net/accept",    /* an accept finds no descriptor (-EMFILE) */
    "sh/net/connect",   /* a connect is refused */
    "sh/net/read",      /* epoll: a read fails (-ECONNRESET); simulator: a short read */
    "sh/net/write",     /* epoll: a write fails (-EPIPE); simulator: a short write */
    "sh/net/reset",     /* simulator: a connection is reset */
    "sh/net/delay",     /* simulator: a segment, datagram or connect is late */
    "sh/net/partition", /* simulator: two addresses are cut for a while */
    "sh/net/drop",      /* simulator: a datagram is lost */
    "sh/net/dup",       /* simulator: a datagram arrives twice */
    "sh/net/reorder",   /* simulator: a datagram arrives after the next one */
};
const size_t sh_fault_npoints = sizeof(sh_fault_points) / sizeof(sh_fault_points[0]);

#if defined(FIU_ENABLE) && !defined(SH_FAULTS_ALWAYS)
bool sh_faults_armed;
#endif

bool sh_fault_matches(const char *pattern, const char *name) {
  size_t n = strlen(pattern);
  if (n > 0 && pattern[n - 1] == '*') return strncmp(pattern, name, n - 1) == 0;
  return strcmp(pattern, name) == 0;
}

/* One "PATTERN:P" of len bytes at s. */
static int parse_entry(const char *s, size_t len, sh_fault_entry_fn fn, void *ctx,
                       const char **why) {
  const char *colon = memchr(s, ':', len);
  if (colon == NULL) return *why = "an entry is not PATTERN:P", -EINVAL;
  size_t n = (size_t)(colon - s);
  if (n == 0) return *why = "an empty pattern", -EINVAL;
  _Static_assert(SH_FAULT_NAME_MAX == 64, "the message below says 63 bytes");
  if (n >= SH_FAULT_NAME_MAX) return *why = "a pattern longer than 63 bytes", -EINVAL;
  char pattern[SH_FAULT_NAME_MAX], num[32];
  memcpy(pattern, s, n);
  pattern[n] = '\0';
  char *star = strchr(pattern, '*');
  if (star != NULL && star[1] != '\0') return *why = "a '*' not at the end of a pattern", -EINVAL;
  size_t k = len - n - 1;
  if (k == 0 || k >= sizeof(num)) return *why = "a probability missing or too long", -EINVAL;
  memcpy(num, colon + 1, k);
  num[k] = '\0';
  char *end;
  errno = 0;
  double p = strtod(num, &end);
  /* `!(p >= 0 && p <= 1)` also refuses NaN. */
  if (errno != 0 || *end != '\0' || !(p >= 0 && p <= 1))
    return *why = "a probability that is not a number in 0..1", -EINVAL;
  return fn != NULL ? fn(ctx, pattern, p) : 0;
}

int sh_faults_parse(const char *spec, sh_fault_entry_fn fn, void *ctx, const char **why) {
  static const char *ignored;
  if (why == NULL) why = &ignored;
  if (spec == NULL || spec[0] == '\0') return *why = "an empty spec", -EINVAL;
  for (const char *s = spec;;) {
    const char *comma = strchr(s, ',');
    size_t len = comma != NULL ? (size_t)(comma - s) : strlen(s);
    int rc = parse_entry(s, len, fn, ctx, why);
    if (rc != 0 || comma == NULL) return rc;
    s = comma + 1;
  }
}

/* libfiu's tools talk to the program they run through these variables
 * (fiu-run sets both; an empty FIU_CTRL_FIFO, `fiu-run -f ''`, turns the
 * remote control off). */
const char *sh_faults_tools(void) {
  const char *enable = getenv("FIU_ENABLE"), *fifo = getenv("FIU_CTRL_FIFO");
  /* fiu-run writes a newline and tabs before each command: blank is empty. */
  if (enable != NULL && enable[strspn(enable, " \t\n")] != '\0')
    return "fiu-run enables fault points (FIU_ENABLE)";
  if (fifo != NULL && fifo[0] != '\0')
    return "libfiu's remote control is open (FIU_CTRL_FIFO: fiu-run, for fiu-ctrl)";
  return NULL;
}

#if defined(FIU_ENABLE) && !defined(SH_SIM)
/* Whether SH_FAULTS or libfiu's tools enabled points (sh_faults_enabled). */
static bool from_env;
static _Atomic uint64_t fired;

void sh_faults_count_fired(void) {
  /* relaxed: a count; the consequence of the fault it counts is published
   * after it by the faulty thread's own ordered operations. */
  sh_atomic_fetch_add(&fired, 1, memory_order_relaxed);
}

/* libfiu decides with its own generator: runs on threads are not
 * reproducible anyway. */
static int enable_random(void *ctx, const char *pattern, double p) {
  (void)ctx;
  return fiu_enable_random(pattern, 1, NULL, 0, (float)p) == 0 ? 0 : -ENOMEM;
}

/* SH_FAULTS, then libfiu's tools: either arms the points. Before this, a
 * program under fiu-run had its points enabled in libfiu and never asked. */
static void env_once(void) {
  const char *spec = getenv("SH_FAULTS");
  const char *why = "";
  bool on = sh_faults_tools() != NULL;
  if (spec != NULL && spec[0] != '\0') {
    fiu_init(0);
    if (sh_faults_parse(spec, NULL, NULL, &why) != 0 ||
        sh_faults_parse(spec, enable_random, NULL, &why) != 0)
      fprintf(stderr, "stackhouse: SH_FAULTS='%s' ignored: %s\n", spec, why);
    else
      on = true;
  }
  from_env = on;
#ifndef SH_FAULTS_ALWAYS
  sh_faults_armed = on;
#endif
}

#endif

/* One definition for every build (gcovr merges a source's builds by
 * function and line). */
void sh_faults_from_env(void) {
#if defined(FIU_ENABLE) && !defined(SH_SIM)
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, env_once);
#else
  /* The production library has no fault points; the simulator decides its
   * faults from its options alone: an environment would make a seed's run
   * differ between machines (backend-sim/fault.c refuses libfiu's tools,
   * and answers sh_faults_enabled and _fired). */
#endif
}

#if defined(FIU_ENABLE) && !defined(SH_SIM)
bool sh_faults_enabled(void) {
  sh_faults_from_env();
  return from_env;
}

/* Under libfiu's own tools, points fire that the runtime cannot count
 * (fiu-run's POSIX wrappers, a program's own points, fiu_do_on): counted
 * as one from the start, so that a scenario excuses what they may cause. */
uint64_t sh_faults_fired(void) {
  sh_faults_from_env();
  uint64_t uncounted = sh_faults_tools() != NULL ? 1 : 0;
  return sh_atomic_load(&fired, memory_order_relaxed) + uncounted;
}
#elif !defined(SH_SIM)
bool sh_faults_enabled(void) { return false; }
uint64_t sh_faults_fired(void) { return 0; }
#endif
