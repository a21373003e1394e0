/*
 * The deterministic simulator's control interface (backend-sim/). The
 * simulator implements core/plat.h: logical workers are fibers on the one
 * OS thread that created the system (the "outside" fiber, index = workers),
 * time is a virtual clock, and every scheduling choice comes from one seeded
 * generator. A program linked with libstackhouse-sim.a calls
 * sh_sim_configure() before sh_system_new(); sh_sim_report() after the
 * system is freed (or at any time) tells what the simulation did.
 *
 * One simulation at a time per process, on one thread.
 */
#ifndef SH_SIM_H
#define SH_SIM_H

#include <stdbool.h>
#include <stdint.h>

typedef enum sh_sim_strategy {
  SH_SIM_RANDOM = 0, /* at each yield point, switch with probability switch_permille/1000 */
  SH_SIM_PCT = 1,    /* priority-based (PCT) with pct_depth - 1 priority change points */
  SH_SIM_NONE = 2,   /* switch only when the running fiber parks, blocks or yields its CPU */
} sh_sim_strategy;

typedef struct sh_sim_options {
  uint64_t seed;
  sh_sim_strategy strategy;
  uint32_t switch_permille; /* random: 100 (10 %) */
  uint32_t pct_depth;       /* pct: d = 3 */
  uint64_t pct_steps;       /* pct: change points fall in the first k steps (200000) */
  uint64_t step_ns;         /* virtual time per step (100 ns) */
  uint64_t idle_step_ns;    /* per polling step while no other fiber can run (2000 ns) */
  uint64_t max_steps;       /* more steps than this: FAIL:livelock (100 M) */
  uint64_t vtime_limit_ns;  /* virtual time past this: FAIL:vtime (0: none) */
  const char *trace_path;   /* Chrome trace-event JSON written here (NULL: none) */
} sh_sim_options;

void sh_sim_options_default(sh_sim_options *o);
/* "random", "pct", "none" -> 0 and *out, else -EINVAL. */
int sh_sim_strategy_parse(const char *name, sh_sim_strategy *out);
const char *sh_sim_strategy_name(sh_sim_strategy s);

/* Starts a simulation with these options: resets the clock, the generator
 * and the trace hash. The next sh_system_new runs on it. */
void sh_sim_configure(const sh_sim_options *o);

typedef struct sh_sim_report {
  uint64_t hash;      /* the trace hash: every switch, delivery, time jump */
  uint64_t steps;     /* scheduling points passed */
  uint64_t vtime_ns;  /* the virtual clock */
  uint64_t switches;  /* fiber switches */
  uint64_t jumps;     /* times the clock jumped because every fiber slept */
} sh_sim_report;

/* The figures of the current (or last) simulation; closes its trace file if
 * one is open and the simulation's system is gone. */
void sh_sim_report_get(sh_sim_report *r);

/*
 * Failures the simulator detects itself: "deadlock" (every fiber blocked,
 * no timer can wake any), "livelock" (max_steps passed), "vtime" (the
 * virtual-time limit passed). The run cannot go on: the handler is called
 * with the kind and a one-line detail and must not return (the default
 * prints both to stderr and calls _exit(1)). The trace file, if any, is
 * finished before the handler runs.
 */
typedef void (*sh_sim_fail_fn)(const char *kind, const char *detail);
void sh_sim_on_failure(sh_sim_fail_fn fn);

#endif
