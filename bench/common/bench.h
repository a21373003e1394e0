/*
 * Shared bench plumbing, independent of any actor runtime so that the CAF
 * comparison benches (C++) use the very same measurement loop, statistics
 * and output: option parsing, the clock, the warm-up / measured-phase loop
 * driven from the main thread, medians, and the machine's load.
 *
 * How a phase is measured (bench_measure): the runtime under test runs its
 * workload open-ended; the main thread polls progress counters every
 * millisecond, first until the probe says warm-up is over, then snapshots
 * (clock, malloc count, op count), then polls until target_ops more ops were
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

/* ---- options ---------------------------------------------------------- */

/* One command-line option: `--name N` into *value, `--name TEXT` into *text,
 * or (both NULL) a flag `--name` that sets *flag. */
typedef struct bench_opt {
  const char *name;
  const char *help;
  uint64_t *value;
  bool *flag;
  const char **text;
} bench_opt;

/* Parses argv against opts; prints usage and exits on --help (status 0) or
 * on an unknown option or a bad number (status 2). */
void bench_parse(int argc, char **argv, const char *what, const bench_opt *opts, size_t nopts);

/* Whether case `id` is to run under --case `only` (NULL: every case). */
bool bench_selected(const char *only, const char *id);

/* ---- clock and machine ------------------------------------------------ */

uint64_t bench_now_ns(void);
void bench_sleep_ms(uint32_t ms);
/* CPUs this process may run on. */
uint32_t bench_cpus(void);
/* Prints "load (<when>): <1, 5, 15 min load averages>" from /proc/loadavg. */
void bench_print_load(const char *when);
/* Prints the malloc counter's self-check; false if counting is not in effect. */
bool bench_check_malloc_count(void);

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

/* Runs one measured phase (see the file comment). target_ops: operations to
 * measure; max_ms caps the phase (a slow case ends early, its rate is still
 * exact); warm_max_ms caps the warm-up wait. */
void bench_measure(const bench_probe *p, uint64_t target_ops, uint64_t max_ms, uint64_t warm_max_ms,
                   bench_sample *out);

/* ---- statistics and output -------------------------------------------- */

double bench_median(const double *v, int n);
double bench_min(const double *v, int n);
double bench_max(const double *v, int n);

/* Bench-specific columns per row (e.g. parks per 1000 ops, fairness). */
#define BENCH_EXTRAS 2

/* The repetitions of one case. */
typedef struct bench_case {
  int reps;
  double rate[BENCH_MAX_REPS]; /* ops/s */
  double mallocs_per_msg[BENCH_MAX_REPS];
  double extra[BENCH_EXTRAS][BENCH_MAX_REPS];
  uint64_t peak[BENCH_MAX_REPS];
  uint64_t mallocs; /* allocation calls, all reps' phases */
  uint64_t frees;   /* free calls, all reps' phases */
  double msgs;      /* messages, all reps' phases */
} bench_case;

/* Adds one rep. msgs_per_op converts ops into messages for the mallocs/msg
 * figure (2 for an ask/reply round trip); extra: BENCH_EXTRAS values, or
 * NULL. A void sample (warm-up timed out, no ops) is not added. */
void bench_case_add(bench_case *c, const bench_sample *s, double msgs_per_op, const double *extra);

/* The shape of a bench's table. */
typedef struct bench_table {
  const char *rate_unit;           /* e.g. "rt/s" */
  const char *extra[BENCH_EXTRAS]; /* column names; NULL: no such column */
  bool peak;                       /* show the peak outstanding column */
} bench_table;

void bench_table_header(const bench_table *t);
/* One row: id (a short token scripts can match), a description (cut to 34
 * characters, so the figures start at column 50 for scripts), the
 * median/min/max rate, the median mallocs/msg and the allocation calls
 * summed over every rep's measured phase (so that a rare malloc shows even
 * where mallocs/msg rounds to zero), the medians of the extras, the peak. */
void bench_table_row(const bench_table *t, const char *id, const char *desc, const bench_case *c);
/* "  reps: r1 r2 ..." (each rep's rate, in run order), for --verbose. */
void bench_case_print_reps(const bench_case *c);

/* When the case allocated in its measured phases, a NOTE line with the
 * mallocs, frees and messages: no frees means the pools only grew to a new
 * high-water mark (bounded), frees too mean objects churn through malloc. */
void bench_note_mallocs(const char *id, const bench_case *c);

#ifdef __cplusplus
}
#endif
#endif
