/*
 * stackhouse's deterministic simulator: the control interface.
 *
 * A program linked with libstackhouse-sim.a instead of libstackhouse.a runs
 * the same runtime and the same actors on a simulated machine: every logical
 * worker is a fiber on the one OS thread that created the system, time is a
 * virtual clock, and every scheduling choice comes from one seeded
 * generator. The same seed and options give the same run, down to a 64-bit
 * trace hash, so an interleaving that breaks something once is found again.
 *
 * Fibers are numbered: worker w is fiber w; the thread that created the
 * system (the "outside" fiber) is fiber `workers`; each further thread
 * started on the simulated platform (sh_plat_thread_start) is a fiber of its
 * own, workers + 1, + 2, ... in the order they were started. Schedules
 * (sh_sim_choice) name fibers by these numbers.
 *
 * Use: call sh_sim_configure() before sh_system_new(); after the system is
 * freed (or at any time), sh_sim_report_get() tells what the simulation
 * did, and sh_sim_schedule() gives its schedule for a replay.
 *
 * One simulation at a time per process, on one thread. Its first system is
 * the simulation's own; the nodes of a cluster (<stackhouse/cluster.h>)
 * add theirs. A sh_system_new after the first system was freed starts the
 * simulation again with the same options (clock, generator and hash from
 * the start).
 */
#ifndef SH_SIM_H
#define SH_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sh_sim_strategy {
  SH_SIM_RANDOM = 0, /* at each yield point, switch with probability switch_permille/1000
                      * (at a polling step, at least 1/2) */
  SH_SIM_PCT = 1,    /* priority-based (PCT) with pct_depth - 1 priority change points */
  SH_SIM_NONE = 2,   /* switch only when the running fiber parks, blocks, yields its CPU
                      * or has run a whole quantum (10000 steps) */
  SH_SIM_MSGPCT = 3, /* PCT over messages: each actor (house) a random priority, the
                      * worker that delivers to the highest runs; pct_depth - 1 change
                      * points among the first pct_steps deliveries */
  SH_SIM_DELAY = 4,  /* delay-bounded: none's schedule (forced switches round-robin)
                      * with pct_depth - 1 delays among the first pct_steps yield points */
} sh_sim_strategy;

/* What a decision of a run was. */
typedef enum sh_sim_choice_kind {
  SH_SIM_PREEMPT = 0, /* the strategy preempted the running fiber at a scheduling point */
  SH_SIM_FORCED = 1,  /* the running fiber parked, blocked, finished or yielded its CPU */
  SH_SIM_FAULT = 2,   /* a fault point fired (`to` names the point: sh_sim_fault_id) */
  SH_SIM_STALE = 3,   /* a weak load read a stale value (`to`: its rank among the step's
                       * candidates) */
  SH_SIM_DRAW = 4,    /* a value drawn from a stream (sh_sim_draw): `to` the stream, `value` it */
} sh_sim_choice_kind;

/* One decision of a run, at step `step`: a switch to fiber `to` (kinds
 * SH_SIM_PREEMPT and SH_SIM_FORCED), a fault point that fired (kind
 * SH_SIM_FAULT, `to` the point's id; for a later hit of the point in the
 * same step, the k-th after its first, that id mixed with k, so that a
 * replay fires the same hit), a stale read (SH_SIM_STALE), or a value drawn
 * (SH_SIM_DRAW: `to` the stream, `value` the value, in place of the step:
 * a draw has no step of its own, its place among its stream's draws is its
 * anchor). A run's decisions, in order, are
 * its choice sequence: replayed with the same seed and options, they give
 * the same run.
 *
 * Anchors: a switch, fault or stale read is matched in a replay by its step;
 * a draw by its position among the schedule's draws of its stream (the k-th
 * draw of stream S in the run takes the k-th SH_SIM_DRAW entry of stream S,
 * and 0 once they run out). So removing a decision shifts nothing of
 * another kind or stream, and removing a span of draws moves the later
 * draws of that stream up, as shrinking a workload wants. */
typedef struct sh_sim_choice {
  union {
    uint64_t step;  /* every kind but SH_SIM_DRAW */
    uint64_t value; /* SH_SIM_DRAW: the value drawn */
  };
  uint32_t to;
  uint32_t kind; /* sh_sim_choice_kind */
} sh_sim_choice;

/* The draw streams of the runtime and the scenario framework; a program may
 * use its own, SH_SIM_STREAM_USER and up (below SH_SIM_STREAMS). */
enum {
  SH_SIM_STREAM_SCENARIO = 0, /* sh_scn_rand, sh_scn_below: a scenario's workload */
  SH_SIM_STREAM_NET = 1,      /* the fake network: latency, segment sizes, cut lengths */
  SH_SIM_STREAM_USER = 2,
  SH_SIM_STREAMS = 8,
};

/* A value of stream `stream` (< SH_SIM_STREAMS) in [0, bound) (bound 0: any
 * 64-bit value): `fresh` (the caller's own seeded draw, already in range) in
 * a free run, recorded as a decision; under replay the schedule's next draw
 * of that stream (clamped to bound - 1), 0 once they run out, so that a
 * shrunk sequence asks for the simplest values. Outside a simulation (no
 * run configured) it returns `fresh`. */
uint64_t sh_sim_draw(uint32_t stream, uint64_t bound, uint64_t fresh);

/* A fault point's id in a schedule: a 32-bit hash of its name (by content,
 * so the same in every build). */
uint32_t sh_sim_fault_id(const char *name);

typedef struct sh_sim_options {
  uint64_t seed;
  sh_sim_strategy strategy;
  uint32_t switch_permille; /* random: 100 (10 %) */
  uint32_t pct_depth;       /* pct, msgpct: d = 3 (d - 1 change points); delay: d - 1 delays */
  uint64_t pct_steps;       /* pct, delay: change points or delays fall among the first k
                             * yield points; msgpct: among the first k deliveries (10000) */
  uint64_t step_ns;         /* virtual time per step (100 ns) */
  uint64_t idle_step_ns;    /* per polling step while no other fiber has work (2000 ns) */
  uint64_t max_steps;       /* more steps than this: FAIL:livelock (100 M) */
  uint64_t vtime_limit_ns;  /* virtual time past this: FAIL:vtime (0: none) */
  uint64_t hang_real_ms;    /* this much real time without a step: FAIL:hang (10000; 0: none) */
  const char *trace_path;   /* Chrome trace-event JSON written here (NULL: none) */
  /* Replay: when set, the strategy makes no choice (its bookkeeping, such as
   * PCT's priorities, still runs, so the clock advances as it did); a
   * preemption happens at a scheduling point only where the schedule names
   * one (if that fiber can run), and where a switch must happen (a park, a
   * block, a CPU yield, a spent quantum) the schedule's fiber runs, else the
   * next runnable fiber after the running one, round-robin (fair, so that
   * a mutated or cut sequence starves no fiber); a fault point fires only where the
   * schedule names it (SH_SIM_FAULT). With the seed and options of the run
   * that recorded it, a full schedule replays that run exactly. The caller
   * keeps the array alive for the run. Draws (SH_SIM_DRAW) come from the
   * schedule too, 0 past its last of a stream. `replay` 1 replays
   * schedule[0..schedule_len) even when it is empty (a shrunk sequence may
   * need no decision at all: that is a replay in which nothing is chosen,
   * not a free run); a non-NULL schedule replays too. */
  const sh_sim_choice *schedule;
  size_t schedule_len;
  uint32_t replay;
  /* With replay: 1, the schedule's steps replay up to its last decision,
   * and the run then goes on as a free run of the seed would, its
   * strategy, fault rates and weak memory deciding (a stream's draws past
   * its last value are fresh too). `shsim explore` runs its mutants so: a
   * mutated prefix, then exploration. The run records every decision, so
   * its record replays it exactly without this flag. */
  uint32_t replay_then_free;
  /* Faults (NULL: none): "PATTERN:P[,PATTERN:P...]", each PATTERN a libfiu
   * point name (a trailing `*` matches any rest) whose points fire with
   * probability P (0..1), decided by a stream of the seed's own, so that a
   * seed and a spec name one run (see sh_sim_faults_parse). Points of the
   * runtime (sh_sim_fault_points) and a program's own (fiu_fail,
   * fiu_return_on of <fiu-local.h>, compiled with -DFIU_ENABLE) alike. The
   * caller keeps the string alive for the run. A bad spec fails the run
   * (FAIL:setup). */
  const char *faults;
  /* Weak memory: a load weaker than seq_cst that could read the value a
   * store of another fiber overwrote lately (one not known to happen before
   * it) reads that value with this probability, in permille, at most 900
   * (0, the default: loads read the newest value, and the model costs
   * nothing). shsim fuzz draws it per seed. See docs/simulator.md, "Weak
   * memory and atomic points". */
  uint32_t stale_permille;
  /* 1: every atomic store and read-modify-write of the runtime is also a
   * scheduling point, just before it, so that a race between a load and
   * the write after it can be scheduled, not only at the runtime's own
   * yield points (0, the default: runs take fewer steps). shsim fuzz
   * draws it per seed. */
  uint32_t atomic_points;
  /* 1: keep each decision's context (sh_sim_schedule_context: where it was
   * taken, the trace hash before it), as a replay file carries it, so that
   * a replay that goes another way is named where it parts. 16 bytes a
   * decision; kept also while sh_sim_record_points is on. */
  uint32_t keep_context;
} sh_sim_options;

void sh_sim_options_default(sh_sim_options *o);
/* "random", "pct", "none", "msgpct", "delay" -> 0 and *out, else -EINVAL. */
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
  uint64_t faults;    /* fault points that fired (options.faults) */
  uint64_t stale_reads; /* weak loads that read a stale value (options.stale_permille) */
} sh_sim_report;

/* A fault spec's entries, in order: fn(ctx, pattern, p) for each (fn may be
 * NULL: only a check); a non-zero return of fn stops and is returned. 0, or
 * -EINVAL with *why (a static string; why may be NULL) saying what is
 * wrong with the spec. */
typedef int (*sh_sim_fault_entry_fn)(void *ctx, const char *pattern, double p);
int sh_sim_faults_parse(const char *spec, sh_sim_fault_entry_fn fn, void *ctx, const char **why);

/* The runtime's own fault points (`sh/<area>/<op>`): *out and their count. */
size_t sh_sim_fault_points(const char *const **out);

/* Whether the current run has fault points enabled (options.faults). */
bool sh_sim_faults_active(void);

/* libfiu's own tools are not for the simulator: their random decisions
 * are libfiu's, not a seed's, so a run under them could not be replayed.
 * This names what shows that they drive the process (fiu-run enabling
 * points, or libfiu's remote control open for fiu-ctrl), or is NULL. A
 * simulation configured under them fails at once (FAIL:setup, with
 * SH_SIM_FIU_ADVICE); shsim refuses to start (exit status 2). */
const char *sh_sim_fiu_tools(void);
#define SH_SIM_FIU_ADVICE                                                             \
  "in the simulator, faults are given with --faults 'PATTERN:P' (sh_sim_options.faults), " \
  "decided by the seed; libfiu's random mode is not reproducible"

/* Whether every point the current run enables (with a rate above 0) is
 * the network's weather: sh/net/delay, partition, read, write (short reads
 * and writes in the simulator), drop, dup, reorder. A correct program
 * copes with those and still does all it should, so a scenario runs them
 * with every check (sh_scn_faulty is false); true when none is enabled. */
bool sh_sim_faults_benign(void);

/* The current run goes on without faults: its points are disabled (a
 * scenario that cannot tolerate faults, before its system is created). */
void sh_sim_faults_disable(void);

/* The schedule of the current (or last) run: every switch and every fault
 * that fired, in order; valid until the next sh_sim_configure. Replaying it
 * (options.schedule) with the same seed and options reproduces the run. 0
 * if the run made more decisions than the simulator records (4 M). */
size_t sh_sim_schedule(const sh_sim_choice **out);

/* Whether the current (or last) run's record is whole: false once it made
 * more decisions than the simulator records (sh_sim_schedule is then 0 and
 * the run cannot be replayed). */
bool sh_sim_schedule_complete(void);

/* What the determinism check compares besides the decisions themselves: for
 * each decision of sh_sim_schedule, at the same index, the name of the
 * scheduling point where it was made (a static string: "yield", "park",
 * ...; NULL for a fault) and the trace hash just before it. Two runs of one
 * seed whose hashes part between two equal decisions went different ways
 * in between (a delivery, a trace point). Valid as sh_sim_schedule's; kept
 * only for simulations configured with keep_context or while
 * sh_sim_record_points (below) is on (0 otherwise). */
typedef struct sh_sim_decision_context {
  const char *where;
  uint64_t hash;
} sh_sim_decision_context;
size_t sh_sim_schedule_context(const sh_sim_decision_context **out);

/* Finer still, for locating where two runs part between two decisions:
 * with on, the simulations configured from now on also keep, at every
 * scheduling point, its step, name and the trace hash on arrival (24 bytes
 * a step, the first 1 M points). sh_sim_points hands them out (valid until
 * the next sh_sim_configure; 0 when off). */
typedef struct sh_sim_point {
  uint64_t step;
  const char *where;
  uint64_t hash;
} sh_sim_point;
void sh_sim_record_points(bool on);
size_t sh_sim_points(const sh_sim_point **out);

/*
 * Coverage, for guided exploration (`shsim explore`, docs/simulator.md):
 * what the runs reach, written into a region the caller attached (shared
 * memory, so that runs in forked children report to their parent).
 *
 * Edges: in a build whose code under test was compiled with
 * -fsanitize-coverage=trace-pc (`make explore`: the core, http/ and the
 * scenarios), every edge taken adds one to its bucket (a hash of the edge's
 * two ends, as offsets in the binary; saturating at 255). Other builds
 * leave the edges at 0 (sh_sim_coverage_edges_compiled says which).
 *
 * Message states: every trace point of the runtime (a house run begins or
 * ends, a message is handed over, an ask sent, answered or timed out),
 * paired with the one before it on the same fiber (a worker, the outside
 * fiber, a thread fiber), by kind and type or class name, counts in a
 * bucket of `states`: which messages follow which, in any build.
 *
 * Sometimes-points: the runtime's SH_SOMETIMES marks (rare situations a
 * campaign must reach: a cancel that lost to its fire, a push caught
 * half-way), listed by sh_sim_sometimes_points in a fixed order (file,
 * line, text), whether or not any run passed them; a run that passes one
 * with its condition true sets its byte.
 */
#define SH_SIM_EDGES (1u << 16)
#define SH_SIM_STATES (1u << 12)
#define SH_SIM_SOMETIMES_MAX 256u
typedef struct sh_sim_coverage {
  uint8_t edges[SH_SIM_EDGES];
  uint8_t states[SH_SIM_STATES];
  uint8_t sometimes[SH_SIM_SOMETIMES_MAX];
} sh_sim_coverage;
/* From now on runs write into *c (NULL: nowhere). The caller clears it. */
void sh_sim_coverage_attach(sh_sim_coverage *c);
/* Whether an instrumented block ran in this process yet: after a run (or
 * after the scenarios' registration, which is instrumented too), whether
 * this binary records edges. */
bool sh_sim_coverage_edges_compiled(void);
typedef struct sh_sim_sometimes {
  const char *what;
  const char *file;
  int line;
} sh_sim_sometimes;
/* The sometimes-points of this binary (at most SH_SIM_SOMETIMES_MAX), in
 * the order of sh_sim_coverage.sometimes. */
size_t sh_sim_sometimes_points(const sh_sim_sometimes **out);

/*
 * Shrinking: a failing run's choice sequence (its schedule: switches,
 * faults, stale reads and every value drawn), cut down to the choices the
 * failure needs and made as simple as it can be. still_fails(ctx, s, n)
 * replays s[0..n) and answers whether the run fails the same way (it runs
 * the simulation, typically in a child process, since a failed simulation
 * cannot go on). Delta debugging (Zeller's ddmin, complements only) drops
 * spans of choices, halving the span when none can go; then each value
 * drawn is lowered toward 0 and each stream's values sorted, and ddmin runs
 * again; until nothing changes or max_trials replays were made. Works in
 * place; returns the new length. Every choice left is needed: without any
 * one of them (within the trial budget) the failure goes away.
 */
typedef bool (*sh_sim_fails_fn)(void *ctx, const sh_sim_choice *s, size_t n);
size_t sh_sim_shrink(sh_sim_choice *s, size_t n, sh_sim_fails_fn still_fails, void *ctx,
                     uint32_t max_trials, uint32_t *trials_out);

/* From a fiber that is not a worker (the outside fiber, a thread fiber) of
 * a started system: waits ns of virtual time while the workers go on as
 * they would (when they all sleep, the clock jumps: an idle stretch costs
 * a few steps). The stretch moves the run's virtual-time limit by ns, so
 * that it never fails a run as vtime. 0, or -EINVAL (no started system, a
 * worker, ns 0 or past the clock's range), -ENOMEM. The scenario framework
 * idles every run this way after its workload ("The idle check",
 * docs/simulator.md). */
int sh_sim_idle(uint64_t ns);

/* The figures of the current (or last) simulation. (The trace file is
 * finished when the system is freed.) */
void sh_sim_report_get(sh_sim_report *r);
/* The caller's clock in nanoseconds, without a step: the virtual clock for
 * the simulation's own fibers, its node's (<stackhouse/cluster.h>: offset
 * and drift) for a node's. sh_sim_report's vtime_ns is the true one. */
uint64_t sh_sim_clock_ns(void);
/* The true time at which the caller's clock read (or will read) local_ns:
 * the inverse of sh_sim_clock_ns over its node's recent drifts (the last
 * 16 changes; a reading from before them is placed at the oldest kept). */
uint64_t sh_sim_true_of_ns(uint64_t local_ns);

/*
 * Failures the simulator detects itself: "deadlock" (every fiber blocked,
 * no timer can wake any), "livelock" (max_steps passed), "vtime" (the
 * virtual-time limit passed), and the program's misuse of the simulation:
 * "blocking" (a call that blocks the simulation's OS thread: a real sleep,
 * sched_yield, pthread_create or _join, a timed poll/select/epoll_wait, a
 * condition wait, a mutex another fiber holds), "thread" (the runtime
 * entered from an OS thread other than the simulation's), "hang" (no
 * scheduling point for hang_real_ms of real time: a busy loop). Their
 * detail names the fiber and the caller's location; the backtrace goes to
 * stderr. The run cannot go on: the handler is called
 * with the kind and a one-line detail and must not return (the default
 * prints both to stderr and calls _exit(1)). The trace file, if any, is
 * finished before the handler runs.
 */
typedef void (*sh_sim_fail_fn)(const char *kind, const char *detail);
void sh_sim_on_failure(sh_sim_fail_fn fn);

/* For a process about to die some other way (an assert, a signal, a
 * sanitizer report): marks the failure in the trace file, if one is open,
 * and finishes the file so that it stays valid JSON. Best effort. (A
 * failure the simulator detects is drawn the same way, "FAIL: <kind>" with
 * its detail as the instant's text, on the failing fiber's track.) */
void sh_sim_trace_abandon(const char *why);

/* Whether the current simulation is writing a trace file (options.trace_path):
 * what is only for the trace (a note's text) need not be made otherwise. */
bool sh_sim_tracing(void);
/* Draws an instant event of category `cat` named `name`, with `text` as
 * its argument (NULL: none), at the current virtual time on the calling
 * fiber's track, in the trace file if one is being written; nothing
 * otherwise. Not mixed into the trace hash. The scenario framework draws
 * failed checks ("check") and sh_scn_note ("note") with it. */
void sh_sim_trace_mark(const char *cat, const char *name, const char *text);

/*
 * A run of a registered scenario (<stackhouse/scenario.h>) from a test
 * framework: in a forked child, as `shsim run` does, so that whatever ends
 * the run (a failure the simulator detects, an assert, a crash, a sanitizer
 * report, a hang past 600 s) comes back as a result. Defined in
 * libstackhouse-shsim.a (link it before the simulation library).
 */
typedef struct sh_sim_result {
  bool ok;
  char kind[32];    /* the failure's kind: "invariant", "deadlock", ... ("" when ok) */
  char detail[256]; /* its one-line detail */
  uint64_t hash;    /* the trace hash, steps and virtual time (sh_sim_report) */
  uint64_t steps;
  uint64_t vtime_ns;
  uint64_t messages; /* messages delivered (0 if the run died) */
} sh_sim_result;

/* Runs `scenario` once with *opt (its seed, strategy, ...; NULL: the
 * defaults, seed 0); the scenario's own bounds apply as in shsim. 0 and
 * *out, or -ENOENT (no such scenario). A process that cannot fork exits 2. */
int sh_sim_run(const char *scenario, const sh_sim_options *opt, sh_sim_result *out);

#ifdef __cplusplus
}
#endif

#endif
