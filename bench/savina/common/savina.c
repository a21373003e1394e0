/*
 * The Savina suite's harness (see savina.h).
 */
#include "savina.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "malloc_count.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void sv_begin(sv_sample *s) {
  s->mallocs0 = malloc_count_read();
  s->t0 = now_s();
}

void sv_end(sv_sample *s, uint64_t msgs) {
  s->t1 = now_s();
  s->mallocs1 = malloc_count_read();
  s->msgs = msgs;
}

/* ---- options ----------------------------------------------------------- */

static void usage(const sv_spec *s, FILE *out) {
  fprintf(out, "savina %s: messages counted: %s\n", s->name, s->msgs_def);
  fprintf(out, "  --n N        %s (default %" PRIu64 ", --quick %" PRIu64 ")\n", s->n_help, s->n,
          s->n_quick);
  if (s->actors_help != NULL)
    fprintf(out, "  --actors A   %s (default %" PRIu64 ", --quick %" PRIu64 ")\n", s->actors_help,
            s->actors, s->actors_quick);
  fprintf(out, "  --workers W  the runtime's threads (default 2)\n"
               "  --reps R     measured runs, median reported (default 3; --quick 1)\n"
               "  --warmup K   unmeasured runs first (default 1; --quick 0)\n"
               "  --quick      small parameters, one run\n");
}

/* argv[i]'s value as a number >= 1 (--warmup: >= 0), or usage and exit 2. */
static uint64_t number(const sv_spec *s, int argc, char **argv, int i, uint64_t min) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = i + 1 < argc ? strtoull(argv[i + 1], &end, 10) : 0;
  if (i + 1 >= argc || errno != 0 || end == argv[i + 1] || *end != '\0' || v < min) {
    fprintf(stderr, "savina %s: %s needs a number >= %" PRIu64 "\n", s->name, argv[i], min);
    usage(s, stderr);
    exit(2);
  }
  return v;
}

/* Where option `name` stores its value in *p (NULL: not a numeric option). */
static uint64_t *slot(const sv_spec *s, sv_params *p, const char *name) {
  if (strcmp(name, "--n") == 0) return &p->n;
  if (strcmp(name, "--actors") == 0 && s->actors_help != NULL) return &p->actors;
  if (strcmp(name, "--workers") == 0) return &p->workers;
  if (strcmp(name, "--reps") == 0) return &p->reps;
  if (strcmp(name, "--warmup") == 0) return &p->warmup;
  return NULL;
}

void sv_setup(const sv_spec *spec, int argc, char **argv, sv_params *p) {
  /* UINT64_MAX: not given; the defaults depend on --quick, seen anywhere. */
  memset(p, 0, sizeof *p);
  p->spec = spec;
  p->n = p->actors = p->workers = p->reps = p->warmup = UINT64_MAX;
  for (int i = 1; i < argc; i++) {
    uint64_t *v = slot(spec, p, argv[i]);
    if (v != NULL) {
      *v = number(spec, argc, argv, i, strcmp(argv[i], "--warmup") == 0 ? 0 : 1);
      i++;
    } else if (strcmp(argv[i], "--quick") == 0) {
      p->quick = true;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(spec, stdout);
      exit(0);
    } else {
      fprintf(stderr, "savina %s: unknown option %s\n", spec->name, argv[i]);
      usage(spec, stderr);
      exit(2);
    }
  }
  if (p->n == UINT64_MAX) p->n = p->quick ? spec->n_quick : spec->n;
  if (p->actors == UINT64_MAX) p->actors = p->quick ? spec->actors_quick : spec->actors;
  if (p->workers == UINT64_MAX) p->workers = 2;
  if (p->reps == UINT64_MAX) p->reps = p->quick ? 1 : 3;
  if (p->warmup == UINT64_MAX) p->warmup = p->quick ? 0 : 1;
  if (p->reps > SV_MAX_REPS) p->reps = SV_MAX_REPS;
}

/* ---- runs and the output line ------------------------------------------ */

static int by_elapsed(const void *a, const void *b) {
  double x = ((const sv_sample *)a)->t1 - ((const sv_sample *)a)->t0;
  double y = ((const sv_sample *)b)->t1 - ((const sv_sample *)b)->t0;
  return (x > y) - (x < y);
}

/* One run; its failure is printed. */
static int run_one(const sv_params *p, sv_run_fn run, void *ctx, sv_sample *s) {
  memset(s, 0, sizeof *s);
  int rc = run(ctx, p, s);
  if (rc != 0)
    fprintf(stderr, "savina %s: run failed: %s\n", p->spec->name,
            rc == -EPROTO ? "wrong result" : strerror(-rc));
  return rc;
}

static double peak_rss_mib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
}

int sv_main(const sv_params *p, const char *runtime, sv_run_fn run, void *ctx) {
  sv_sample samples[SV_MAX_REPS];
  int rc = 0;
  for (uint64_t i = 0; i < p->warmup && rc == 0; i++) rc = run_one(p, run, ctx, &samples[0]);
  for (uint64_t i = 0; i < p->reps && rc == 0; i++) rc = run_one(p, run, ctx, &samples[i]);
  if (rc != 0) {
    printf("savina name=%s runtime=%s check=FAILED\n", p->spec->name, runtime);
    return 1;
  }
  qsort(samples, p->reps, sizeof samples[0], by_elapsed);
  const sv_sample *m = &samples[p->reps / 2];
  double elapsed = m->t1 - m->t0;
  double msgs = (double)m->msgs;
  char mallocs[32] = "-";
  if (malloc_count_works())
    snprintf(mallocs, sizeof mallocs, "%.3f", (double)(m->mallocs1 - m->mallocs0) / msgs);
  printf("savina name=%s runtime=%s msgs_per_s=%.0f elapsed_s=%.4f rss_mib=%.1f "
         "mallocs_per_msg=%s msgs=%" PRIu64 " n=%" PRIu64 " actors=%" PRIu64 " reps=%" PRIu64
         " check=ok\n",
         p->spec->name, runtime, msgs / elapsed, elapsed, peak_rss_mib(), mallocs, m->msgs, p->n,
         p->actors, p->reps);
  return 0;
}
