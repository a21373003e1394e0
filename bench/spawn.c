/*
 * The cost of an actor's life: spawning, stopping and reclaiming actors,
 * and the memory an idle one takes.
 *
 *   - spawn+ask+stop (the table): --lanes lanes (default 64) spread over
 *     the workers; each lane is one long notice stack that spawns a child
 *     (on its own worker), asks it, stops it once the reply came, and
 *     starts again, until the main thread raises the stop flag. One cycle
 *     is one operation; mallocs/msg counts the ask and the reply. Measured
 *     like the other benches (bench.h): --rounds / 5 cycles per run.
 *   - spawn-and-stop loop: one actor spawns and at once stops --rounds
 *     children (default 10M; --quick 200k), --chunk of them per run of its
 *     handler. The stopped children are reclaimed and their houses reused,
 *     so memory must stay flat: the actor itself reads the resident set
 *     (current, from /proc/self/statm, and the peak, ru_maxrss) at a tenth,
 *     half and all of the loop; the rate and mallocs per cycle are over the
 *     whole loop.
 *   - idle actors: --idle actors (default 100k) of a class with no state of
 *     its own spawned from the main thread into a started system; the
 *     resident set's growth over the count, minus the class's size, is what
 *     the runtime keeps per idle actor.
 *
 * Resident figures are the whole process's and the machine may be shared:
 * read them as orders of magnitude.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <stackhouse/stackhouse.h>

#include "bench.h"
#include "malloc_count.h"
#include "sh_bench.h"

#define MILESTONES 3

typedef struct go_notice { sh_msg hdr; } go_notice;
typedef struct hello_ask { sh_msg hdr; } hello_ask;
typedef struct hello_reply { sh_msg hdr; } hello_reply;
SH_MSG_DEFINE(go_notice, SH_NOTICE, 0);
SH_MSG_DEFINE(hello_ask, SH_ASK, 0);
SH_MSG_DEFINE(hello_reply, SH_REPLY, 0);

/* ---- memory figures ---------------------------------------------------- */

/* The resident set now, in bytes; read without allocating (the actor that
 * reads it must not move the malloc counter). */
static uint64_t rss_now(void) {
  char buf[128];
  int fd = open("/proc/self/statm", O_RDONLY);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  unsigned long long size = 0, resident = 0;
  if (sscanf(buf, "%llu %llu", &size, &resident) != 2) return 0;
  return resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* The peak resident set, in bytes. */
static uint64_t rss_peak(void) {
  struct rusage ru;
  return getrusage(RUSAGE_SELF, &ru) == 0 ? (uint64_t)ru.ru_maxrss * 1024 : 0;
}

static double mib(uint64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int send_go(const sh_addr *to) {
  go_notice *g = sh_msg_new(go_notice);
  return g == NULL ? -ENOMEM : sh_notice(to, &g->hdr);
}

/* ---- the children ------------------------------------------------------ */

static sh_yield child_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  hello_reply *r = sh_msg_new(hello_reply);
  return sh_return(st, r != NULL ? &r->hdr : NULL);
}

/* No state of its own: what it costs is the runtime's. */
static const sh_actor_class child_class = {
    .name = "child",
    .size = sizeof(sh_actor),
    .ask = child_ask,
};

/* ---- spawn+ask+stop lanes ---------------------------------------------- */

typedef struct lane_stat {
  _Alignas(64) atomic_uint_fast64_t cycles;
} lane_stat;

typedef struct lanes_run {
  uint32_t lanes, workers;
  uint64_t warm;
  lane_stat *stat;
  atomic_bool stop;
  atomic_uint finished, errors;
  sh_system *sys;
  sh_stats stats[2];
} lanes_run;

typedef struct lane {
  sh_actor base;
  lanes_run *run;
  lane_stat *stat;
} lane;
typedef struct lane_arg {
  lanes_run *run;
  uint32_t index;
} lane_arg;
typedef struct lane_locals {
  sh_future *f;
  const sh_addr *child;
} lane_locals;

static int lane_init(sh_actor *self, void *arg) {
  const lane_arg *a = arg;
  ((lane *)self)->run = a->run;
  ((lane *)self)->stat = &a->run->stat[a->index];
  return 0;
}

static sh_yield lane_end(lane *l, sh_stack *st, bool failed) {
  /* relaxed: counters the main thread polls; nothing is published. */
  if (failed) atomic_fetch_add_explicit(&l->run->errors, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&l->run->finished, 1, memory_order_relaxed);
  return sh_return(st, NULL);
}

/* The states alternate (1, 2) so that each cycle's future is freed with
 * the state that made it. */
static sh_yield lane_go(sh_actor *self, sh_stack *st) {
  lane *ln = (lane *)self;
  lane_locals *l = sh_stack_locals(st);
  int state = sh_stack_state(st);
  if (state != SH_START) {
    if (sh_future_failed(l->f) || sh_stop(l->child) != 0) return lane_end(ln, st, true);
    /* relaxed: single writer, polled by the main thread. */
    uint64_t done = atomic_load_explicit(&ln->stat->cycles, memory_order_relaxed);
    atomic_store_explicit(&ln->stat->cycles, done + 1, memory_order_relaxed);
  }
  if (atomic_load_explicit(&ln->run->stop, memory_order_relaxed)) return lane_end(ln, st, false);
  hello_ask *a = NULL;
  if (sh_spawn(sh_actor_system(self), &child_class, NULL, 1, &l->child) == 0)
    a = sh_msg_new(hello_ask);
  l->f = a != NULL ? sh_ask(st, l->child, &a->hdr, SH_FOREVER) : NULL;
  if (l->f == NULL) return lane_end(ln, st, true);
  return sh_suspend(st, state == 1 ? 2 : 1);
}

static const sh_actor_class lane_class = {
    .name = "lane",
    .size = sizeof(lane),
    .locals_size = sizeof(lane_locals),
    .init = lane_init,
    .notice = lane_go,
};

static uint64_t lane_cycles(void *ctx, uint32_t i) {
  return atomic_load_explicit(&((lanes_run *)ctx)->stat[i].cycles, memory_order_relaxed);
}
static uint64_t total_cycles(void *ctx) {
  return bench_count_sum(lane_cycles, ctx, ((lanes_run *)ctx)->lanes);
}
static bool lanes_warm(void *ctx) {
  lanes_run *r = ctx;
  return bench_count_warm(lane_cycles, ctx, r->lanes, r->warm);
}
static void lanes_stats(void *ctx, int which) {
  lanes_run *r = ctx;
  sh_system_stats(r->sys, &r->stats[which]);
}
static bool lanes_finished(void *ctx) {
  lanes_run *r = ctx;
  return atomic_load_explicit(&r->finished, memory_order_relaxed) == r->lanes;
}

static int spawn_lanes(void *ctx) {
  lanes_run *r = ctx;
  for (uint32_t i = 0; i < r->lanes; i++) {
    lane_arg a = {r, i};
    const sh_addr *addr;
    int rc = sh_spawn_on(r->sys, &lane_class, &a, i % r->workers, &addr);
    if (rc == 0) rc = send_go(addr);
    if (rc != 0) return rc;
  }
  return 0;
}

typedef struct params {
  bench_params b;
  uint64_t spin_us, lanes, chunk, idle;
} params;

/* One repetition (a bench_rep_fn); extra[0]: parks per 1000 cycles. */
static int lanes_once(void *ctx, uint32_t lanes, bench_sample *s, double extra[BENCH_EXTRAS]) {
  const params *pp = ctx;
  lanes_run r;
  memset(&r, 0, sizeof r);
  r.lanes = lanes;
  r.workers = (uint32_t)pp->b.workers;
  r.warm = bench_warm_ops(&pp->b, lanes, 100);
  r.stat = aligned_alloc(64, sizeof(lane_stat) * lanes);
  if (r.stat == NULL) return -ENOMEM;
  for (uint32_t i = 0; i < lanes; i++) atomic_init(&r.stat[i].cycles, 0);
  bench_probe probe = {&r, total_cycles, lanes_warm, NULL, lanes_stats};
  int rc = sh_bench_phase(&pp->b, pp->spin_us, spawn_lanes, &r, &probe, &r.sys, s);
  if (rc == 0) {
    atomic_store_explicit(&r.stop, true, memory_order_relaxed);
    if (!bench_wait(lanes_finished, &r, 10000)) rc = -ETIMEDOUT;
    if (atomic_load_explicit(&r.errors, memory_order_relaxed) != 0) rc = -EPROTO;
    if (s->warm_timed_out) rc = -ETIMEDOUT;
  }
  extra[0] = sh_bench_parks_per_k(r.stats, s);
  sh_bench_system_free(r.sys);
  free(r.stat);
  return rc;
}

/* ---- the spawn-and-stop loop ------------------------------------------- */

typedef struct loop_run {
  uint64_t n, chunk, done;
  uint64_t at[MILESTONES], rss[MILESTONES], peak[MILESTONES];
  int milestone;
  atomic_bool over;
  atomic_uint errors;
  sh_system *sys;
} loop_run;

typedef struct spawner { sh_actor base; loop_run *run; } spawner;

static int spawner_init(sh_actor *self, void *arg) {
  ((spawner *)self)->run = arg;
  return 0;
}

/* A chunk of spawns and stops, the memory at a milestone, then the next
 * chunk in a run of its own (the children's houses are reclaimed between). */
static sh_yield spawner_go(sh_actor *self, sh_stack *st) {
  loop_run *r = ((spawner *)self)->run;
  for (uint64_t i = 0; i < r->chunk && r->done < r->n; i++, r->done++) {
    const sh_addr *c;
    if (sh_spawn(sh_actor_system(self), &child_class, NULL, 1, &c) != 0 || sh_stop(c) != 0) {
      atomic_fetch_add(&r->errors, 1);
      r->done = r->n;
    }
  }
  if (r->milestone < MILESTONES && r->done >= r->at[r->milestone]) {
    r->rss[r->milestone] = rss_now();
    r->peak[r->milestone++] = rss_peak();
  }
  if (r->done < r->n && send_go(sh_self(self)) == 0) return sh_return(st, NULL);
  atomic_store(&r->over, true);
  return sh_return(st, NULL);
}

static const sh_actor_class spawner_class = {
    .name = "spawner",
    .size = sizeof(spawner),
    .init = spawner_init,
    .notice = spawner_go,
};

static bool loop_over(void *ctx) { return atomic_load(&((loop_run *)ctx)->over); }

static int loop_case(const params *pp) {
  loop_run r = {.n = pp->b.rounds, .chunk = pp->chunk};
  r.at[0] = r.n / 10;
  r.at[1] = r.n / 2;
  r.at[2] = r.n;
  const sh_addr *a;
  int rc = sh_bench_system_new(&pp->b, pp->spin_us, &r.sys);
  if (rc == 0) rc = sh_spawn_on(r.sys, &spawner_class, &r, 0, &a);
  if (rc == 0) rc = sh_system_start(r.sys);
  uint64_t rss0 = rss_now(), m0 = malloc_count_read();
  double t0 = now_s();
  if (rc == 0) rc = send_go(a);
  /* At 1M cycles/s or better, 10M take seconds: an hour means it hangs. */
  if (rc == 0 && !bench_wait(loop_over, &r, 3600 * 1000)) rc = -ETIMEDOUT;
  double secs = now_s() - t0;
  uint64_t mallocs = malloc_count_read() - m0;
  if (rc == 0 && atomic_load(&r.errors) != 0) rc = -EPROTO;
  sh_bench_system_free(r.sys);
  if (rc != 0) {
    fprintf(stderr, "spawn loop: failed: %s\n", strerror(-rc));
    return 1;
  }
  printf("spawn-and-stop loop: %" PRIu64 " cycles in one actor, %.0f cycles/s, "
         "%.3f mallocs/cycle; RSS before %.1f MiB\n",
         r.n, (double)r.n / secs, (double)mallocs / (double)r.n, mib(rss0));
  for (int i = 0; i < r.milestone; i++)
    printf("  at %10" PRIu64 " cycles: RSS %.1f MiB, peak (ru_maxrss) %.1f MiB\n", r.at[i],
           mib(r.rss[i]), mib(r.peak[i]));
  return 0;
}

/* ---- idle actors ------------------------------------------------------- */

static int idle_case(const params *pp) {
  sh_system *sys = NULL;
  int rc = sh_bench_system_new(&pp->b, pp->spin_us, &sys);
  if (rc == 0) rc = sh_system_start(sys);
  uint64_t rss0 = rss_now(), m0 = malloc_count_read();
  for (uint64_t i = 0; rc == 0 && i < pp->idle; i++) {
    const sh_addr *a;
    rc = sh_spawn(sys, &child_class, NULL, 1, &a);
  }
  uint64_t grew = rss_now() - rss0, mallocs = malloc_count_read() - m0;
  sh_bench_system_free(sys);
  if (rc != 0) {
    fprintf(stderr, "idle actors: failed: %s\n", strerror(-rc));
    return 1;
  }
  double per = (double)grew / (double)pp->idle;
  printf("idle actors: %" PRIu64 " spawned, RSS +%.1f MiB: %.0f bytes each, %.0f of them "
         "the runtime's (class size %zu); %.3f mallocs/spawn\n",
         pp->idle, mib(grew), per, per - (double)child_class.size, child_class.size,
         (double)mallocs / (double)pp->idle);
  return 0;
}

/* ---- main -------------------------------------------------------------- */

static const bench_workload spawn_workload = {
    .name = "spawn",
    .unit = "cycles",
    .actors = "lanes",
    .rounds = 10000000,
    .rounds_help = "cycles of the spawn-and-stop loop (default 10000000); a fifth of them "
                   "measured per run of the lanes",
    .quick_rounds = 200000,
    .quick_help = "CI smoke: 200000 cycles, 1 run",
    .table = {"cycles/s", {"parks/kc", NULL}, false},
};

static const bench_spec spec = {&spawn_workload,
                                "spawn",
                                "actors spawned, asked, stopped and reclaimed per second",
                                "workers",
                                "worker threads (default: one per CPU)",
                                "unused: see --lanes"};

int main(int argc, char **argv) {
  params p = {.spin_us = UINT64_MAX, .lanes = 64, .chunk = 16, .idle = 100000};
  const bench_opt own[] = {
      sh_bench_spin_opt(&p.spin_us),
      {"lanes", "spawn+ask+stop lanes (default 64)", &p.lanes, NULL, NULL, 1, 1u << 16},
      {"chunk", "spawns per run of the loop's actor (default 16)", &p.chunk, NULL, NULL, 1,
       1u << 20},
      {"idle", "idle actors spawned (default 100000)", &p.idle, NULL, NULL, 1, 1u << 26},
  };
  bench_setup(&spec, own, sizeof own / sizeof own[0], argc, argv, &p.b);
  params lanes = p;
  lanes.b.rounds = p.b.rounds / 5 > 0 ? p.b.rounds / 5 : 1;
  bench_begin(&lanes.b, "stackhouse", ", spawn + ask + stop", NULL);
  char desc[64];
  snprintf(desc, sizeof desc, "%" PRIu64 " lanes, spawn+ask+stop", p.lanes);
  int status = bench_run_case(&lanes.b, "lanes", desc, (uint32_t)p.lanes, 2.0, lanes_once, &lanes);
  status |= loop_case(&p);
  status |= idle_case(&p);
  return bench_end(status);
}
