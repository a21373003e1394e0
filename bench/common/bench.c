/*
 * Shared bench plumbing (interface and the measurement method in bench.h).
 */
#include "bench.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "malloc_count.h"

/* Main-thread poll period: short enough that the end snapshot is taken soon
 * after the target is reached, long enough not to steal CPU from workers
 * on a 2-core machine. */
#define POLL_MS 1

/* ---- options ---------------------------------------------------------- */

static void usage(FILE *f, const char *prog, const char *what, const bench_opt *opts,
                  size_t nopts) {
  fprintf(f, "%s: %s\nusage: %s [options]\n", prog, what, prog);
  for (size_t i = 0; i < nopts; i++)
    fprintf(f, "  --%-12s %-4s %s\n", opts[i].name,
            opts[i].value  ? "N"
            : opts[i].text ? "TEXT"
                           : "",
            opts[i].help);
  fprintf(f, "  --%-12s      this text\n", "help");
}

static const bench_opt *find_opt(const char *arg, const bench_opt *opts, size_t nopts) {
  if (strncmp(arg, "--", 2) != 0) return NULL;
  for (size_t i = 0; i < nopts; i++)
    if (strcmp(arg + 2, opts[i].name) == 0) return &opts[i];
  return NULL;
}

static bool parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno != 0 || end == s || *end != '\0' || s[0] == '-') return false;
  *out = v;
  return true;
}

void bench_parse(int argc, char **argv, const char *what, const bench_opt *opts, size_t nopts) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout, argv[0], what, opts, nopts);
      exit(0);
    }
    const bench_opt *o = find_opt(argv[i], opts, nopts);
    bool ok = o != NULL;
    if (ok && o->value != NULL) {
      ok = i + 1 < argc && parse_u64(argv[i + 1], o->value);
      i++;
    } else if (ok && o->text != NULL) {
      ok = i + 1 < argc;
      if (ok) *o->text = argv[i + 1];
      i++;
    } else if (ok) {
      *o->flag = true;
    }
    if (!ok) {
      fprintf(stderr, "%s: bad option or value: %s\n", argv[0], argv[i < argc ? i : argc - 1]);
      usage(stderr, argv[0], what, opts, nopts);
      exit(2);
    }
  }
}

bool bench_selected(const char *only, const char *id) {
  return only == NULL || strcmp(only, id) == 0;
}

/* ---- clock and machine ------------------------------------------------ */

uint64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void bench_sleep_ms(uint32_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

uint32_t bench_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
    return (uint32_t)CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (uint32_t)n : 1;
}

void bench_print_load(const char *when) {
  char buf[128] = "unknown";
  FILE *f = fopen("/proc/loadavg", "r");
  if (f != NULL) {
    if (fgets(buf, sizeof buf, f) == NULL) strcpy(buf, "unknown");
    fclose(f);
  }
  buf[strcspn(buf, "\n")] = '\0';
  printf("load (%s): %s  [1/5/15-min averages, runnable/total, last pid]\n", when, buf);
}

bool bench_check_malloc_count(void) {
  bool ok = malloc_count_works();
  if (!ok) printf("WARNING: malloc counting is not in effect: mallocs/msg figures are void\n");
  return ok;
}

/* ---- one measured phase ----------------------------------------------- */

static void snap(const bench_probe *p, int which, uint64_t *t, uint64_t *mallocs, uint64_t *frees,
                 uint64_t *ops) {
  *t = bench_now_ns();
  *mallocs = malloc_count_read();
  *frees = malloc_count_frees();
  *ops = p->ops(p->ctx);
  if (p->snapshot != NULL) p->snapshot(p->ctx, which);
}

void bench_measure(const bench_probe *p, uint64_t target_ops, uint64_t max_ms, uint64_t warm_max_ms,
                   bench_sample *out) {
  memset(out, 0, sizeof(*out));
  uint64_t warm_start = bench_now_ns();
  while (!p->warm(p->ctx)) {
    if (bench_now_ns() - warm_start > warm_max_ms * 1000000ull) {
      out->warm_timed_out = true;
      return;
    }
    bench_sleep_ms(POLL_MS);
  }
  uint64_t t0, m0, f0, n0, t1, m1, f1, n1;
  snap(p, 0, &t0, &m0, &f0, &n0);
  uint64_t peak = 0;
  for (;;) {
    bench_sleep_ms(POLL_MS);
    if (p->outstanding != NULL) {
      uint64_t o = p->outstanding(p->ctx);
      if (o > peak) peak = o;
    }
    if (p->ops(p->ctx) - n0 >= target_ops || bench_now_ns() - t0 >= max_ms * 1000000ull) break;
  }
  snap(p, 1, &t1, &m1, &f1, &n1);
  out->seconds = (double)(t1 - t0) / 1e9;
  out->ops = n1 - n0;
  out->mallocs = m1 - m0;
  out->frees = f1 - f0;
  out->peak_outstanding = peak;
}

/* ---- statistics and output -------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double bench_median(const double *v, int n) {
  if (n <= 0) return 0;
  double s[BENCH_MAX_REPS];
  memcpy(s, v, (size_t)n * sizeof(double));
  qsort(s, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

double bench_min(const double *v, int n) {
  double m = n > 0 ? v[0] : 0;
  for (int i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
  return m;
}

double bench_max(const double *v, int n) {
  double m = n > 0 ? v[0] : 0;
  for (int i = 1; i < n; i++) m = v[i] > m ? v[i] : m;
  return m;
}

void bench_case_add(bench_case *c, const bench_sample *s, double msgs_per_op, const double *extra) {
  if (c->reps >= BENCH_MAX_REPS || s->warm_timed_out || s->ops == 0) return;
  int i = c->reps++;
  c->rate[i] = (double)s->ops / s->seconds;
  c->mallocs_per_msg[i] = (double)s->mallocs / ((double)s->ops * msgs_per_op);
  for (int k = 0; k < BENCH_EXTRAS; k++) c->extra[k][i] = extra != NULL ? extra[k] : 0;
  c->peak[i] = s->peak_outstanding;
  c->mallocs += s->mallocs;
  c->frees += s->frees;
  c->msgs += (double)s->ops * msgs_per_op;
}

void bench_table_header(const bench_table *t) {
  char med[32];
  snprintf(med, sizeof med, "%s median", t->rate_unit);
  printf("%-13s %-34.34s %14s %12s %12s %12s %8s", "id", "case", med, "min", "max", "mallocs/msg",
         "mallocs");
  for (int k = 0; k < BENCH_EXTRAS; k++)
    if (t->extra[k] != NULL) printf(" %10s", t->extra[k]);
  if (t->peak) printf(" %10s", "peak out");
  printf("\n");
}

/* NaN marks a figure the runtime cannot give (e.g. CAF has no park count). */
static void print_extra(double v) {
  if (isnan(v))
    printf(" %10s", "-");
  else
    printf(" %10.3f", v);
}

void bench_table_row(const bench_table *t, const char *id, const char *desc, const bench_case *c) {
  if (c->reps == 0) {
    printf("%-13s %-34.34s %14s\n", id, desc, "NO SAMPLE");
    return;
  }
  uint64_t pk = 0;
  for (int i = 0; i < c->reps; i++) pk = c->peak[i] > pk ? c->peak[i] : pk;
  printf("%-13s %-34.34s %14.0f %12.0f %12.0f %12.4f %8" PRIu64, id, desc,
         bench_median(c->rate, c->reps), bench_min(c->rate, c->reps), bench_max(c->rate, c->reps),
         bench_median(c->mallocs_per_msg, c->reps), c->mallocs);
  for (int k = 0; k < BENCH_EXTRAS; k++)
    if (t->extra[k] != NULL) print_extra(bench_median(c->extra[k], c->reps));
  if (t->peak) printf(" %10" PRIu64, pk);
  printf("\n");
  fflush(stdout);
}

void bench_note_mallocs(const char *id, const bench_case *c) {
  if (c->mallocs == 0 && c->frees == 0) return;
  printf("  NOTE: %s: %" PRIu64 " mallocs and %" PRIu64 " frees in %.0f messages (all reps)%s\n",
         id, c->mallocs, c->frees, c->msgs,
         c->frees == 0 ? ": pool growth to a new high-water mark" : "");
}

void bench_case_print_reps(const bench_case *c) {
  printf("  reps:");
  for (int i = 0; i < c->reps; i++) printf(" %.0f", c->rate[i]);
  printf("\n");
}
