/*
 * Ask/reply round trips per second between pairs of actors, and heap
 * allocations per message in steady state (which must be zero: messages,
 * stacks and futures all come from the workers' pools).
 *
 * A pair is a pinger and a ponger. The pinger runs one long notice stack that
 * asks the ponger, suspends on the future, counts the round trip and asks
 * again, until the main thread raises the stop flag. The ponger answers
 * every ask with a reply. Cases: 1 pair and N pairs, spawned the way a user
 * would (sh_spawn from the main thread: default placement), or pinned with
 * both actors of a pair on the same worker (sh_spawn_on the same index) or
 * on different workers (pinger on i % K, ponger on (i + 1) % K). Pinned
 * pairs are spread over the workers round-robin. --burn N runs N
 * CPU-burning threads beside the workers, as on a busy machine.
 *
 * Each case runs --reps times on a fresh system; the table shows the median,
 * min and max rate, mallocs per message (2 messages per round trip) over the
 * measured phase only, worker parks per 1000 round trips (a park is a sleep
 * on the eventfd, tens of microseconds each: a high figure means the workers
 * starve between messages), and fairness: the slowest pair's round trips
 * over the mean pair's in the measured phase (1 = even, 0 = a pair starved).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stackhouse/stackhouse.h>

#include "bench.h"
#include "sh_bench.h"
#include "workloads.h"

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
  uint32_t workers;
  int where;            /* placement of a pair's actors */
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
  l->f = a != NULL ? sh_ask(st, p->ponger, &a->hdr, SH_FOREVER) : NULL;
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

/* Pair i's round trips so far (a bench_count_fn). */
static uint64_t pair_rounds(void *ctx, uint32_t i) {
  return atomic_load_explicit(&((run *)ctx)->stat[i].rounds, memory_order_relaxed);
}

static uint64_t total_rounds(void *ctx) {
  return bench_count_sum(pair_rounds, ctx, ((run *)ctx)->pairs);
}

static bool all_warm(void *ctx) {
  run *r = ctx;
  return bench_count_warm(pair_rounds, ctx, r->pairs, r->warm_rounds);
}

static void take_stats(void *ctx, int which) {
  run *r = ctx;
  sh_system_stats(r->sys, &r->stats[which]);
  bench_count_mark(pair_rounds, ctx, r->pairs, r->mark[which]);
}

/* Every pinger returned after the stop flag. */
static bool all_finished(void *ctx) {
  run *r = ctx;
  return atomic_load_explicit(&r->finished, memory_order_relaxed) == r->pairs;
}

/* ---- one run ----------------------------------------------------------- */

typedef struct params {
  bench_params b;
  uint64_t spin_us; /* UINT64_MAX: the runtime's default */
} params;

/* One case: the placement of its pairs. */
typedef enum placement { PLACE_SAME, PLACE_CROSS, PLACE_DEFAULT } placement;

typedef struct case_arg {
  const params *pp;
  placement where;
} case_arg;

/* One actor of a pair: pinned to worker w, or where sh_spawn puts it. */
static int spawn_at(const run *r, const sh_actor_class *c, void *arg, uint32_t w,
                    const sh_addr **out) {
  if (r->where == PLACE_DEFAULT) return sh_spawn(r->sys, c, arg, 1, out);
  return sh_spawn_on(r->sys, c, arg, w, out);
}

static int spawn_pairs(void *ctx) {
  run *r = ctx;
  for (uint32_t i = 0; i < r->pairs; i++) {
    uint32_t wa = i % r->workers, wb = r->where == PLACE_SAME ? wa : (i + 1) % r->workers;
    const sh_addr *ponger, *pinger_addr;
    int rc = spawn_at(r, &ponger_class, NULL, wb, &ponger);
    pinger_arg arg = {r, i, ponger};
    if (rc == 0) rc = spawn_at(r, &pinger_class, &arg, wa, &pinger_addr);
    go_notice *g = rc == 0 ? sh_msg_new(go_notice) : NULL;
    if (rc == 0) rc = g == NULL ? -ENOMEM : sh_notice(pinger_addr, &g->hdr);
    if (rc != 0) return rc;
  }
  return 0;
}

static void free_run(run *r) {
  free(r->stat);
  free(r->mark[0]);
  free(r->mark[1]);
}

/* One repetition of one case on a fresh system (a bench_rep_fn).
 * extra[0]: parks per 1000 round trips, extra[1]: fairness. */
static int run_once(void *ctx, uint32_t pairs, bench_sample *s, double extra[BENCH_EXTRAS]) {
  const case_arg *c = ctx;
  const bench_params *bp = &c->pp->b;
  run r;
  memset(&r, 0, sizeof r);
  r.pairs = pairs;
  r.workers = (uint32_t)bp->workers;
  r.where = c->where;
  r.warm_rounds = bench_warm_ops(bp, pairs, 1000);
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

  bench_probe probe = {&r, total_rounds, all_warm, NULL, take_stats};
  int rc = sh_bench_phase(bp, c->pp->spin_us, spawn_pairs, &r, &probe, &r.sys, s);
  if (rc == 0) {
    atomic_store_explicit(&r.stop, true, memory_order_relaxed);
    if (!bench_wait(all_finished, &r, 10000)) rc = -ETIMEDOUT;
    if (atomic_load_explicit(&r.errors, memory_order_relaxed) != 0) rc = -EPROTO;
    if (s->warm_timed_out) rc = -ETIMEDOUT;
  }
  extra[0] = sh_bench_parks_per_k(r.stats, s);
  extra[1] = bench_fairness(r.mark[0], r.mark[1], r.pairs);
  sh_bench_system_free(r.sys);
  free_run(&r);
  return rc;
}

static int run_case(const params *pp, const char *id, uint32_t pairs, placement where) {
  static const char *const how[] = {"same worker", "across workers", "default placement"};
  case_arg c = {pp, where};
  char desc[64];
  snprintf(desc, sizeof desc, "%u pair%s, %s", pairs, pairs == 1 ? "" : "s", how[where]);
  return bench_run_case(&pp->b, id, desc, pairs, 2.0, run_once, &c);
}

static const bench_spec spec = {&bench_pingpong,
                                "pingpong",
                                "ask/reply round trips per second",
                                "workers",
                                "worker threads (default: one per CPU)",
                                "pairs in the N-pairs cases (default: 2 x workers)"};

int main(int argc, char **argv) {
  params p = {.spin_us = UINT64_MAX};
  const bench_opt own[] = {sh_bench_spin_opt(&p.spin_us)};
  bench_setup(&spec, own, sizeof own / sizeof own[0], argc, argv, &p.b);
  bench_begin(&p.b, "stackhouse", NULL, NULL);
  uint32_t n = (uint32_t)p.b.actors;
  int status = 0;
  status |= run_case(&p, "1pair", 1, PLACE_DEFAULT);
  status |= run_case(&p, "1pair-same", 1, PLACE_SAME);
  status |= run_case(&p, "1pair-cross", 1, PLACE_CROSS);
  status |= run_case(&p, "Npairs", n, PLACE_DEFAULT);
  status |= run_case(&p, "Npairs-same", n, PLACE_SAME);
  status |= run_case(&p, "Npairs-cross", n, PLACE_CROSS);
  return bench_end(status);
}
