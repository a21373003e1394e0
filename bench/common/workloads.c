/*
 * The workloads shared by the stackhouse benches and their CAF twins
 * (interface in workloads.h).
 */
#include "workloads.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "malloc_count.h"

const bench_workload bench_pingpong = {
    .name = "pingpong",
    .unit = "round trips",
    .actors = "pairs",
    .rounds = 1000000,
    .rounds_help = "round trips measured per run, all pairs (default 1000000)",
    .quick_rounds = 20000,
    .quick_help = "CI smoke: 20000 round trips, 1 run per case",
    .table = {"rt/s", {"parks/krt", "fairness"}, false},
};

const bench_workload bench_notice = {
    .name = "notice",
    .unit = "notices",
    .actors = "senders",
    .rounds = 4000000,
    .rounds_help = "notices measured per run (default 4000000)",
    .quick_rounds = 40000,
    .quick_help = "CI smoke: 40000 notices, 1 run per case",
    .table = {"notices/s", {"parks/kn", NULL}, true},
};

void bench_notice_opts(bench_notice_args *a, bench_opt opts[BENCH_NOTICE_NOPTS]) {
  a->burst = 64;
  a->window = 4;
  const bench_opt o[BENCH_NOTICE_NOPTS] = {
      {"burst", "notices per burst = per credit (default 64)", &a->burst, NULL, NULL, 1, 1000000},
      {"window", "credits (bursts) each sender starts with (default 4)", &a->window, NULL, NULL, 1,
       1000000},
  };
  for (int i = 0; i < BENCH_NOTICE_NOPTS; i++) opts[i] = o[i];
}

void bench_notice_detail(const bench_notice_args *a, char *buf, size_t size) {
  snprintf(buf, size, ", burst %" PRIu64 ", window %" PRIu64 " bursts", a->burst, a->window);
}

double bench_notice_msgs_per_op(const bench_notice_args *a) { return 1.0 + 1.0 / (double)a->burst; }

/* ---- bounded_buffer ---------------------------------------------------- */

const bench_workload bench_bounded_buffer = {
    .name = "bounded_buffer",
    .unit = "items",
    .actors = "pairs",
    .rounds = 40000,
    .rounds_help = "items measured per run, shared by the producers (default 40000: 1000 "
                   "for each of 40)",
    .quick_rounds = 4000,
    .quick_help = "CI smoke: 4000 items, 1 run per case",
    .table = {"items/s", {"RSS MiB", "pool peak"}, true},
};

void bench_bb_opts(bench_bb_args *a, bench_opt opts[BENCH_BB_NOPTS]) {
  a->producers = 40;
  a->consumers = 40;
  a->buffer = 50;
  a->prod_cost = 1;
  a->cons_cost = 1;
  const bench_opt o[BENCH_BB_NOPTS] = {
      {"producers", "producers in the savina case (default 40)", &a->producers, NULL, NULL, 1,
       100000},
      {"consumers", "consumers in the savina case (default 40)", &a->consumers, NULL, NULL, 1,
       100000},
      {"buffer", "items the bounded buffer holds (default 50)", &a->buffer, NULL, NULL, 1,
       1u << 30},
      {"prod-cost", "work per item made, x 100 generator steps (default 1; Savina's 25)",
       &a->prod_cost, NULL, NULL, 0, 1000000},
      {"cons-cost", "work per item consumed, likewise (default 1; Savina's 25)", &a->cons_cost,
       NULL, NULL, 0, 1000000},
  };
  for (int i = 0; i < BENCH_BB_NOPTS; i++) opts[i] = o[i];
}

void bench_bb_detail(const bench_bb_args *a, char *buf, size_t size) {
  snprintf(buf, size, ", buffer %" PRIu64 ", costs %" PRIu64 "/%" PRIu64, a->buffer, a->prod_cost,
           a->cons_cost);
}

/* Steps per unit of cost, as Savina's processItem takes 100 logarithms. */
#define BB_STEPS_PER_COST 100

double bench_bb_work(double acc, uint64_t seed, uint64_t cost) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1; /* never 0: xorshift would stay there */
  uint64_t steps = cost > 0 ? cost * BB_STEPS_PER_COST : 1;
  for (uint64_t i = 0; i < steps; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    /* A division, like a logarithm a long-latency floating-point op; the
     * uniform draw in [0, 1) is shifted off 0 as Savina's log(r + 0.01). */
    acc += 1.0 / ((double)(x >> 11) * 0x1p-53 + 0.01);
  }
  return acc;
}

static uint64_t bb_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A producer's count, on its own cache line. */
typedef struct bb_made {
  _Alignas(64) atomic_uint_fast64_t n;
} bb_made;

/* A consumer's figures, on their own cache line. sum, sumsq and last_ns
 * are written before count's release store and read after an acquire load
 * of count, so a reader that saw a count sees the figures up to it. */
typedef struct bb_eaten {
  _Alignas(64) atomic_uint_fast64_t count;
  atomic_uint_fast64_t last_ns;
  uint64_t sum, sumsq; /* wrap modulo 2^64, as the expected figures do */
} bb_eaten;

struct bench_bb {
  uint32_t producers, consumers;
  uint64_t items; /* per pass */
  bb_made *made;
  bb_eaten *eaten;
};

bench_bb *bench_bb_new(uint32_t producers, uint32_t consumers, uint64_t items) {
  bench_bb *b = calloc(1, sizeof(*b));
  if (b == NULL) return NULL;
  b->producers = producers;
  b->consumers = consumers;
  b->items = items;
  b->made = aligned_alloc(64, sizeof(bb_made) * producers);
  b->eaten = aligned_alloc(64, sizeof(bb_eaten) * consumers);
  if (b->made == NULL || b->eaten == NULL) {
    bench_bb_free(b);
    return NULL;
  }
  for (uint32_t j = 0; j < producers; j++) atomic_init(&b->made[j].n, 0);
  for (uint32_t i = 0; i < consumers; i++) {
    atomic_init(&b->eaten[i].count, 0);
    atomic_init(&b->eaten[i].last_ns, 0);
    b->eaten[i].sum = b->eaten[i].sumsq = 0;
  }
  return b;
}

void bench_bb_free(bench_bb *b) {
  if (b == NULL) return;
  free(b->made);
  free(b->eaten);
  free(b);
}

void bench_bb_share(const bench_bb *b, uint64_t pass, uint32_t producer, uint64_t *first,
                    uint64_t *n) {
  uint64_t each = b->items / b->producers, extra = b->items % b->producers;
  /* The first `extra` producers make one more. */
  *n = each + (producer < extra);
  *first = pass * b->items + producer * each + (producer < extra ? producer : extra) + 1;
}

void bench_bb_produced(bench_bb *b, uint32_t producer) {
  atomic_uint_fast64_t *n = &b->made[producer].n;
  /* relaxed: single writer; the main thread only samples it. */
  atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

void bench_bb_consumed(bench_bb *b, uint32_t consumer, uint64_t value) {
  bb_eaten *e = &b->eaten[consumer];
  e->sum += value;
  e->sumsq += value * value;
  /* relaxed: published by the release store of count below. */
  atomic_store_explicit(&e->last_ns, bb_now_ns(), memory_order_relaxed);
  /* release: single writer; publishes sum, sumsq and last_ns (see bb_eaten). */
  atomic_store_explicit(&e->count, atomic_load_explicit(&e->count, memory_order_relaxed) + 1,
                        memory_order_release);
}

static uint64_t bb_made_total(const bench_bb *b) {
  uint64_t n = 0;
  for (uint32_t j = 0; j < b->producers; j++)
    n += atomic_load_explicit(&b->made[j].n, memory_order_relaxed); /* relaxed: a sample */
  return n;
}

static uint64_t bb_eaten_total(const bench_bb *b) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < b->consumers; i++)
    n += atomic_load_explicit(&b->eaten[i].count, memory_order_acquire); /* see bb_eaten */
  return n;
}

/* Items made and not yet consumed. The made counts are read first: the
 * consumed counts, read later, can only be larger, so a sample never
 * exceeds what was truly alive when the made counts were read. */
static uint64_t bb_alive(const bench_bb *b) {
  uint64_t made = bb_made_total(b);
  uint64_t eaten = bb_eaten_total(b);
  return made > eaten ? made - eaten : 0;
}

static uint64_t bb_last_ns(const bench_bb *b) {
  uint64_t t = 0;
  for (uint32_t i = 0; i < b->consumers; i++) {
    uint64_t ti = atomic_load_explicit(&b->eaten[i].last_ns, memory_order_relaxed);
    t = ti > t ? ti : t; /* relaxed: read after bb_eaten_total's acquire loads */
  }
  return t;
}

static void bb_sleep_ms(uint32_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* How long a pass may run on, unmeasured, past max_ms. */
#define BB_DRAIN_MS 30000

/* Polls every millisecond until `target` items were consumed or `until`
 * (a bb_now_ns instant) passed, sampling the peaks; whether the target was
 * reached. */
static bool bb_poll(const bench_bb *b, const bench_bb_driver *d, uint64_t target, uint64_t until,
                    bench_sample *s, uint64_t *pool_peak) {
  for (;;) {
    bb_sleep_ms(1);
    uint64_t alive = bb_alive(b);
    if (alive > s->peak_outstanding) s->peak_outstanding = alive;
    uint64_t pool = d->pool != NULL ? d->pool(d->ctx) : 0;
    if (pool > *pool_peak) *pool_peak = pool;
    if (bb_eaten_total(b) >= target) return true;
    if (bb_now_ns() >= until) return false;
  }
}

int bench_bb_pass(bench_bb *b, const bench_bb_driver *d, uint64_t pass, uint64_t max_ms,
                  bench_sample *s, uint64_t *pool_peak) {
  memset(s, 0, sizeof(*s));
  *pool_peak = 0;
  int rc = d->prepare(d->ctx, pass);
  if (rc != 0) return rc;
  uint64_t base = pass * b->items, target = base + b->items;
  uint64_t t0 = bb_now_ns(), m0 = malloc_count_read(), f0 = malloc_count_frees();
  rc = d->start(d->ctx);
  if (rc != 0) return rc;
  bool done = bb_poll(b, d, target, t0 + max_ms * 1000000ull, s, pool_peak);
  s->mallocs = malloc_count_read() - m0;
  s->frees = malloc_count_frees() - f0;
  /* Ended: at the last consumption. Capped: now, with what was consumed. */
  uint64_t t1 = done ? bb_last_ns(b) : bb_now_ns();
  s->ops = done ? b->items : bb_eaten_total(b) - base;
  s->seconds = (double)(t1 - t0) / 1e9;
  if (!done && !bb_poll(b, d, target, bb_now_ns() + BB_DRAIN_MS * 1000000ull, s, pool_peak))
    return -ETIMEDOUT;
  return 0;
}

int bench_bb_check(const bench_bb *b, uint64_t passes, const char *who) {
  uint64_t count = 0, sum = 0, sumsq = 0;
  for (uint32_t i = 0; i < b->consumers; i++) {
    /* acquire: see bb_eaten. */
    count += atomic_load_explicit(&b->eaten[i].count, memory_order_acquire);
    sum += b->eaten[i].sum;
    sumsq += b->eaten[i].sumsq;
  }
  uint64_t n = passes * b->items, want_sum = 0, want_sumsq = 0;
  for (uint64_t v = 1; v <= n; v++) {
    want_sum += v;
    want_sumsq += v * v;
  }
  if (count == n && sum == want_sum && sumsq == want_sumsq) return 0;
  fprintf(stderr,
          "%s: items consumed: count %" PRIu64 " (want %" PRIu64 "), sum %" PRIu64
          " (want %" PRIu64 "), sum of squares %" PRIu64 " (want %" PRIu64 ")\n",
          who, count, n, sum, want_sum, sumsq, want_sumsq);
  return -EPROTO;
}

/* ---- peak memory ------------------------------------------------------ */

bool bench_rss_reset(void) {
  /* "5" resets the peak resident set size (proc(5), clear_refs). */
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (f == NULL) return false;
  bool ok = fputs("5", f) >= 0;
  return fclose(f) == 0 && ok;
}

double bench_rss_peak_mib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[128];
  long kib = -1;
  while (f != NULL && kib < 0 && fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmHWM: %ld kB", &kib) != 1) kib = -1;
  if (f != NULL) fclose(f);
  if (kib < 0) {
    struct rusage ru;
    kib = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : 0; /* KiB on Linux */
  }
  return (double)kib / 1024.0;
}
