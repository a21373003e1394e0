/*
 * Shared bench plumbing, independent of any actor runtime so that the CAF
 * comparison benches (C++) use the very same options, measurement loop,
 * statistics and output: option parsing and checking, the warm-up /
 * measured-phase loop driven from the main thread, per-actor progress and
 * fairness, the repetitions of a case, and the table with the machine's load
 * around it. A bench keeps only its workload and its runtime.
 *
 * How a phase is measured (bench_measure): the runtime under test runs its
 * workload open-ended; the main thread polls progress counters every
 * millisecond, first until the probe says warm-up is over, then snapshots
 * (clock, malloc count, op count), then polls until --rounds more ops were
 * done (or a time cap passed) and snapshots again. Rates and mallocs/op come
 * from the two snapshots only, so warm-up and teardown never count.
 */
#ifndef BENCH_BENCH_H
#define BENCH_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BENCH_MAX_REPS 64

/* Bench-specific columns per row (e.g. parks per 1000 ops, fairness). */
#define BENCH_EXTRAS 2

/* The shape of a bench's table. */
typedef struct bench_table {
  const char *rate_unit;           /* e.g. "rt/s" */
  const char *extra[BENCH_EXTRAS]; /* column names; NULL: no such column */
  bool peak;                       /* show the peak outstanding column */
} bench_table;

/* ---- options and parameters ------------------------------------------ */

/* One command-line option: `--name N` into *value, `--name TEXT` into *text,
 * or (both NULL) a flag `--name` that sets *flag. A value must lie in
 * [min, max] once parsed and defaulted (bench_setup checks). */
typedef struct bench_opt {
  const char *name;
  const char *help;
  uint64_t *value;
  bool *flag;
  const char **text;
  uint64_t min, max;
} bench_opt;

/* A workload as a stackhouse bench and its CAF twin (bench/caf/) both run
 * it (workloads.h): the options, defaults and table they share, so that
 * compare_caf.sh can set their rows side by side. */
typedef struct bench_workload {
  const char *name;        /* "pingpong": the header line says it */
  const char *unit;        /* what --rounds counts, plural: "round trips" */
  const char *actors;      /* the option setting N in the N-actor cases */
  uint64_t rounds;         /* --rounds' default */
  const char *rounds_help; /* --rounds' help */
  uint64_t quick_rounds;   /* --rounds under --quick */
  const char *quick_help;  /* --quick's help */
  bench_table table;
} bench_workload;

/* One bench: a workload on one runtime, and the words its output uses. */
typedef struct bench_spec {
  const bench_workload *workload;
  const char *name;         /* starts its error messages: "caf pingpong" */
  const char *what;         /* --help's first line */
  const char *threads;      /* the header line's word for --workers */
  const char *workers_help; /* --workers' help */
  const char *actors_help;  /* the N option's help */
} bench_spec;

/* The options every bench takes, as bench_setup leaves them. */
typedef struct bench_params {
  uint64_t workers; /* the runtime's threads (default: one per CPU) */
  uint64_t actors;  /* N in the N-actor cases (default: 2 x workers) */
  uint64_t rounds;  /* operations measured per run */
  uint64_t reps;    /* runs per case (default 5) */
  uint64_t max_ms;  /* cap on a measured phase (default 10000) */
  const char *only; /* --case: run only this case; NULL: all */
  uint64_t burners; /* --burn: threads that burn CPU beside the runtime's */
  bool quick, verbose;
  const bench_spec *spec;
} bench_params;

/* Parses argv into *p: the standard options, with the bench's own (`own`,
 * whose values keep the defaults they hold) listed after --max-ms. --quick
 * sets the workload's quick rounds and 1 rep; then --workers and the N
 * option get their defaults and every value its range check. Prints usage
 * and exits on --help (status 0) or on an unknown option or a bad number
 * (status 2); prints "<name>: options out of range" and exits (status 2)
 * when a value is outside its range. */
void bench_setup(const bench_spec *s, const bench_opt *own, size_t nown, int argc, char **argv,
                 bench_params *p);

/* ---- one measured phase ----------------------------------------------- */

typedef struct bench_probe {
  void *ctx;
  /* Operations completed so far (monotonic), read from the main thread. */
  uint64_t (*ops)(void *ctx);
  /* True once the workload is warm (e.g. every pair did its warm-up rounds). */
  bool (*warm)(void *ctx);
  /* Optional: a quantity sampled at every poll of the measured phase whose
   * peak is reported (e.g. notices sent but not yet received). */
  uint64_t (*outstanding)(void *ctx);
  /* Optional: called right after each snapshot (0 start, 1 end) so the
   * bench can read its runtime's own counters at the same instants. */
  void (*snapshot)(void *ctx, int which);
} bench_probe;

typedef struct bench_sample {
  double seconds;            /* measured phase */
  uint64_t ops;              /* operations in it */
  uint64_t mallocs;          /* allocation calls in it, whole process */
  uint64_t frees;            /* free calls in it, whole process */
  uint64_t peak_outstanding; /* max of probe->outstanding over its polls */
  bool warm_timed_out;       /* warm-up never finished: the sample is void */
} bench_sample;

/* Runs one measured phase (see the file comment) of p->rounds operations,
 * capped at p->max_ms (a slow case ends early, its rate is still exact). */
void bench_measure(const bench_params *p, const bench_probe *probe, bench_sample *out);

/* Warm-up target: a tenth of the measured operations shared among `shares`
 * actors, but at least `floor` each. */
uint64_t bench_warm_ops(const bench_params *p, uint32_t shares, uint64_t floor);

/* Polls done(ctx) every millisecond for at most max_ms; whether it held. */
bool bench_wait(bool (*done)(void *ctx), void *ctx, uint32_t max_ms);

/* ---- per-actor progress ----------------------------------------------- */

/* Actor i's operations so far (monotonic), read from the main thread. */
typedef uint64_t (*bench_count_fn)(void *ctx, uint32_t i);

/* The n actors' operations in all. */
uint64_t bench_count_sum(bench_count_fn count, void *ctx, uint32_t n);
/* Whether each of the n actors did `warm` operations, or (should the
 * scheduler starve some) all of them together twice n x warm. */
bool bench_count_warm(bench_count_fn count, void *ctx, uint32_t n, uint64_t warm);
/* marks[i] = actor i's operations so far. */
void bench_count_mark(bench_count_fn count, void *ctx, uint32_t n, uint64_t *marks);
/* The least progress between two marks over the mean (1 = even, 0 = an
 * actor starved). */
double bench_fairness(const uint64_t *start, const uint64_t *end, uint32_t n);

/* ---- a run of cases and its output ------------------------------------ */

/* Prints the header line "<runtime> <workload>: W <threads> on C CPUs,
 * R <unit> measured per run<detail>, median of N", then `note` (NULL: none)
 * on a line of its own, the load, the malloc counter's self-check and the
 * table's header. */
void bench_begin(const bench_params *p, const char *runtime, const char *detail, const char *note);
/* Prints the load at the end; returns status. */
int bench_end(int status);

/* One repetition of a case with `actors` actors (its N: pairs, senders) on
 * a fresh runtime: fills *s and the bench's extra columns (zeroed before the
 * call; NaN prints as "-"); returns 0 or a negative errno (the rep is then
 * reported and left out). */
typedef int (*bench_rep_fn)(void *ctx, uint32_t actors, bench_sample *s,
                            double extra[BENCH_EXTRAS]);

/* Runs case `id` (unless --case names another) p->reps times, then prints
 * its row (the description cut to 34 characters, so that the figures start
 * at column 50 for scripts: the median/min/max rate, the median mallocs/msg,
 * the allocation calls summed over every rep's measured phase so that a rare
 * malloc shows even where mallocs/msg rounds to zero, the medians of the
 * extras, the peak outstanding), under --verbose every rep's rate, and a
 * NOTE when the case allocated. msgs_per_op converts operations into the
 * messages of mallocs/msg (2 for an ask/reply round trip). Returns 0, or 1
 * when a rep failed. */
int bench_run_case(const bench_params *p, const char *id, const char *desc, uint32_t actors,
                   double msgs_per_op, bench_rep_fn rep, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
