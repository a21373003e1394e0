/*
 * Shared bench plumbing (interface and the measurement method in bench.h).
 */
#include "bench.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
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

/* ---- clock and machine ------------------------------------------------ */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(uint32_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* CPUs this process may run on. */
static uint32_t cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
    return (uint32_t)CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (uint32_t)n : 1;
}

/* Prints "load (<when>): <1, 5, 15 min load averages>" from /proc/loadavg. */
static void print_load(const char *when) {
  char buf[128] = "unknown";
  FILE *f = fopen("/proc/loadavg", "r");
  if (f != NULL) {
    if (fgets(buf, sizeof buf, f) == NULL) strcpy(buf, "unknown");
    fclose(f);
  }
  buf[strcspn(buf, "\n")] = '\0';
  printf("load (%s): %s  [1/5/15-min averages, runnable/total, last pid]\n", when, buf);
}

/* Prints the malloc counter's self-check when counting is not in effect. */
static void check_malloc_count(void) {
  if (!malloc_count_works())
    printf("WARNING: malloc counting is not in effect: mallocs/msg figures are void\n");
}

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

static void parse(int argc, char **argv, const char *what, const bench_opt *opts, size_t nopts) {
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

static bool in_range(const bench_opt *opts, size_t nopts) {
  for (size_t i = 0; i < nopts; i++) {
    const uint64_t *v = opts[i].value;
    if (v != NULL && (*v < opts[i].min || *v > opts[i].max)) return false;
  }
  return true;
}

/* The bench's own options go between --max-ms and --case. */
#define MAX_OWN_OPTS 8

void bench_setup(const bench_spec *s, const bench_opt *own, size_t nown, int argc, char **argv,
                 bench_params *p) {
  const bench_workload *w = s->workload;
  memset(p, 0, sizeof(*p));
  p->rounds = w->rounds;
  p->reps = 5;
  p->max_ms = 10000;
  p->spec = s;
  bench_opt opts[8 + MAX_OWN_OPTS] = {
      {"workers", s->workers_help, &p->workers, NULL, NULL, 0, 1024},
      {w->actors, s->actors_help, &p->actors, NULL, NULL, 1, 100000},
      {"rounds", w->rounds_help, &p->rounds, NULL, NULL, 1, UINT64_MAX},
      {"reps", "runs per case; the median is shown (default 5)", &p->reps, NULL, NULL, 1,
       BENCH_MAX_REPS},
      {"max-ms", "cap on a measured phase in ms (default 10000)", &p->max_ms, NULL, NULL, 0,
       UINT64_MAX},
      {"burn", "threads that burn CPU beside the runtime's, as a busy machine (default 0)",
       &p->burners, NULL, NULL, 0, 64},
  };
  size_t n = 6;
  for (size_t i = 0; i < nown && i < MAX_OWN_OPTS; i++) opts[n++] = own[i];
  const bench_opt tail[] = {
      {"case", "run only the case with this id (a table row id)", NULL, NULL, &p->only, 0, 0},
      {"verbose", "also print every rep's rate", NULL, &p->verbose, NULL, 0, 0},
      {"quick", w->quick_help, NULL, &p->quick, NULL, 0, 0},
  };
  for (size_t i = 0; i < sizeof tail / sizeof tail[0]; i++) opts[n++] = tail[i];
  parse(argc, argv, s->what, opts, n);
  if (p->quick) {
    p->rounds = w->quick_rounds;
    p->reps = 1;
  }
  if (p->workers == 0) p->workers = cpus();
  if (p->actors == 0) p->actors = 2 * p->workers;
  if (!in_range(opts, n)) {
    fprintf(stderr, "%s: options out of range\n", s->name);
    exit(2);
  }
}

static bool selected(const char *only, const char *id) {
  return only == NULL || strcmp(only, id) == 0;
}

/* ---- one measured phase ----------------------------------------------- */

/* How long warm-up may take before the sample is void. */
#define WARM_MAX_MS 30000

static void snap(const bench_probe *p, int which, uint64_t *t, uint64_t *mallocs, uint64_t *frees,
                 uint64_t *ops) {
  *t = now_ns();
  *mallocs = malloc_count_read();
  *frees = malloc_count_frees();
  *ops = p->ops(p->ctx);
  if (p->snapshot != NULL) p->snapshot(p->ctx, which);
}

void bench_measure(const bench_params *pp, const bench_probe *p, bench_sample *out) {
  memset(out, 0, sizeof(*out));
  uint64_t warm_start = now_ns();
  while (!p->warm(p->ctx)) {
    if (now_ns() - warm_start > WARM_MAX_MS * 1000000ull) {
      out->warm_timed_out = true;
      return;
    }
    sleep_ms(POLL_MS);
  }
  uint64_t t0, m0, f0, n0, t1, m1, f1, n1;
  snap(p, 0, &t0, &m0, &f0, &n0);
  uint64_t peak = 0;
  for (;;) {
    sleep_ms(POLL_MS);
    if (p->outstanding != NULL) {
      uint64_t o = p->outstanding(p->ctx);
      if (o > peak) peak = o;
    }
    if (p->ops(p->ctx) - n0 >= pp->rounds || now_ns() - t0 >= pp->max_ms * 1000000ull) break;
  }
  snap(p, 1, &t1, &m1, &f1, &n1);
  out->seconds = (double)(t1 - t0) / 1e9;
  out->ops = n1 - n0;
  out->mallocs = m1 - m0;
  out->frees = f1 - f0;
  out->peak_outstanding = peak;
}

uint64_t bench_warm_ops(const bench_params *p, uint32_t shares, uint64_t floor) {
  uint64_t warm = p->rounds / 10 / shares;
  return warm < floor ? floor : warm;
}

bool bench_wait(bool (*done)(void *ctx), void *ctx, uint32_t max_ms) {
  for (uint32_t i = 0; i < max_ms; i++) {
    if (done(ctx)) return true;
    sleep_ms(1);
  }
  return false;
}

/* ---- per-actor progress ----------------------------------------------- */

uint64_t bench_count_sum(bench_count_fn count, void *ctx, uint32_t n) {
  uint64_t sum = 0;
  for (uint32_t i = 0; i < n; i++) sum += count(ctx, i);
  return sum;
}

bool bench_count_warm(bench_count_fn count, void *ctx, uint32_t n, uint64_t warm) {
  if (bench_count_sum(count, ctx, n) >= 2 * warm * n) return true;
  for (uint32_t i = 0; i < n; i++)
    if (count(ctx, i) < warm) return false;
  return true;
}

void bench_count_mark(bench_count_fn count, void *ctx, uint32_t n, uint64_t *marks) {
  for (uint32_t i = 0; i < n; i++) marks[i] = count(ctx, i);
}

double bench_fairness(const uint64_t *start, const uint64_t *end, uint32_t n) {
  uint64_t min = UINT64_MAX, sum = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t d = end[i] - start[i];
    min = d < min ? d : min;
    sum += d;
  }
  return sum > 0 ? (double)min * n / (double)sum : 0;
}

/* ---- statistics ------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(const double *v, int n) {
  if (n <= 0) return 0;
  double s[BENCH_MAX_REPS];
  memcpy(s, v, (size_t)n * sizeof(double));
  qsort(s, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static double min_of(const double *v, int n) {
  double m = n > 0 ? v[0] : 0;
  for (int i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
  return m;
}

static double max_of(const double *v, int n) {
  double m = n > 0 ? v[0] : 0;
  for (int i = 1; i < n; i++) m = v[i] > m ? v[i] : m;
  return m;
}

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

/* Adds one rep; a void sample (warm-up timed out, no ops) is not added. */
static void case_add(bench_case *c, const bench_sample *s, double msgs_per_op,
                     const double *extra) {
  if (c->reps >= BENCH_MAX_REPS || s->warm_timed_out || s->ops == 0) return;
  int i = c->reps++;
  c->rate[i] = (double)s->ops / s->seconds;
  c->mallocs_per_msg[i] = (double)s->mallocs / ((double)s->ops * msgs_per_op);
  for (int k = 0; k < BENCH_EXTRAS; k++) c->extra[k][i] = extra[k];
  c->peak[i] = s->peak_outstanding;
  c->mallocs += s->mallocs;
  c->frees += s->frees;
  c->msgs += (double)s->ops * msgs_per_op;
}

/* ---- output ----------------------------------------------------------- */

static void table_header(const bench_table *t) {
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

static void table_row(const bench_table *t, const char *id, const char *desc, const bench_case *c) {
  if (c->reps == 0) {
    printf("%-13s %-34.34s %14s\n", id, desc, "NO SAMPLE");
    return;
  }
  uint64_t pk = 0;
  for (int i = 0; i < c->reps; i++) pk = c->peak[i] > pk ? c->peak[i] : pk;
  printf("%-13s %-34.34s %14.0f %12.0f %12.0f %12.4f %8" PRIu64, id, desc, median(c->rate, c->reps),
         min_of(c->rate, c->reps), max_of(c->rate, c->reps), median(c->mallocs_per_msg, c->reps),
         c->mallocs);
  for (int k = 0; k < BENCH_EXTRAS; k++)
    if (t->extra[k] != NULL) print_extra(median(c->extra[k], c->reps));
  if (t->peak) printf(" %10" PRIu64, pk);
  printf("\n");
  fflush(stdout);
}

/* "  reps: r1 r2 ..." (each rep's rate, in run order), for --verbose. */
static void print_reps(const bench_case *c) {
  printf("  reps:");
  for (int i = 0; i < c->reps; i++) printf(" %.0f", c->rate[i]);
  printf("\n");
}

/* When the case allocated in its measured phases, a NOTE line with the
 * mallocs, frees and messages: no frees means the pools only grew to a new
 * high-water mark (bounded), frees too mean objects churn through malloc. */
static void note_mallocs(const char *id, const bench_case *c) {
  if (c->mallocs == 0 && c->frees == 0) return;
  printf("  NOTE: %s: %" PRIu64 " mallocs and %" PRIu64 " frees in %.0f messages (all reps)%s\n",
         id, c->mallocs, c->frees, c->msgs,
         c->frees == 0 ? ": pool growth to a new high-water mark" : "");
}

/* ---- a busy machine ----------------------------------------------------- */

#define MAX_BURNERS 64
static pthread_t burners[MAX_BURNERS];
static size_t nburners;
static atomic_bool burn_stop;

/* Spins until told to stop: a process beside the runtime that wants the
 * CPUs as much as it does. relaxed: a flag polled in a loop. */
static void *burn(void *arg) {
  (void)arg;
  volatile uint64_t x = 0;
  while (!atomic_load_explicit(&burn_stop, memory_order_relaxed)) x = x * 6364136223846793005ull + 1;
  return NULL;
}

static void burn_start(uint64_t n) {
  atomic_store(&burn_stop, false);
  for (nburners = 0; nburners < n && nburners < MAX_BURNERS; nburners++)
    if (pthread_create(&burners[nburners], NULL, burn, NULL) != 0) break;
}

static void burn_end(void) {
  atomic_store(&burn_stop, true);
  for (size_t i = 0; i < nburners; i++) pthread_join(burners[i], NULL);
  nburners = 0;
}

void bench_begin(const bench_params *p, const char *runtime, const char *detail, const char *note) {
  const bench_workload *w = p->spec->workload;
  printf("%s %s: %" PRIu64 " %s on %u CPUs, %" PRIu64 " %s measured per run%s, median of %" PRIu64
         "\n",
         runtime, w->name, p->workers, p->spec->threads, cpus(), p->rounds, w->unit,
         detail != NULL ? detail : "", p->reps);
  if (note != NULL) printf("%s\n", note);
  if (p->burners > 0) printf("beside %" PRIu64 " CPU-burning thread(s)\n", p->burners);
  burn_start(p->burners);
  print_load("start");
  check_malloc_count();
  table_header(&w->table);
}

int bench_end(int status) {
  burn_end();
  print_load("end");
  return status;
}

int bench_run_case(const bench_params *p, const char *id, const char *desc, uint32_t actors,
                   double msgs_per_op, bench_rep_fn rep, void *ctx) {
  if (!selected(p->only, id)) return 0;
  bench_case c;
  memset(&c, 0, sizeof c);
  int status = 0;
  for (uint64_t i = 0; i < p->reps; i++) {
    bench_sample s;
    memset(&s, 0, sizeof s); /* a rep that fails before its phase leaves it so */
    double extra[BENCH_EXTRAS] = {0};
    int rc = rep(ctx, actors, &s, extra);
    if (rc != 0) {
      fprintf(stderr, "%s %s: run %" PRIu64 " failed: %s\n", p->spec->name, id, i, strerror(-rc));
      status = 1;
      continue;
    }
    case_add(&c, &s, msgs_per_op, extra);
  }
  table_row(&p->spec->workload->table, id, desc, &c);
  if (p->verbose) print_reps(&c);
  note_mallocs(id, &c);
  return status;
}
