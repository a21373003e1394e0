/*
 * stackhouse probes: what a test of your own actors needs from the runtime
 * besides the API in stackhouse.h, on both backends (the epoll backend and
 * the deterministic simulator, libstackhouse-sim.a). Production code does
 * not need them; a test links the same library and includes this header
 * next to stackhouse.h.
 *
 *   - threads that are not workers, to drive actors through bridges the way
 *     a program's own threads would: a pthread on epoll, one more fiber,
 *     scheduled like the workers, in the simulator;
 *   - scheduling points in the test's own code, where the simulator may
 *     switch to another fiber (to look for interleaving bugs there too);
 *   - introspection for invariants: an actor's pending asks, the actors a
 *     system still has queued or running.
 */
#ifndef STACKHOUSE_PROBE_H
#define STACKHOUSE_PROBE_H

#include <stdint.h>

#include <stackhouse/stackhouse.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Threads that are not workers                                        */
/* ------------------------------------------------------------------ */

typedef struct sh_thread sh_thread;

/* Runs fn(arg) on a new thread that is not a worker (it may block, on a
 * bridge for instance). In the simulator the thread is a fiber: it can be
 * started only while a started system exists (else -EINVAL), at most 32
 * at a time, and must be joined before that system is freed. 0 and the
 * thread in *out, or a negative errno. */
SH_API int sh_thread_start(void (*fn)(void *arg), void *arg, sh_thread **out);
/* Waits until the thread returned from fn, then frees it. */
SH_API void sh_thread_join(sh_thread *t);

/* ------------------------------------------------------------------ */
/* Scheduling                                                          */
/* ------------------------------------------------------------------ */

/* A scheduling point in your own code: where another thread could run in
 * production (between a check and the act that relies on it, say). The
 * simulator may switch to another fiber here, and names the point `where`
 * (a static string) in its schedules; elsewhere it does nothing. */
SH_API void sh_yield_point(const char *where);
/* Gives the CPU to another runnable thread, if any: for a thread that
 * polls (SH_NOWAIT receives), so that it cannot starve the workers (in the
 * simulator, the polling fiber lets the others run). */
SH_API void sh_yield_cpu(void);

/* ------------------------------------------------------------------ */
/* Introspection                                                       */
/* ------------------------------------------------------------------ */

typedef struct sh_actor_probe {
  /* The actor's futures not yet completed: its asks, sh_put's and
   * sh_sleep's still waiting (what its table of pending asks counts). */
  uint32_t asks_pending;
  /* Buckets of that table; it grows (doubles) before asks_pending reaches
   * ask_buckets * ask_load, and shrinks again when mostly empty. */
  uint32_t ask_buckets;
  uint32_t ask_load;
} sh_actor_probe;

/* The actor's own figures. Only from the actor's own handlers and hooks
 * (mount, stop, timeout): nothing else may read them while it runs. */
SH_API void sh_actor_probe_get(const sh_actor *self, sh_actor_probe *out);

/* Actors the system still has ready, queued or running. Only while no
 * worker runs (before sh_system_start, or after sh_system_shutdown, where
 * it must be 0 when the shutdown returned 0; after -EBUSY, the actors its
 * drain left busy). */
SH_API uint32_t sh_system_busy(const sh_system *sys);

/* sh_system_wait for at most timeout_ms (>= 0; virtual time in the
 * simulator): the exit code, or -ETIMEDOUT. For a program that must notice a
 * workload that stalls (a run with faults, where a lost message can leave it
 * waiting for ever). */
SH_API int sh_system_wait_ms(sh_system *sys, int64_t timeout_ms);

/* ------------------------------------------------------------------ */
/* Fault points (docs/simulator.md, "Faults")                          */
/* ------------------------------------------------------------------ */

/* Whether the runtime's fault points can fire in this process (a program
 * or test that must tolerate faults asks; the scenario framework's
 * fault-tolerant mode is this). On threads: a build with fault points
 * whose points were enabled by SH_FAULTS or by libfiu's own tools
 * (`fiu-run -c 'enable_random name=sh/pool/alloc,probability=0.01'`, or
 * fiu-run's remote control, through which `fiu-ctrl` enables points at any
 * time); always false in the production library, which has none. In the
 * simulator: the current run has points enabled (sh_sim_options.faults). */
SH_API bool sh_faults_enabled(void);
/* The runtime's fault points that fired so far: in this process on
 * threads, in the current run in the simulator (a program's own points are
 * not counted). On threads under libfiu's own tools (fiu-run, fiu-ctrl),
 * which fire points the runtime cannot count (their POSIX wrappers, a
 * program's own points), one more from the start: any run they drive may
 * have had a fault. */
SH_API uint64_t sh_faults_fired(void);

#ifdef __cplusplus
}
#endif
#endif
