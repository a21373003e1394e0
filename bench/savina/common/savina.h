/*
 * The Savina suite's harness, independent of any actor runtime so that the
 * stackhouse programs (bench/savina/NAME.c) and their CAF twins
 * (bench/savina/caf/NAME.cpp) share the options, the runs and the output
 * line; the Erlang and Go twins print the same line by their own means.
 *
 * A Savina benchmark is a fixed piece of work that runs to completion (not an
 * open-ended phase as in bench/common/): a run builds its actors, sends the
 * first messages, waits for the result and checks it. The harness runs
 * --warmup unmeasured runs, then --reps measured ones, and prints one line:
 *
 *   savina name=NAME runtime=RT msgs_per_s=R elapsed_s=E rss_mib=M
 *          mallocs_per_msg=A msgs=N n=N actors=A reps=R check=ok
 *
 * (on one line). elapsed_s is the median run; msgs_per_s is msgs over it;
 * mallocs_per_msg counts the allocation calls of that median run (whole
 * process, by interposition: bench/common/malloc_count.h); rss_mib is the
 * process's peak resident set (getrusage's ru_maxrss), warm-up included.
 * "msgs" is what Savina counts for the benchmark (each program says).
 */
#ifndef BENCH_SAVINA_H
#define BENCH_SAVINA_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SV_MAX_REPS 32

/* A benchmark's parameters and their defaults, shared by its twins. */
typedef struct sv_spec {
  const char *name;     /* "pingpong" */
  const char *msgs_def; /* what "msgs" counts, for --help */
  const char *n_help;   /* what --n is */
  uint64_t n, n_quick;
  const char *actors_help; /* what --actors is; NULL: no such option */
  uint64_t actors, actors_quick;
} sv_spec;

typedef struct sv_params {
  const sv_spec *spec;
  uint64_t n;
  uint64_t actors;
  uint64_t workers; /* the runtime's threads (default 2) */
  uint64_t reps;    /* measured runs (default 3; 1 under --quick) */
  uint64_t warmup;  /* unmeasured runs first (default 1; 0 under --quick) */
  bool quick;
} sv_params;

/* One run, as the benchmark fills it: sv_begin right before its first
 * message, sv_end once its result is in (both from the main thread). */
typedef struct sv_sample {
  double t0, t1;
  uint64_t mallocs0, mallocs1;
  uint64_t msgs; /* messages of the run, Savina's count */
} sv_sample;

void sv_begin(sv_sample *s);
void sv_end(sv_sample *s, uint64_t msgs);

/* Parses --n, --actors, --workers, --reps, --warmup, --quick, --help into
 * *p. Exits with status 0 after --help, 2 on a bad option. */
void sv_setup(const sv_spec *spec, int argc, char **argv, sv_params *p);

/* One run: 0 when its result checked out, a negative errno otherwise
 * (-EPROTO: a wrong result). */
typedef int (*sv_run_fn)(void *ctx, const sv_params *p, sv_sample *s);

/* The warm-up and measured runs, then the output line. Returns the exit
 * status: 0, or 1 when a run failed (its error is printed, the line says
 * check=FAILED). */
int sv_main(const sv_params *p, const char *runtime, sv_run_fn run, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
