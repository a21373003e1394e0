/*
 * The simulator's own speed, on its one OS thread:
 *
 *   1. ping-pong: a pinger on simulated worker 0 asks a ponger on worker 1
 *      --rounds times, one ask at a time (one long stack, as in
 *      bench/pingpong.c). One row per strategy (random, pct, none); each rep
 *      is one whole simulation with its own seed (rep i: seed i), so the
 *      median is over seeds. Rate: simulated messages delivered (asks and
 *      replies) per real second; extras: million simulator steps per real
 *      second, fiber switches per message.
 *   2. virtual time: a timer-heavy scenario (timers_10s), whose workers sleep
 *      most of its ten seconds of virtual time: the simulator jumps its clock
 *      over the sleeps. Rate: steps per real second; extras: virtual time
 *      over real time (how many times faster than real time the run went),
 *      clock jumps per run.
 *
 * Real time is the whole sh_scenario_run (system setup and teardown
 * included); so are table 1's mallocs columns, which count every allocation
 * of the run (table 2 does not count them). The --workers, --pairs and
 * --max-ms options of the shared bench plumbing do not apply.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <stackhouse/sim.h>

#include "bench.h"
#include "malloc_count.h"
#include <stackhouse/scenario.h>

/* ---- the ping-pong scenario (hidden: bench only) ---------------------------- */

typedef struct pp_ask {
  sh_msg hdr;
  uint64_t n;
} pp_ask;
typedef struct pp_reply {
  sh_msg hdr;
  uint64_t n;
} pp_reply;
typedef struct pp_go {
  sh_msg hdr;
} pp_go;
static SH_MSG_DEFINE(pp_ask, SH_ASK, 0);
static SH_MSG_DEFINE(pp_reply, SH_REPLY, 0);
static SH_MSG_DEFINE(pp_go, SH_NOTICE, 0);

/* Asks per run (--rounds) and pairs; each pinger makes pp_asks / pp_pairs. */
static uint64_t pp_asks = 200000;
static uint32_t pp_pairs = 1;
static atomic_uint pp_left; /* pingers still asking */

typedef struct pp_pinger {
  sh_actor base;
  sh_scn *s;
  const sh_addr *ponger;
} pp_pinger;

typedef struct pp_locals {
  sh_future *f;
  uint64_t n;
} pp_locals;

enum { PP_ASKED = 1 };

/* The pinger's spawn argument. */
typedef struct pp_arg {
  sh_scn *s;
  const sh_addr *ponger;
} pp_arg;

static int pp_pinger_init(sh_actor *self, void *arg) {
  const pp_arg *a = arg;
  pp_pinger *p = (pp_pinger *)self;
  p->s = a->s;
  p->ponger = a->ponger;
  return 0;
}

/* One stack for the whole run: ask, suspend, check the reply, ask again. */
static sh_yield pp_pinger_go(sh_actor *self, sh_stack *st) {
  pp_pinger *p = (pp_pinger *)self;
  pp_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == PP_ASKED) {
    const pp_reply *r = sh_future_reply(l->f, pp_reply);
    bool right = SH_SCN_CHECK(p->s, r != NULL && r->n == l->n, "ask %llu: wrong reply (error %d)",
                              (unsigned long long)l->n, sh_future_error(l->f));
    if (!right || l->n == pp_asks / pp_pairs) {
      if (right) sh_scn_count_down(p->s, sh_actor_system(self), &pp_left);
      else sh_scn_done(p->s, sh_actor_system(self));
      return sh_return(st, NULL);
    }
  }
  pp_ask *a = sh_msg_new(pp_ask, .n = ++l->n);
  l->f = a != NULL ? sh_ask(st, p->ponger, &a->hdr, SH_FOREVER) : NULL;
  if (!SH_SCN_CHECK(p->s, l->f != NULL, "sh_ask failed")) {
    sh_scn_done(p->s, sh_actor_system(self));
    return sh_return(st, NULL);
  }
  return sh_suspend(st, PP_ASKED);
}

static const sh_actor_class pp_pinger_class = {
    .name = "pinger",
    .size = sizeof(pp_pinger),
    .locals_size = sizeof(pp_locals),
    .init = pp_pinger_init,
    .notice = pp_pinger_go,
};

static sh_yield pp_ponger_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  const pp_ask *a = sh_stack_msg_as(st, pp_ask);
  pp_reply *r = sh_msg_new(pp_reply, .n = a->n);
  return r != NULL ? sh_return(st, &r->hdr) : sh_throw(st, -ENOMEM);
}

static const sh_actor_class pp_ponger_class = {
    .name = "ponger",
    .size = sizeof(sh_actor),
    .ask = pp_ponger_ask,
};

/* Pair i: its pinger on worker i % 2, its ponger on the other. */
static int pp_setup(sh_scn *s, sh_system *sys) {
  atomic_store(&pp_left, pp_pairs);
  int rc = 0;
  for (uint32_t i = 0; i < pp_pairs && rc == 0; i++) {
    pp_arg arg = {s, NULL};
    const sh_addr *pinger;
    rc = sh_spawn_on(sys, &pp_ponger_class, NULL, (i + 1) % 2, &arg.ponger);
    if (rc == 0) rc = sh_spawn_on(sys, &pp_pinger_class, &arg, i % 2, &pinger);
    pp_go *g = rc == 0 ? sh_msg_new(pp_go) : NULL;
    if (rc == 0) rc = g == NULL ? -ENOMEM : sh_notice(pinger, &g->hdr);
  }
  return rc;
}

static void pp_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  uint64_t want = pp_asks / pp_pairs * pp_pairs;
  SH_SCN_CHECK(s, st->asks == want, "%llu asks, want %llu", (unsigned long long)st->asks,
               (unsigned long long)want);
}

static const sh_scenario sim_bench_pingpong = {
    .name = "sim_bench_pingpong",
    .summary = "pairs asking one at a time across two workers (bench/sim_throughput)",
    .workers = 2,
    .flags = SH_SCN_HIDDEN,
    .setup = pp_setup,
    .verify = pp_verify,
};
SH_SCENARIO(sim_bench_pingpong);

/* The timer-heavy scenario of table 2 (scenarios/timers_10s.c). */
#define VTIME_SCENARIO "timers_10s"

/* ---- one rep: one whole simulation ------------------------------------------ */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One row: a scenario under one strategy, a new seed each rep. */
typedef struct sim_case {
  const sh_scenario *sc;
  sh_sim_strategy strategy;
  uint64_t seed; /* the last rep's */
} sim_case;

/* What one simulation did. */
typedef struct sim_figures {
  double seconds; /* real */
  uint64_t mallocs, frees;
  sh_scn_result r;
  sh_sim_report rep;
} sim_figures;

/* Runs c's next seed with no step or virtual-time bound (the scenario is
 * known to end); -EPROTO if it failed. */
static int simulate(sim_case *c, sim_figures *f) {
  sh_sim_options o;
  sh_sim_options_default(&o);
  o.seed = ++c->seed;
  o.strategy = c->strategy;
  o.max_steps = UINT64_MAX;
  sh_sim_configure(&o);
  uint64_t m0 = malloc_count_read(), f0 = malloc_count_frees(), t0 = now_ns();
  sh_scenario_run(c->sc, o.seed, 0, &f->r);
  f->seconds = (double)(now_ns() - t0) / 1e9;
  f->mallocs = malloc_count_read() - m0;
  f->frees = malloc_count_frees() - f0;
  sh_sim_report_get(&f->rep);
  if (f->r.ok) return 0;
  const char *st = sh_sim_strategy_name(c->strategy);
  fprintf(stderr, "%s seed %llu %s: FAIL:%s: %s\n", c->sc->name, (unsigned long long)o.seed, st,
          f->r.kind, f->r.detail);
  /* This file's own scenario is not in shsim. */
  if ((c->sc->flags & SH_SCN_HIDDEN) == 0)
    fprintf(stderr, "  replay: shsim run %s --seed %llu --strategy %s\n", c->sc->name,
            (unsigned long long)o.seed, st);
  return -EPROTO;
}

/* Table 1 (a bench_rep_fn): ops = messages delivered; extra[0]: million
 * steps per second, extra[1]: fiber switches per message. */
static int pingpong_rep(void *ctx, uint32_t actors, bench_sample *s, double extra[BENCH_EXTRAS]) {
  (void)actors;
  sim_figures f;
  int rc = simulate(ctx, &f);
  if (rc != 0) return rc;
  s->seconds = f.seconds;
  s->ops = f.r.stats.delivered;
  s->mallocs = f.mallocs;
  s->frees = f.frees;
  extra[0] = (double)f.rep.steps / f.seconds / 1e6;
  extra[1] = f.r.stats.delivered > 0 ? (double)f.rep.switches / (double)f.r.stats.delivered : 0;
  return 0;
}

/* Table 2 (a bench_rep_fn): ops = steps; extra[0]: virtual time over real
 * time, extra[1]: clock jumps. Mallocs are left out: per step they mean
 * nothing. */
static int vtime_rep(void *ctx, uint32_t actors, bench_sample *s, double extra[BENCH_EXTRAS]) {
  (void)actors;
  sim_figures f;
  int rc = simulate(ctx, &f);
  if (rc != 0) return rc;
  s->seconds = f.seconds;
  s->ops = f.rep.steps;
  extra[0] = (double)f.rep.vtime_ns / 1e9 / f.seconds;
  extra[1] = (double)f.rep.jumps;
  return 0;
}

/* ---- the tables ------------------------------------------------------------------- */

static const sh_sim_strategy strategies[] = {SH_SIM_RANDOM, SH_SIM_PCT, SH_SIM_NONE, SH_SIM_MSGPCT,
                                             SH_SIM_DELAY};

static const bench_workload pingpong_workload = {
    .name = "ping-pong",
    .unit = "asks",
    .actors = "pairs",
    .rounds = 200000,
    .rounds_help = "ping-pong asks per run (default 200000)",
    .quick_rounds = 20000,
    .quick_help = "CI smoke: 20000 asks, 1 run per case",
    .table = {"msgs/s", {"Msteps/s", "sw/msg"}, false},
};

static const bench_workload vtime_workload = {
    .name = "virtual time",
    .unit = "whole run of " VTIME_SCENARIO,
    .actors = "pairs",
    .table = {"steps/s", {"vt:real", "jumps"}, false},
};

static const bench_spec pingpong_spec = {
    &pingpong_workload,
    "sim_throughput",
    "the simulator's speed: simulated messages per real second, virtual:real time",
    "simulated workers",
    "ignored (the ping-pong runs on 2 simulated workers, all on one OS thread)",
    "ignored (rows for 1 and 16 pairs)"};

static const bench_spec vtime_spec = {&vtime_workload, "sim_throughput", NULL,
                                      "simulated workers", NULL, NULL};

static int pingpong_table(const bench_params *p) {
  const sh_scenario *sc = &sim_bench_pingpong;
  bench_params pp = *p;
  pp.workers = sc->workers;
  pp_asks = p->rounds;
  bench_begin(&pp, "stackhouse-sim", ", one OS thread, rep i runs seed i",
              "(real time and mallocs: the whole run, system setup and teardown included)");
  int status = 0;
  /* One pair: every message crosses idle workers. Sixteen: the workers stay
   * busy, as in most scenarios, and the per-message cost shows alone. */
  static const uint32_t pairs[] = {1, 16};
  for (size_t j = 0; j < sizeof(pairs) / sizeof(pairs[0]); j++) {
    pp_pairs = pairs[j];
    for (size_t k = 0; k < sizeof(strategies) / sizeof(strategies[0]); k++) {
      sim_case c = {sc, strategies[k], 0};
      const char *name = sh_sim_strategy_name(strategies[k]);
      char id[32], desc[64];
      if (pp_pairs == 1)
        snprintf(id, sizeof id, "%s", name);
      else
        snprintf(id, sizeof id, "%s-%up", name, pp_pairs);
      snprintf(desc, sizeof desc, "%u pair%s across workers, %s", pp_pairs, pp_pairs == 1 ? "" : "s",
               name);
      status |= bench_run_case(&pp, id, desc, pp_pairs, 1.0, pingpong_rep, &c);
    }
  }
  return status;
}

static int vtime_table(const bench_params *p) {
  const sh_scenario *sc = sh_scenario_find(VTIME_SCENARIO);
  if (sc == NULL) {
    fprintf(stderr, "sim_throughput: no scenario %s\n", VTIME_SCENARIO);
    return 1;
  }
  bench_params vp = *p;
  vp.spec = &vtime_spec;
  vp.workers = sc->workers != 0 ? sc->workers : 2;
  vp.rounds = 1;
  printf("\n");
  bench_begin(&vp, "stackhouse-sim", ", rep i runs seed i",
              "(vt:real = virtual time / real time; mallocs not counted in this table)");
  int status = 0;
  for (size_t k = 0; k < sizeof(strategies) / sizeof(strategies[0]); k++) {
    sim_case c = {sc, strategies[k], 0};
    const char *name = sh_sim_strategy_name(strategies[k]);
    char id[32], desc[64];
    snprintf(id, sizeof id, "vt-%s", name);
    snprintf(desc, sizeof desc, "%s, %s", sc->name, name);
    status |= bench_run_case(&vp, id, desc, 1, 1.0, vtime_rep, &c);
  }
  return status;
}

int main(int argc, char **argv) {
  bench_params p;
  bench_setup(&pingpong_spec, NULL, 0, argc, argv, &p);
  int status = pingpong_table(&p);
  status |= vtime_table(&p);
  return bench_end(status);
}
