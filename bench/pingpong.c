/*
 * Ask/reply round trips per second between pairs of actors, and heap
 * allocations per message in steady state (which must be zero: messages,
 * stacks and promises all come from the workers' pools).
 *
 * A pair is a pinger and a ponger. The pinger runs one long notice stack that
 * asks the ponger, suspends on the future, counts the round trip and asks
 * again, until the main thread raises the stop flag. The ponger answers
 * every ask with a reply. Cases: 1 pair and N pairs, with both actors of a
 * pair on the same worker (sh_spawn_on the same index) or on different
 * workers (pinger on i % K, ponger on (i + 1) % K). Pairs are spread over
 * the workers round-robin.
 *
 * Each case runs --reps times on a fresh system; the table shows the median,
 * min and max rate, mallocs per message (2 messages per round trip) over the
 * measured phase only, worker parks per 1000 round trips (a park is a sleep
 * on the eventfd, tens of microseconds each: a high figure means the workers
 * starve between messages), and fairness: the slowest pair's round trips
 * over the mean pair's in the measured phase (1 = even, 0 = a pair starved).
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stackhouse/stackhouse.h>

#include "bench.h"
#include "malloc_count.h"

typedef struct ping_ask {
  sh_msg hdr;
  uint64_t n;
} ping_ask;
typedef struct pong_reply {
  sh_msg hdr;
  uint64_t n;
} pong_reply;
typedef struct go_notice {
  sh_msg hdr;
} go_notice;
SH_MSG_DEFINE(ping_ask, SH_ASK, 0);
SH_MSG_DEFINE(pong_reply, SH_REPLY, 0);
SH_MSG_DEFINE(go_notice, SH_NOTICE, 0);

/* One pair's progress, on its own cache line: only the pinger's worker
 * writes it, the main thread reads it. */
typedef struct pair_stat {
  _Alignas(64) atomic_uint_fast64_t rounds;
} pair_stat;

/* What the main thread and the actors share for one run of one case. */
typedef struct run {
  uint32_t pairs;
  uint64_t warm_rounds; /* per pair, before the measured phase */
  pair_stat *stat;
  uint64_t *mark[2]; /* each pair's rounds at the start and end of the phase */
  atomic_bool stop;
  atomic_uint finished; /* pingers whose stack returned */
  atomic_uint errors;   /* failed asks: the run is void */
  sh_system *sys;
  sh_stats stats[2]; /* at the start and the end of the measured phase */
} run;

typedef struct pinger {
  sh_actor base;
  run *run;
  pair_stat *stat;
  const sh_addr *ponger;
} pinger;

typedef struct pinger_arg {
  run *run;
  uint32_t index;
  const sh_addr *ponger;
} pinger_arg;

typedef struct pinger_locals {
  sh_future *f;
  uint64_t n;
} pinger_locals;

enum { ASKED = 1 };

static int pinger_init(sh_actor *self, void *arg) {
  pinger *p = (pinger *)self;
  const pinger_arg *a = arg;
  p->run = a->run;
  p->stat = &a->run->stat[a->index];
  p->ponger = a->ponger;
  return 0;
}

/* Ends the pinger's stack; `failed` marks the run void. */
static sh_yield pinger_end(pinger *p, sh_stack *st, bool failed) {
  /* relaxed: counters the main thread polls; nothing is published. */
  if (failed) atomic_fetch_add_explicit(&p->run->errors, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&p->run->finished, 1, memory_order_relaxed);
  return sh_return(st, NULL);
}

static sh_yield pinger_go(sh_actor *self, sh_stack *st) {
  pinger *p = (pinger *)self;
  pinger_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == ASKED) {
    const pong_reply *r = sh_future_reply(l->f, pong_reply);
    if (r == NULL || r->n != l->n) return pinger_end(p, st, true);
    /* relaxed: single writer (this actor), polled by the main thread. */
    uint64_t done = atomic_load_explicit(&p->stat->rounds, memory_order_relaxed);
    atomic_store_explicit(&p->stat->rounds, done + 1, memory_order_relaxed);
  }
  if (atomic_load_explicit(&p->run->stop, memory_order_relaxed)) return pinger_end(p, st, false);
  ping_ask *a = sh_msg_new(ping_ask, .n = ++l->n);
  l->f = a != NULL ? sh_ask(st, p->ponger, &a->hdr, 0) : NULL;
  if (l->f == NULL) return pinger_end(p, st, true);
  return sh_suspend(st, ASKED);
}

static const sh_actor_class pinger_class = {
    .name = "pinger",
    .size = sizeof(pinger),
    .locals_size = sizeof(pinger_locals),
    .init = pinger_init,
    .notice = pinger_go,
};

static sh_yield ponger_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  const ping_ask *a = sh_stack_msg_as(st, ping_ask);
  pong_reply *r = sh_msg_new(pong_reply, .n = a->n);
  return sh_return(st, r != NULL ? &r->hdr : NULL);
}

static const sh_actor_class ponger_class = {
    .name = "ponger",
    .size = sizeof(sh_actor),
    .ask = ponger_ask,
};

/* ---- probe: what bench_measure polls --------------------------------- */

static uint64_t total_rounds(void *ctx) {
  run *r = ctx;
  uint64_t n = 0;
  for (uint32_t i = 0; i < r->pairs; i++)
    n += atomic_load_explicit(&r->stat[i].rounds, memory_order_relaxed);
  return n;
}

/* Every pair did its warm-up rounds, or (should a scheduler starve some
 * pair) twice as many rounds were done in all. */
static bool all_warm(void *ctx) {
  run *r = ctx;
  if (total_rounds(ctx) >= 2 * r->warm_rounds * r->pairs) return true;
  for (uint32_t i = 0; i < r->pairs; i++)
    if (atomic_load_explicit(&r->stat[i].rounds, memory_order_relaxed) < r->warm_rounds)
      return false;
  return true;
}

static void take_stats(void *ctx, int which) {
  run *r = ctx;
  sh_system_stats(r->sys, &r->stats[which]);
  for (uint32_t i = 0; i < r->pairs; i++)
    r->mark[which][i] = atomic_load_explicit(&r->stat[i].rounds, memory_order_relaxed);
}

/* The slowest pair's rounds over the mean pair's, in the measured phase. */
static double fairness(const run *r) {
  uint64_t min = UINT64_MAX, sum = 0;
  for (uint32_t i = 0; i < r->pairs; i++) {
    uint64_t d = r->mark[1][i] - r->mark[0][i];
    min = d < min ? d : min;
    sum += d;
  }
  return sum > 0 ? (double)min * r->pairs / (double)sum : 0;
}

/* ---- one run ----------------------------------------------------------- */

typedef struct params {
  uint64_t workers, pairs, rounds, reps, max_ms;
  uint64_t spin_us; /* UINT64_MAX: the runtime's default */
  const char *only; /* --case: run only this case; NULL: all */
  bool quick, verbose;
} params;

static int spawn_pairs(run *r, uint32_t workers, bool same) {
  for (uint32_t i = 0; i < r->pairs; i++) {
    uint32_t wa = i % workers, wb = same ? wa : (i + 1) % workers;
    const sh_addr *ponger, *pinger_addr;
    int rc = sh_spawn_on(r->sys, &ponger_class, NULL, wb, &ponger);
    pinger_arg arg = {r, i, ponger};
    if (rc == 0) rc = sh_spawn_on(r->sys, &pinger_class, &arg, wa, &pinger_addr);
    go_notice *g = rc == 0 ? sh_msg_new(go_notice) : NULL;
    if (rc == 0) rc = g == NULL ? -ENOMEM : sh_notice(pinger_addr, &g->hdr);
    if (rc != 0) return rc;
  }
  return 0;
}

/* Waits (bounded) until every pinger returned after the stop flag. */
static bool wait_finished(run *r) {
  for (int i = 0; i < 10000; i++) {
    if (atomic_load_explicit(&r->finished, memory_order_relaxed) == r->pairs) return true;
    bench_sleep_ms(1);
  }
  return false;
}

static void free_run(run *r) {
  free(r->stat);
  free(r->mark[0]);
  free(r->mark[1]);
}

/* One repetition of one case on a fresh system; 0 or a negative errno.
 * extra[0]: parks per 1000 round trips, extra[1]: fairness. */
static int run_once(const params *pp, uint32_t pairs, bool same, bench_sample *s,
                    double extra[BENCH_EXTRAS]) {
  run r;
  memset(&r, 0, sizeof r);
  r.pairs = pairs;
  uint64_t warm = pp->rounds / 10 / pairs;
  r.warm_rounds = warm < 1000 ? 1000 : warm;
  r.stat = aligned_alloc(64, sizeof(pair_stat) * pairs);
  r.mark[0] = calloc(pairs, sizeof(uint64_t));
  r.mark[1] = calloc(pairs, sizeof(uint64_t));
  if (r.stat == NULL || r.mark[0] == NULL || r.mark[1] == NULL) {
    free_run(&r);
    return -ENOMEM;
  }
  for (uint32_t i = 0; i < pairs; i++) atomic_init(&r.stat[i].rounds, 0);
  atomic_init(&r.stop, false);
  atomic_init(&r.finished, 0);
  atomic_init(&r.errors, 0);

  sh_config cfg;
  sh_config_default(&cfg);
  cfg.workers = (uint32_t)pp->workers;
  if (pp->spin_us != UINT64_MAX) cfg.spin_ns = pp->spin_us * 1000;
  int rc = sh_system_new(&cfg, &r.sys);
  if (rc == 0) rc = spawn_pairs(&r, cfg.workers, same);
  if (rc == 0) rc = sh_system_start(r.sys);
  if (rc == 0) {
    bench_probe probe = {&r, total_rounds, all_warm, NULL, take_stats};
    bench_measure(&probe, pp->rounds, pp->max_ms, 30000, s);
    atomic_store_explicit(&r.stop, true, memory_order_relaxed);
    if (!wait_finished(&r)) rc = -ETIMEDOUT;
    if (atomic_load_explicit(&r.errors, memory_order_relaxed) != 0) rc = -EPROTO;
    if (s->warm_timed_out) rc = -ETIMEDOUT;
  }
  uint64_t parks = r.stats[1].parks - r.stats[0].parks;
  extra[0] = s->ops > 0 ? 1000.0 * (double)parks / (double)s->ops : 0;
  extra[1] = fairness(&r);
  if (r.sys != NULL) {
    sh_system_shutdown(r.sys);
    sh_system_free(r.sys);
  }
  free_run(&r);
  return rc;
}

static const bench_table table = {"rt/s", {"parks/krt", "fairness"}, false};

static int run_case(const params *pp, const char *id, uint32_t pairs, bool same) {
  if (!bench_selected(pp->only, id)) return 0;
  bench_case c;
  memset(&c, 0, sizeof c);
  int status = 0;
  for (uint64_t i = 0; i < pp->reps; i++) {
    bench_sample s;
    double extra[BENCH_EXTRAS];
    int rc = run_once(pp, pairs, same, &s, extra);
    if (rc != 0) {
      fprintf(stderr, "pingpong %s: run %" PRIu64 " failed: %s\n", id, i, strerror(-rc));
      status = 1;
      continue;
    }
    bench_case_add(&c, &s, 2.0, extra);
  }
  char desc[64];
  snprintf(desc, sizeof desc, "%u pair%s, %s", pairs, pairs == 1 ? "" : "s",
           same ? "same worker" : "across workers");
  bench_table_row(&table, id, desc, &c);
  if (pp->verbose) bench_case_print_reps(&c);
  bench_note_mallocs(id, &c);
  return status;
}

int main(int argc, char **argv) {
  params p = {0, 0, 1000000, 5, 10000, UINT64_MAX, NULL, false, false};
  const bench_opt opts[] = {
      {"workers", "worker threads (default: one per CPU)", &p.workers, NULL, NULL},
      {"pairs", "pairs in the N-pairs cases (default: 2 x workers)", &p.pairs, NULL, NULL},
      {"rounds", "round trips measured per run, all pairs (default 1000000)", &p.rounds, NULL,
       NULL},
      {"reps", "runs per case; the median is shown (default 5)", &p.reps, NULL, NULL},
      {"max-ms", "cap on a measured phase in ms (default 10000)", &p.max_ms, NULL, NULL},
      {"spin-us", "sh_config.spin_ns in us (default: the runtime's, 50)", &p.spin_us, NULL, NULL},
      {"case", "run only the case with this id (a table row id)", NULL, NULL, &p.only},
      {"verbose", "also print every rep's rate", NULL, &p.verbose, NULL},
      {"quick", "CI smoke: 20000 round trips, 1 run per case", NULL, &p.quick, NULL},
  };
  bench_parse(argc, argv, "ask/reply round trips per second", opts, sizeof opts / sizeof opts[0]);
  if (p.quick) {
    p.rounds = 20000;
    p.reps = 1;
  }
  if (p.workers == 0) p.workers = bench_cpus();
  if (p.pairs == 0) p.pairs = 2 * p.workers;
  if (p.reps == 0 || p.reps > BENCH_MAX_REPS || p.rounds == 0 || p.workers > 1024 ||
      p.pairs > 100000) {
    fprintf(stderr, "pingpong: options out of range\n");
    return 2;
  }

  printf("stackhouse pingpong: %" PRIu64 " workers on %u CPUs, %" PRIu64
         " round trips measured per run, median of %" PRIu64 "\n",
         p.workers, bench_cpus(), p.rounds, p.reps);
  bench_print_load("start");
  bench_check_malloc_count();
  bench_table_header(&table);

  int status = 0;
  status |= run_case(&p, "1pair-same", 1, true);
  status |= run_case(&p, "1pair-cross", 1, false);
  status |= run_case(&p, "Npairs-same", (uint32_t)p.pairs, true);
  status |= run_case(&p, "Npairs-cross", (uint32_t)p.pairs, false);
  bench_print_load("end");
  return status;
}
