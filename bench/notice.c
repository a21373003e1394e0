/*
 * Notices per second into one receiver from N senders spread over the
 * workers, and heap allocations per notice in steady state (must be zero).
 *
 * Flow control. Mailboxes are unbounded, so senders that simply loop would
 * grow the receiver's mailbox (and memory) without limit whenever they
 * outrun it. Here every sender works on credits, one credit = one burst of
 * --burst notices: handling a credit notice sends exactly one burst (so one
 * handler invocation is bounded), and the receiver, after every --burst
 * notices from a given sender, sends that sender a credit back. Each sender
 * starts with --window credits, so at most senders x window x burst notices
 * are ever in flight; the table reports the peak actually sampled. Credits
 * are extra messages (1 per burst) and are counted in mallocs/msg's
 * denominator but not in the notice rate.
 *
 * Placement: the receiver on worker 0, sender i on worker i % K (1-sender
 * case: worker 1 when there are two workers or more, so notices cross
 * workers). The "batch" cases give the receiver a batch_notice handler
 * (up to max_batch notices per stack) instead of one stack per notice.
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

typedef struct data_notice {
  sh_msg hdr;
  uint32_t from; /* the sender's index, for its credits */
} data_notice;
typedef struct credit_notice {
  sh_msg hdr;
} credit_notice;
SH_MSG_DEFINE(data_notice, SH_NOTICE, 0);
SH_MSG_DEFINE(credit_notice, SH_NOTICE, 0);

/* A counter on its own cache line: one writer (an actor), the main thread reads. */
typedef struct line_counter {
  _Alignas(64) atomic_uint_fast64_t n;
} line_counter;

static void own_add(line_counter *c, uint64_t k) {
  /* relaxed: single writer; the main thread only polls it. */
  atomic_store_explicit(&c->n, atomic_load_explicit(&c->n, memory_order_relaxed) + k,
                        memory_order_relaxed);
}

static uint64_t read_counter(line_counter *c) {
  return atomic_load_explicit(&c->n, memory_order_relaxed);
}

/* What the main thread and the actors share for one run of one case. */
typedef struct run {
  uint32_t senders;
  uint32_t workers;
  bool batch; /* the receiver takes batches */
  uint32_t burst;
  uint64_t window; /* credits each sender starts with */
  uint64_t warm;   /* notices received before the measured phase */
  const sh_addr *receiver;
  const sh_addr **sender_addr;
  line_counter *sent; /* per sender */
  line_counter received;
  atomic_uint errors; /* refused sends: the run is void */
  atomic_bool stop;
  sh_system *sys;
  sh_stats stats[2];
} run;

typedef struct sender {
  sh_actor base;
  run *run;
  uint32_t index;
} sender;

typedef struct sender_arg {
  run *run;
  uint32_t index;
} sender_arg;

typedef struct receiver {
  sh_actor base;
  run *run;
  uint32_t *from_count; /* notices from each sender since its last credit */
} receiver;

static void count_error(run *r) {
  /* relaxed: a flag the main thread reads after the run. */
  atomic_fetch_add_explicit(&r->errors, 1, memory_order_relaxed);
}

/* ---- sender ------------------------------------------------------------ */

static int sender_init(sh_actor *self, void *arg) {
  sender *s = (sender *)self;
  const sender_arg *a = arg;
  s->run = a->run;
  s->index = a->index;
  return 0;
}

/* A credit: one burst. */
static sh_yield sender_credit(sh_actor *self, sh_stack *st) {
  sender *s = (sender *)self;
  run *r = s->run;
  if (atomic_load_explicit(&r->stop, memory_order_relaxed)) return sh_return(st, NULL);
  /* Counted before sending, so that sent - received never overstates what
   * is in flight (see in_flight). */
  own_add(&r->sent[s->index], r->burst);
  for (uint32_t i = 0; i < r->burst; i++) {
    data_notice *d = sh_msg_new(data_notice, .from = s->index);
    if (d == NULL || sh_notice(r->receiver, &d->hdr) != 0) {
      count_error(r);
      break;
    }
  }
  return sh_return(st, NULL);
}

static const sh_actor_class sender_class = {
    .name = "sender",
    .size = sizeof(sender),
    .init = sender_init,
    .notice = sender_credit,
};

/* ---- receiver ---------------------------------------------------------- */

static int receiver_init(sh_actor *self, void *arg) {
  receiver *rc = (receiver *)self;
  rc->run = arg;
  rc->from_count = calloc(rc->run->senders, sizeof(uint32_t));
  return rc->from_count == NULL ? -ENOMEM : 0;
}

static void receiver_stop(sh_actor *self) {
  receiver *rc = (receiver *)self;
  free(rc->from_count);
  rc->from_count = NULL;
}

/* Accounts one notice from sender `from`; every burst earns it a credit. */
static void receive_one(receiver *rc, uint32_t from) {
  run *r = rc->run;
  if (++rc->from_count[from] < r->burst) return;
  rc->from_count[from] = 0;
  credit_notice *c = sh_msg_new(credit_notice);
  if (c == NULL || sh_notice(r->sender_addr[from], &c->hdr) != 0) count_error(r);
}

static sh_yield receiver_notice(sh_actor *self, sh_stack *st) {
  receiver *rc = (receiver *)self;
  /* Counted before the credit goes out, so that in_flight never sees the
   * next burst's sends ahead of this receipt. */
  own_add(&rc->run->received, 1);
  receive_one(rc, sh_stack_msg_as(st, data_notice)->from);
  return sh_return(st, NULL);
}

static sh_yield receiver_batch(sh_actor *self, sh_stack *st) {
  receiver *rc = (receiver *)self;
  size_t n = sh_stack_batch_len(st);
  own_add(&rc->run->received, n); /* first, as in receiver_notice */
  for (size_t i = 0; i < n; i++)
    receive_one(rc, ((const data_notice *)(const void *)sh_stack_batch_msg(st, i))->from);
  return sh_return(st, NULL);
}

static bool is_data(sh_actor *self, const sh_msg *m) {
  (void)self;
  return sh_msg_is(m, &data_notice_type);
}

/* The two receivers differ only in the batch handler. */
#define RECEIVER_CLASS \
  .size = sizeof(receiver), .init = receiver_init, .stop = receiver_stop, .notice = receiver_notice

static const sh_actor_class receiver_class = {.name = "receiver", RECEIVER_CLASS};

static const sh_actor_class batch_receiver_class = {
    .name = "batch_receiver",
    RECEIVER_CLASS,
    .batch_notice = receiver_batch,
    .batch_notice_filter = is_data,
};

/* ---- probe ------------------------------------------------------------- */

static uint64_t received(void *ctx) { return read_counter(&((run *)ctx)->received); }

static bool warm(void *ctx) { return received(ctx) >= ((run *)ctx)->warm; }

/* Notices sent and not yet received. The sent counts are read first: a
 * received count read later can only be larger, so the figure is at most
 * what was truly in flight when the sent counts were read (a sample of the
 * peak never exceeds the real peak). */
static uint64_t in_flight(void *ctx) {
  run *r = ctx;
  uint64_t sent = 0;
  for (uint32_t i = 0; i < r->senders; i++) sent += read_counter(&r->sent[i]);
  uint64_t got = received(ctx);
  return sent > got ? sent - got : 0;
}

static void take_stats(void *ctx, int which) {
  run *r = ctx;
  sh_system_stats(r->sys, &r->stats[which]);
}

/* ---- one run ----------------------------------------------------------- */

typedef struct params {
  bench_params b;
  bench_notice_args n;
  uint64_t spin_us; /* UINT64_MAX: the runtime's default */
} params;

/* One case: whether its receiver takes batches. */
typedef struct case_arg {
  const params *pp;
  bool batch;
} case_arg;

static int spawn_all(void *ctx) {
  run *r = ctx;
  int rc =
      sh_spawn_on(r->sys, r->batch ? &batch_receiver_class : &receiver_class, r, 0, &r->receiver);
  for (uint32_t i = 0; rc == 0 && i < r->senders; i++) {
    sender_arg a = {r, i};
    uint32_t w = r->senders == 1 ? 1 % r->workers : i % r->workers;
    rc = sh_spawn_on(r->sys, &sender_class, &a, w, &r->sender_addr[i]);
  }
  /* The initial credits. */
  for (uint32_t i = 0; rc == 0 && i < r->senders; i++) {
    for (uint64_t k = 0; rc == 0 && k < r->window; k++) {
      credit_notice *c = sh_msg_new(credit_notice);
      rc = c == NULL ? -ENOMEM : sh_notice(r->sender_addr[i], &c->hdr);
    }
  }
  return rc;
}

static void free_run(run *r) {
  free(r->sent);
  free(r->sender_addr);
}

/* One repetition of one case on a fresh system (a bench_rep_fn).
 * extra[0]: worker parks per 1000 notices. */
static int run_once(void *ctx, uint32_t senders, bench_sample *s, double extra[BENCH_EXTRAS]) {
  const case_arg *c = ctx;
  const bench_params *bp = &c->pp->b;
  run r;
  memset(&r, 0, sizeof r);
  r.senders = senders;
  r.workers = (uint32_t)bp->workers;
  r.batch = c->batch;
  r.burst = (uint32_t)c->pp->n.burst;
  r.window = c->pp->n.window;
  r.warm = bench_warm_ops(bp, 1, 10000);
  r.sent = aligned_alloc(64, sizeof(line_counter) * senders);
  r.sender_addr = calloc(senders, sizeof(*r.sender_addr));
  if (r.sent == NULL || r.sender_addr == NULL) {
    free_run(&r);
    return -ENOMEM;
  }
  for (uint32_t i = 0; i < senders; i++) atomic_init(&r.sent[i].n, 0);
  atomic_init(&r.received.n, 0);
  atomic_init(&r.errors, 0);
  atomic_init(&r.stop, false);

  bench_probe probe = {&r, received, warm, in_flight, take_stats};
  int rc = sh_bench_phase(bp, c->pp->spin_us, spawn_all, &r, &probe, &r.sys, s);
  if (rc == 0) {
    /* Senders stop at their next credit; shutdown drops what is queued. */
    atomic_store_explicit(&r.stop, true, memory_order_relaxed);
    if (s->warm_timed_out) rc = -ETIMEDOUT;
    if (atomic_load_explicit(&r.errors, memory_order_relaxed) != 0) rc = -EPROTO;
  }
  extra[0] = sh_bench_parks_per_k(r.stats, s);
  sh_bench_system_free(r.sys);
  free_run(&r);
  return rc;
}

static int run_case(const params *pp, const char *id, uint32_t senders, bool batch) {
  case_arg c = {pp, batch};
  char desc[64];
  snprintf(desc, sizeof desc, "%u sender%s -> 1%s", senders, senders == 1 ? "" : "s",
           batch ? ", batch receiver" : "");
  return bench_run_case(&pp->b, id, desc, senders, bench_notice_msgs_per_op(&pp->n), run_once, &c);
}

static const bench_spec spec = {&bench_notice,
                                "notice",
                                "notices per second into one receiver",
                                "workers",
                                "worker threads (default: one per CPU)",
                                "senders in the N-senders cases (default: 2 x workers)"};

int main(int argc, char **argv) {
  params p = {.spin_us = UINT64_MAX};
  bench_opt own[BENCH_NOTICE_NOPTS + 1];
  bench_notice_opts(&p.n, own);
  own[BENCH_NOTICE_NOPTS] = sh_bench_spin_opt(&p.spin_us);
  bench_setup(&spec, own, BENCH_NOTICE_NOPTS + 1, argc, argv, &p.b);
  char detail[64], bound[96];
  bench_notice_detail(&p.n, detail, sizeof detail);
  snprintf(bound, sizeof bound,
           "in-flight bound: senders x window x burst (N senders: %" PRIu64 ")",
           p.b.actors * p.n.window * p.n.burst);
  bench_begin(&p.b, "stackhouse", detail, bound);
  uint32_t n = (uint32_t)p.b.actors;
  int status = 0;
  status |= run_case(&p, "1sender", 1, false);
  status |= run_case(&p, "Nsenders", n, false);
  status |= run_case(&p, "1sender-b", 1, true);
  status |= run_case(&p, "Nsenders-b", n, true);
  return bench_end(status);
}
