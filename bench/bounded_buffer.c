/*
 * Producers and consumers through a bounded buffer: Savina's "Producer-
 * Consumer with Bounded Buffer" (ProdCons) in the Kilim style, where the
 * buffer is a bounded mailbox. Items per second, peak memory (resident set,
 * the pools' objects, items alive) and heap allocations per item.
 *
 * Savina's workload: P producers (40) each make their share of the items
 * (1000 each), doing a little work per item; C consumers (40) each do a
 * little work per item consumed; between them a buffer of B items (50).
 * Savina's manager keeps the buffer as a list and the idle producers and
 * consumers as two more, and flows by protocol: it tells a producer to make
 * its next item only while the buffer has room, and a consumer asks for its
 * next item when it is done with one (4 messages per item).
 *
 * Here the bound is the runtime's, not a protocol's:
 *
 *   producer j -- sh_put --> [ manager's notice mailbox, capacity B ]
 *                              manager -- sh_notice_try / sh_put --> consumer i
 *                                          [ its notice mailbox, capacity 1 ]
 *
 *   - A producer handles one start notice per pass in one stack: make an
 *     item (--prod-cost), sh_put it to the manager, suspend until the item
 *     is admitted, repeat until its share is done. A full buffer suspends
 *     the producer (its stack; no thread blocks); producers get room in
 *     FIFO order, as Savina's manager resumes its idle producers in order.
 *   - The manager's notice mailbox IS the buffer: items wait there, at most
 *     B of them (notice_capacity = B). The manager takes an item only to
 *     hand it to a consumer: it offers a copy to the consumers in turn with
 *     sh_notice_try, starting after the last one served, and the first with
 *     room takes it (Savina's "an available consumer"); when every consumer
 *     already has one waiting, it sh_puts it to the next in turn and
 *     suspends until that consumer takes its waiting item. The item type is
 *     SH_MSG_BARRIER: an actor otherwise takes more messages while a stack
 *     is suspended, which would move items from the bounded mailbox into
 *     suspended stacks without limit; a barrier takes nothing else until
 *     the item is handed over, so the mailbox stays the buffer.
 *   - A consumer (notice_capacity 1) consumes an item (--cons-cost) and
 *     records it. The slot frees when the consumer takes the item, so a
 *     consumer holds at most one item it works on and one waiting.
 *
 * Hence memory is bounded whatever the speeds: items alive (made and not
 * yet consumed) <= B in the buffer + 1 in the manager's hand + P (each
 * producer's one being made or waiting in its put) + 2 C (each consumer's),
 * 171 for the savina case; every message, stack and future comes from the
 * workers' pools, which after a warm-up pass only rarely reach a new high
 * water mark (a few mallocs per run, whatever its length).
 *
 * A run (one rep) is a fresh system: a warm-up pass, then the measured
 * pass of --rounds items, each started by a notice per producer from the
 * main thread (made by malloc beforehand, freed by the workers: the frees
 * of the table's NOTE lines). The measured time runs from the first start
 * notice to the last consumption (the consumers' clock, so not the main
 * thread's polling period). After the run: every item of both passes was consumed exactly
 * once (count, sum and sum of squares of the item values), the manager's
 * mailbox never held more than B (sh_mailbox_stats_get's high water), nor
 * a consumer's more than 1, and after shutdown the pools got every object
 * back and every future was resolved. The table's columns: mallocs/msg is
 * mallocs per item here; RSS MiB the process's peak resident set during
 * the run (VmHWM, reset at the start of each run); pool peak the most
 * pooled objects out at once (messages, stacks, futures, waiters); peak out
 * the most items alive. Cases: "savina" (--producers, --consumers) and
 * "Npairs" (N producers and N consumers, N = --pairs), both with --buffer.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stackhouse/stackhouse.h>

#include "bench.h"
#include "sh_bench.h"
#include "workloads.h"

/* An item on its way to the manager: a barrier (file comment). */
typedef struct item_notice {
  sh_msg hdr;
  uint64_t value;
} item_notice;
/* The item handed to a consumer. */
typedef struct feed_notice {
  sh_msg hdr;
  uint64_t value;
} feed_notice;
/* A producer's share of a pass: values first .. first + n - 1. */
typedef struct start_notice {
  sh_msg hdr;
  uint64_t first, n;
} start_notice;
SH_MSG_DEFINE(item_notice, SH_NOTICE, SH_MSG_BARRIER);
SH_MSG_DEFINE(feed_notice, SH_NOTICE, 0);
SH_MSG_DEFINE(start_notice, SH_NOTICE, 0);

typedef struct params {
  bench_params b;
  bench_bb_args bb;
  uint64_t spin_us; /* UINT64_MAX: the runtime's default */
} params;

/* What the main thread and the actors share for one run of one case. */
typedef struct run {
  const params *pp;
  uint32_t producers, consumers, workers;
  bench_bb *bb;
  sh_system *sys;
  sh_actor_class manager_class; /* its notice_capacity is --buffer */
  const sh_addr *manager;
  const sh_addr **producer;
  const sh_addr **consumer;
  start_notice **start; /* the next pass's start notices, made, not yet sent */
  atomic_uint errors;   /* failed sends: the run is void */
} run;

/* Every actor of the bench: its run and its index among its kind. */
typedef struct member {
  sh_actor base;
  run *run;
  uint32_t index;
  uint32_t next; /* the manager: the consumer whose turn is next */
  double acc;    /* producers and consumers: the work's result, kept */
} member;

typedef struct member_arg {
  run *run;
  uint32_t index;
} member_arg;

enum { WAITED = 1 }; /* the state after a put: its future is done */

static int member_init(sh_actor *self, void *arg) {
  member *m = (member *)self;
  const member_arg *a = arg;
  m->run = a->run;
  m->index = a->index;
  return 0;
}

/* Ends a stack whose send failed (f: its future, NULL when sh_put itself
 * failed); the notice a failed put hands back is freed. */
static sh_yield give_up(run *r, sh_stack *st, sh_future *f) {
  /* relaxed: a counter the main thread reads after the run. */
  atomic_fetch_add_explicit(&r->errors, 1, memory_order_relaxed);
  if (f != NULL) sh_msg_free(sh_future_take(f));
  return sh_return(st, NULL);
}

/* ---- producer ---------------------------------------------------------- */

typedef struct producer_locals {
  uint64_t next, end; /* the values still to make: next .. end - 1 */
  sh_future *put;
} producer_locals;

/* A start notice: makes and puts the producer's share, one item at a time. */
static sh_yield producer_start(sh_actor *self, sh_stack *st) {
  member *p = (member *)self;
  run *r = p->run;
  producer_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    const start_notice *s = sh_stack_msg_as(st, start_notice);
    l->next = s->first;
    l->end = s->first + s->n;
  } else if (sh_future_failed(l->put)) {
    return give_up(r, st, l->put);
  }
  if (l->next == l->end) return sh_return(st, NULL);
  uint64_t v = l->next++;
  p->acc = bench_bb_work(p->acc, v, r->pp->bb.prod_cost);
  item_notice *it = sh_msg_new(item_notice, .value = v);
  bench_bb_produced(r->bb, p->index);
  /* A NULL item makes sh_put return NULL. */
  l->put = sh_put(st, r->manager, it != NULL ? &it->hdr : NULL, SH_FOREVER);
  if (l->put == NULL) return give_up(r, st, NULL);
  /* Resumes at once when there was room (up to the house's quota). */
  return sh_suspend(st, WAITED);
}

static const sh_actor_class producer_class = {
    .name = "producer",
    .size = sizeof(member),
    .locals_size = sizeof(producer_locals),
    .init = member_init,
    .notice = producer_start,
};

/* ---- manager ----------------------------------------------------------- */

/* Offers f to the consumers in turn from m->next; true when one took it. */
static bool offer(member *m, feed_notice *f) {
  run *r = m->run;
  for (uint32_t k = 0; k < r->consumers; k++) {
    uint32_t i = (m->next + k) % r->consumers;
    int rc = sh_notice_try(r->consumer[i], &f->hdr);
    if (rc == 0) {
      m->next = (i + 1) % r->consumers;
      return true;
    }
    if (rc != -EAGAIN) return false; /* not -EAGAIN: the caller gives up */
  }
  return false;
}

/* An item taken from the buffer: hands a copy to a consumer. */
static sh_yield manager_item(sh_actor *self, sh_stack *st) {
  member *m = (member *)self;
  run *r = m->run;
  sh_future **put = sh_stack_locals(st);
  if (sh_stack_state(st) == WAITED)
    return sh_future_failed(*put) ? give_up(r, st, *put) : sh_return(st, NULL);
  feed_notice *f = sh_msg_new(feed_notice, .value = sh_stack_msg_as(st, item_notice)->value);
  if (f == NULL) return give_up(r, st, NULL);
  if (offer(m, f)) return sh_return(st, NULL);
  /* Every consumer has one waiting (or a send failed, and the put says
   * why): wait for the one whose turn it is. */
  *put = sh_put(st, r->consumer[m->next], &f->hdr, SH_FOREVER);
  m->next = (m->next + 1) % r->consumers;
  if (*put == NULL) return give_up(r, st, NULL);
  return sh_suspend(st, WAITED);
}

/* ---- consumer ---------------------------------------------------------- */

static sh_yield consumer_feed(sh_actor *self, sh_stack *st) {
  member *c = (member *)self;
  run *r = c->run;
  uint64_t v = sh_stack_msg_as(st, feed_notice)->value;
  c->acc = bench_bb_work(c->acc, v, r->pp->bb.cons_cost);
  bench_bb_consumed(r->bb, c->index, v);
  return sh_return(st, NULL);
}

static const sh_actor_class consumer_class = {
    .name = "consumer",
    .size = sizeof(member),
    .init = member_init,
    .notice = consumer_feed,
    .notice_capacity = 1,
};

/* ---- the driver of a pass (bench_bb_driver) ---------------------------- */

static void free_starts(run *r) {
  for (uint32_t j = 0; j < r->producers; j++) {
    sh_msg_free(r->start[j] != NULL ? &r->start[j]->hdr : NULL);
    r->start[j] = NULL;
  }
}

/* Made on the main thread, so from malloc: before the measured window. */
static int prepare_pass(void *ctx, uint64_t pass) {
  run *r = ctx;
  for (uint32_t j = 0; j < r->producers; j++) {
    uint64_t first, n;
    bench_bb_share(r->bb, pass, j, &first, &n);
    r->start[j] = sh_msg_new(start_notice, .first = first, .n = n);
    if (r->start[j] == NULL) {
      free_starts(r);
      return -ENOMEM;
    }
  }
  return 0;
}

static int start_pass(void *ctx) {
  run *r = ctx;
  int rc = 0;
  for (uint32_t j = 0; j < r->producers; j++) {
    start_notice *s = r->start[j];
    r->start[j] = NULL;
    /* sh_notice frees s when it fails; after a failure the rest are freed
     * unsent. */
    if (rc == 0)
      rc = sh_notice(r->producer[j], &s->hdr);
    else
      sh_msg_free(&s->hdr);
  }
  return rc;
}

/* Sampled while the workers run, the figure is inexact (sh_system_stats):
 * counters read one after another can even wrap below zero, and such a
 * sample is ignored (half the range: far beyond any real count). */
static uint64_t pool_outstanding(void *ctx) {
  run *r = ctx;
  sh_stats st;
  sh_system_stats(r->sys, &st);
  return st.pool_outstanding < UINT64_MAX / 2 ? st.pool_outstanding : 0;
}

/* ---- one run ----------------------------------------------------------- */

/* One case: its shape, and what its runs' checks found. */
typedef struct case_arg {
  const params *pp;
  uint32_t producers, consumers;
  uint32_t checked;          /* runs that passed every check */
  uint32_t manager_hw;       /* the manager mailbox's greatest high water */
  uint32_t consumer_hw;      /* a consumer mailbox's greatest high water */
  uint64_t producers_waited; /* puts to the manager that waited for room, all runs */
  uint64_t manager_waited;   /* the manager's puts to consumers that waited, all runs */
} case_arg;

static int spawn_one(run *r, const sh_actor_class *c, uint32_t index, uint32_t worker,
                     const sh_addr **out) {
  member_arg a = {r, index};
  return sh_spawn_on(r->sys, c, &a, worker % r->workers, out);
}

/* The manager on worker 0; producers and consumers spread over the workers. */
static int spawn_all(run *r) {
  int rc = spawn_one(r, &r->manager_class, 0, 0, &r->manager);
  for (uint32_t i = 0; rc == 0 && i < r->consumers; i++)
    rc = spawn_one(r, &consumer_class, i, i, &r->consumer[i]);
  for (uint32_t j = 0; rc == 0 && j < r->producers; j++)
    rc = spawn_one(r, &producer_class, j, j + 1, &r->producer[j]);
  return rc;
}

static int notice_stats(const sh_addr *a, sh_mailbox_stats *out) {
  return sh_mailbox_stats_get(a, 0, SH_NOTICE, out);
}

/* The bounds the mailboxes kept over the run, into c; -EPROTO when broken. */
static int check_mailboxes(const run *r, case_arg *c, uint32_t buffer) {
  sh_mailbox_stats ms;
  int rc = notice_stats(r->manager, &ms);
  if (rc != 0) return rc;
  uint32_t mhw = ms.high_water;
  c->manager_hw = mhw > c->manager_hw ? mhw : c->manager_hw;
  c->producers_waited += ms.suspended;
  uint32_t chw = 0;
  for (uint32_t i = 0; rc == 0 && i < r->consumers; i++) {
    rc = notice_stats(r->consumer[i], &ms);
    chw = ms.high_water > chw ? ms.high_water : chw;
    c->manager_waited += ms.suspended;
  }
  c->consumer_hw = chw > c->consumer_hw ? chw : c->consumer_hw;
  if (rc == 0 && (mhw > buffer || chw > 1)) {
    fprintf(stderr, "bounded_buffer: mailbox high water %u (bound %u), consumers' %u (bound 1)\n",
            mhw, buffer, chw);
    rc = -EPROTO;
  }
  return rc;
}

/* Shuts sys down; -EPROTO when the pools miss objects or a future was left
 * unresolved. */
static int shutdown_checked(sh_system *sys) {
  if (sys == NULL) return 0;
  sh_system_shutdown(sys);
  sh_stats st;
  sh_system_stats(sys, &st);
  sh_system_free(sys);
  if (st.pool_outstanding == 0 && st.asks == st.asks_resolved) return 0;
  fprintf(stderr,
          "bounded_buffer: after shutdown: %" PRIu64 " pooled objects out, %" PRIu64
          " futures, %" PRIu64 " resolved\n",
          st.pool_outstanding, st.asks, st.asks_resolved);
  return -EPROTO;
}

static void free_run(run *r) {
  if (r->start != NULL) free_starts(r);
  free(r->start);
  free(r->producer);
  free(r->consumer);
  bench_bb_free(r->bb);
}

static int init_run(run *r, case_arg *c) {
  const params *pp = c->pp;
  memset(r, 0, sizeof(*r));
  r->pp = pp;
  r->producers = c->producers;
  r->consumers = c->consumers;
  r->workers = (uint32_t)pp->b.workers;
  r->manager_class = (sh_actor_class){
      .name = "manager",
      .size = sizeof(member),
      .locals_size = sizeof(sh_future *),
      .init = member_init,
      .notice = manager_item,
      .notice_capacity = (uint32_t)pp->bb.buffer,
  };
  atomic_init(&r->errors, 0);
  r->bb = bench_bb_new(r->producers, r->consumers, pp->b.rounds);
  r->producer = calloc(r->producers, sizeof(*r->producer));
  r->consumer = calloc(r->consumers, sizeof(*r->consumer));
  r->start = calloc(r->producers, sizeof(*r->start));
  return r->bb && r->producer && r->consumer && r->start ? 0 : -ENOMEM;
}

/* The warm-up pass, then the measured one into s; 0 or a negative errno. */
static int passes(run *r, bench_sample *s, uint64_t *pool_peak) {
  bench_bb_driver d = {r, prepare_pass, start_pass, pool_outstanding};
  bench_sample warm;
  int rc = bench_bb_pass(r->bb, &d, 0, r->pp->b.max_ms, &warm, pool_peak);
  if (rc == 0) rc = bench_bb_pass(r->bb, &d, 1, r->pp->b.max_ms, s, pool_peak);
  return rc;
}

/* One repetition of one case on a fresh system (a bench_rep_fn).
 * extra[0]: peak RSS in MiB, extra[1]: the pools' peak objects out. */
static int run_once(void *ctx, uint32_t actors, bench_sample *s, double extra[BENCH_EXTRAS]) {
  (void)actors;
  case_arg *c = ctx;
  run r;
  bench_rss_reset();
  int rc = init_run(&r, c);
  if (rc == 0) rc = sh_bench_system_new(&c->pp->b, c->pp->spin_us, &r.sys);
  if (rc == 0) rc = spawn_all(&r);
  if (rc == 0) rc = sh_system_start(r.sys);
  uint64_t pool_peak = 0;
  if (rc == 0) rc = passes(&r, s, &pool_peak);
  /* relaxed: the actors are idle now, every item consumed. */
  if (rc == 0 && atomic_load_explicit(&r.errors, memory_order_relaxed) != 0) rc = -EPROTO;
  if (rc == 0) rc = bench_bb_check(r.bb, 2, "bounded_buffer");
  if (rc == 0) rc = check_mailboxes(&r, c, (uint32_t)c->pp->bb.buffer);
  extra[0] = bench_rss_peak_mib();
  extra[1] = (double)pool_peak;
  int down = shutdown_checked(r.sys);
  if (rc == 0) rc = down;
  if (rc == 0) c->checked++;
  free_run(&r);
  return rc;
}

static int run_case(const params *pp, const char *id, uint32_t producers, uint32_t consumers) {
  case_arg c = {.pp = pp, .producers = producers, .consumers = consumers};
  char desc[64];
  snprintf(desc, sizeof desc, "%u producers, %u consumers", producers, consumers);
  int status = bench_run_case(&pp->b, id, desc, producers, 1.0, run_once, &c);
  if (!(pp->b.only == NULL || strcmp(pp->b.only, id) == 0)) return status;
  printf("  check %s: %u/%" PRIu64 " runs: %" PRIu64
         " items each consumed exactly once; high water: buffer %u (capacity %" PRIu64
         "), consumers %u (capacity 1); puts that waited: producers %" PRIu64 ", manager %" PRIu64
         "\n",
         id, c.checked, pp->b.reps, 2 * pp->b.rounds, c.manager_hw, pp->bb.buffer,
         c.consumer_hw, c.producers_waited, c.manager_waited);
  return status;
}

static const bench_spec spec = {&bench_bounded_buffer,
                                "bounded_buffer",
                                "producers and consumers through a bounded buffer (ProdCons)",
                                "workers",
                                "worker threads (default: one per CPU)",
                                "producers = consumers in the Npairs case (default: 2 x workers)"};

int main(int argc, char **argv) {
  params p = {.spin_us = UINT64_MAX};
  bench_opt own[BENCH_BB_NOPTS + 1];
  bench_bb_opts(&p.bb, own);
  own[BENCH_BB_NOPTS] = sh_bench_spin_opt(&p.spin_us);
  bench_setup(&spec, own, BENCH_BB_NOPTS + 1, argc, argv, &p.b);
  char detail[64], note[320];
  bench_bb_detail(&p.bb, detail, sizeof detail);
  snprintf(note, sizeof note,
           "mallocs/msg: per item; the frees of a NOTE are the start notices (malloc, main\n"
           "thread); RSS MiB: peak resident set of a run; pool peak: pooled objects out;\n"
           "peak out: items alive, bound buffer + 1 + P + 2 C (savina: %" PRIu64 ")",
           p.bb.buffer + 1 + p.bb.producers + 2 * p.bb.consumers);
  bench_begin(&p.b, "stackhouse", detail, note);
  int status = 0;
  status |= run_case(&p, "savina", (uint32_t)p.bb.producers, (uint32_t)p.bb.consumers);
  status |= run_case(&p, "Npairs", (uint32_t)p.b.actors, (uint32_t)p.b.actors);
  return bench_end(status);
}
