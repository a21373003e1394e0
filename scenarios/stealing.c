/*
 * stealing: extreme imbalance (work stealing: an idle worker robs one whose
 * backlog passes the floor; the actor goes back to its owner).
 *
 * ACTORS actors, more than the steal floor, all on worker 0; the other
 * workers have nothing of their own. Setup sends each actor WORK notices;
 * each burns a little CPU, passes a relay notice to the next actor in a
 * ring, and every fourth one also asks the next actor and waits for the
 * answer (so stacks suspend on one worker and may resume on another).
 *
 * Whether a steal happens depends on the schedule (an idle worker has to
 * look while the backlog is there), so the scenario does not require one;
 * it checks what must hold with or without:
 *   - every work notice and relay handled exactly once, every ask answered;
 *   - from one sender to one actor, notices start in the order sent;
 *   - an actor never runs on two workers at once: each handler entry sets
 *     a per-actor flag that must have been clear;
 *   - with one worker there is nobody to steal: steals == 0.
 * Every IO_EVERY-th actor is an IO actor: bound to its worker, it is never
 * stolen (the runtime asserts that an IO actor runs only on its owner).
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/scenario.h>

#define ACTORS 48 /* above the default steal floor (32) */
#define WORK 8
#define ASK_EVERY 4
#define BURN 2000 /* xorshift steps per work notice: a few microseconds */
#define PER_RUN 2 /* sh_config.max_per_run */
#define IO_EVERY 6 /* 8 of the 48: the state actors stay above the floor */

enum { K_WORK = 1, K_RELAY = 2 };

typedef struct st_note {
  sh_msg hdr;
  uint32_t kind, seq;
} st_note;
static SH_MSG_DEFINE(st_note, SH_NOTICE, 0);

/* Asks and replies: sh_scn_num_ask, sh_scn_num. */

typedef struct world {
  const sh_addr *ring[ACTORS];
  /* Read by verify after the join: relaxed increments. */
  atomic_uint work_done, relays_done, asks_done;
  atomic_uint left; /* work stacks and relays still to finish; 0 ends the run */
} world;

typedef struct worker_actor {
  sh_scn_actor a; /* a.id: its place in the ring */
  /* Set while one of its handlers runs. seq_cst exchanges: a detector of
   * two runners at once; either entry sees the other's flag. */
  atomic_bool running;
  uint32_t next_work, next_relay; /* the seq the next one must have */
  uint32_t relays_sent;
  uint64_t sink; /* burn's result, so the loop is kept */
} worker_actor;

typedef struct work_locals {
  sh_future *f;
  uint64_t v;
} work_locals;

enum { W_ANSWERED = 1 };

static void count(atomic_uint *c) { atomic_fetch_add_explicit(c, 1, memory_order_relaxed); }

static int worker_init(sh_actor *self, void *arg) {
  sh_scn_actor_init(self, arg);
  atomic_init(&((worker_actor *)self)->running, false);
  return 0;
}

static void enter(worker_actor *w) {
  bool was = atomic_exchange_explicit(&w->running, true, memory_order_seq_cst);
  SH_SCN_CHECK(w->a.s, !was, "actor %u: a handler entered while another ran", w->a.id);
}

static void leave(worker_actor *w) {
  atomic_store_explicit(&w->running, false, memory_order_seq_cst);
}

static uint64_t burn(uint64_t x) {
  for (int i = 0; i < BURN; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  return x;
}

static const sh_addr *next_of(worker_actor *w) {
  return ((world *)sh_scn_state(w->a.s))->ring[(w->a.id + 1) % ACTORS];
}

/* The seq of each sender's notices to this actor must follow on. */
static void in_order(worker_actor *w, uint32_t *next, uint32_t seq, const char *what) {
  SH_SCN_CHECK(w->a.s, seq == *next, "actor %u: %s %u started when %u was due", w->a.id, what, seq,
               *next);
  *next = seq + 1;
}

/* A work notice's first entry; true when its stack waits for an answer. */
static bool work_start(worker_actor *w, sh_stack *st, uint32_t seq) {
  in_order(w, &w->next_work, seq, "work");
  w->sink ^= burn(w->sink + seq + 1);
  st_note *n = sh_msg_new(st_note, .kind = K_RELAY, .seq = w->relays_sent++);
  SH_SCN_CHECK(w->a.s, n != NULL && sh_notice(next_of(w), &n->hdr) == 0, "actor %u: relay failed",
               w->a.id);
  if (seq % ASK_EVERY != ASK_EVERY - 1) return false;
  work_locals *l = sh_stack_locals(st);
  l->v = ((uint64_t)w->a.id << 32) | seq;
  l->f = sh_scn_ask_num(st, next_of(w), l->v, SH_FOREVER);
  return SH_SCN_CHECK(w->a.s, l->f != NULL, "actor %u: ask failed", w->a.id);
}

static sh_yield worker_notice(sh_actor *self, sh_stack *st) {
  worker_actor *w = (worker_actor *)self;
  world *wd = sh_scn_state(w->a.s);
  const st_note *n = sh_stack_msg_as(st, st_note);
  enter(w);
  if (n->kind == K_RELAY) {
    in_order(w, &w->next_relay, n->seq, "relay");
    count(&wd->relays_done);
  } else if (sh_stack_state(st) == SH_START) {
    if (work_start(w, st, n->seq)) {
      leave(w);
      return sh_suspend(st, W_ANSWERED);
    }
    count(&wd->work_done);
  } else {
    work_locals *l = sh_stack_locals(st);
    uint64_t v = 0;
    SH_SCN_CHECK(w->a.s, sh_scn_num_of(l->f, &v) && v == l->v + 1,
                 "actor %u: work %u answered wrong", w->a.id, n->seq);
    count(&wd->work_done);
  }
  leave(w);
  sh_scn_count_down(w->a.s, sh_actor_system(self), &wd->left);
  return sh_return(st, NULL);
}

static sh_yield worker_ask(sh_actor *self, sh_stack *st) {
  worker_actor *w = (worker_actor *)self;
  world *wd = sh_scn_state(w->a.s);
  enter(w);
  sh_msg *r = sh_scn_num_new(sh_stack_msg_as(st, sh_scn_num_ask)->v + 1);
  count(&wd->asks_done);
  leave(w);
  return r != NULL ? sh_return(st, r) : sh_throw(st, -ENOMEM);
}

static const sh_actor_class worker_class = {
    .name = "steal_worker",
    .size = sizeof(worker_actor),
    .locals_size = sizeof(work_locals),
    .init = worker_init,
    .notice = worker_notice,
    .ask = worker_ask,
};

static const sh_actor_class io_worker_class = {
    .name = "steal_io_worker",
    .kind = SH_IO_ACTOR,
    .size = sizeof(worker_actor),
    .locals_size = sizeof(work_locals),
    .init = worker_init,
    .notice = worker_notice,
    .ask = worker_ask,
};

/* A small per-run budget requeues each actor often: with a thief around, a
 * house changes hands many times, stacks suspended included. */
static void configure(sh_scn *s, sh_config *cfg) {
  (void)s;
  cfg->max_per_run = PER_RUN;
}

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  atomic_store(&wd->left, 2 * ACTORS * WORK);
  for (uint32_t i = 0; i < ACTORS; i++) {
    const sh_actor_class *c = i % IO_EVERY == IO_EVERY - 1 ? &io_worker_class : &worker_class;
    int rc = sh_scn_spawn_on(s, sys, c, i, 0, &wd->ring[i]);
    if (rc != 0) return rc;
  }
  /* Round by round over the actors: their queues fill together. */
  for (uint32_t k = 0; k < WORK; k++)
    for (uint32_t i = 0; i < ACTORS; i++) {
      st_note *n = sh_msg_new(st_note, .kind = K_WORK, .seq = k);
      int rc = n != NULL ? sh_notice(wd->ring[i], &n->hdr) : -ENOMEM;
      if (rc != 0) return rc;
    }
  return 0;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  world *wd = sh_scn_state(s);
  uint32_t work = ACTORS * WORK, asks = ACTORS * (WORK / ASK_EVERY);
  SH_SCN_CHECK(s, atomic_load(&wd->work_done) == work && atomic_load(&wd->relays_done) == work,
               "%u work and %u relays done, want %u each", atomic_load(&wd->work_done),
               atomic_load(&wd->relays_done), work);
  SH_SCN_CHECK(s, atomic_load(&wd->asks_done) == asks && st->asks == asks,
               "%u asks answered, %llu made, want %u", atomic_load(&wd->asks_done),
               (unsigned long long)st->asks, asks);
  SH_SCN_CHECK_EQ(s, st->delivered, 2ull * work + 2ull * asks, "delivered");
  SH_SCN_CHECK(s, sh_scn_workers(s) > 1 || st->steals == 0, "%llu steals with one worker",
               (unsigned long long)st->steals);
  SH_SCN_CHECK(s, st->steals <= st->runs, "%llu steals in %llu runs",
               (unsigned long long)st->steals, (unsigned long long)st->runs);
}

static const sh_scenario stealing = {
    .name = "stealing",
    .summary = "all actors on worker 0: exactly once, in order, one runner at a time",
    .workers = 2,
    .state_size = sizeof(world),
    .configure = configure,
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(stealing);
