/*
 * A counter and its clients, and the scenario that tests them on the
 * simulator.
 *
 * The protocol: a client asks the counter to add n (incr_ask) and the
 * counter replies with its new total (total_reply). Every client runs
 * ROUNDS rounds, one ask each, on its own worker; the counter lives on
 * one worker and answers them all.
 *
 * The counter stores each new total (here: nowhere), and a store can fail:
 * the fault point "app/counter/store" (libfiu, compiled in with
 * -DFIU_ENABLE) makes it fail with -EIO, and `shsim ... --faults
 * 'app/counter/store:0.05'` decides it from the seed. A failed store adds
 * nothing and the ask fails with -EIO; the client takes its n back.
 *
 * The invariants: each client sees the totals it gets grow (the counter
 * never goes back), and at the end the counter's total is what the
 * clients added, every ask answered once.
 */
#include <errno.h>
#include <fiu-local.h>
#include <stdatomic.h>

#include <stackhouse/scenario.h>

#define ROUNDS 50

typedef struct incr_ask { sh_msg hdr; uint32_t n; } incr_ask;
typedef struct total_reply { sh_msg hdr; uint64_t total; } total_reply;
SH_MSG_DEFINE(incr_ask, SH_ASK, 0);
SH_MSG_DEFINE(total_reply, SH_REPLY, 0);

/* The run's state (sh_scn_state): what the actors report for verify. */
typedef struct world {
  const sh_addr *counter;
  atomic_uint clients_left;
  atomic_uint_fast64_t added;       /* sum of the n the clients asked to add */
  atomic_uint_fast64_t final_total; /* the counter's total after its last ask */
  atomic_uint refused;              /* asks the store's fault failed (-EIO) */
  uint32_t nclients;
} world;

/* ---- the counter -------------------------------------------------------- */

typedef struct counter {
  sh_scn_actor a;
  uint64_t total;
} counter;

/* Where a real counter would write its total down. */
static int store(uint64_t total) {
  fiu_return_on("app/counter/store", -EIO);
  (void)total;
  return 0;
}

static sh_yield counter_ask(sh_actor *self, sh_stack *st) {
  counter *c = (counter *)self;
  uint64_t next = c->total + sh_stack_msg_as(st, incr_ask)->n;
  int rc = store(next);
  if (rc != 0) return sh_throw(st, rc);
  c->total = next;
  world *wd = sh_scn_state(sh_scn_of(self));
  atomic_store_explicit(&wd->final_total, c->total, memory_order_relaxed);
  total_reply *r = sh_msg_new(total_reply, .total = c->total);
  return sh_return(st, r != NULL ? &r->hdr : NULL);
}

static const sh_actor_class counter_class = {
    .name = "counter",
    .size = sizeof(counter),
    .init = sh_scn_actor_init,
    .ask = counter_ask,
};

/* ---- a client ----------------------------------------------------------- */

typedef struct client {
  sh_scn_actor a;
  uint32_t round;
  uint64_t last_total;
} client;

typedef struct client_locals {
  sh_future *f;
  uint32_t n;
} client_locals;

/* One round per start notice: ask the counter to add 1..3, check the total. */
static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  client *c = (client *)self;
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  client_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    uint32_t n = 1 + (uint32_t)(sh_scn_rand(s) % 3);
    l->n = n;
    atomic_fetch_add_explicit(&wd->added, n, memory_order_relaxed);
    incr_ask *m = sh_msg_new(incr_ask, .n = n);
    l->f = m != NULL ? sh_ask(st, wd->counter, &m->hdr, SH_FOREVER) : NULL;
    /* A client that cannot ask is done: the run ends, and fails. */
    if (!SH_SCN_CHECK(s, l->f != NULL, "sh_ask failed"))
      return sh_scn_round_end(st, false, &wd->clients_left);
    return sh_suspend(st, 1);
  }
  if (sh_future_error(l->f) == -EIO) {
    /* The store failed: nothing was added. */
    atomic_fetch_sub_explicit(&wd->added, l->n, memory_order_relaxed);
    atomic_fetch_add_explicit(&wd->refused, 1, memory_order_relaxed);
  } else if (SH_SCN_CHECK(s, !sh_future_failed(l->f), "ask failed (error %d)",
                          sh_future_error(l->f))) {
    uint64_t total = sh_future_reply(l->f, total_reply)->total;
    SH_SCN_CHECK(s, total > c->last_total, "client %u: total %llu after %llu", sh_scn_id(self),
                 (unsigned long long)total, (unsigned long long)c->last_total);
    c->last_total = total;
  }
  return sh_scn_round_end(st, ++c->round < ROUNDS, &wd->clients_left);
}

static const sh_actor_class client_class = {
    .name = "client",
    .size = sizeof(client),
    .locals_size = sizeof(client_locals),
    .init = sh_scn_actor_init,
    .notice = client_notice,
};

/* ---- the scenario ------------------------------------------------------- */

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  wd->nclients = sh_scn_workers(s);
  atomic_store(&wd->clients_left, wd->nclients);
  int rc = sh_scn_spawn(s, sys, &counter_class, 0, 1, &wd->counter);
  if (rc != 0) return rc;
  return sh_scn_spawn_each(s, sys, &client_class, wd->nclients,
                           SH_SCN_EACH_PINNED | SH_SCN_EACH_KICK, NULL);
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  world *wd = sh_scn_state(s);
  SH_SCN_CHECK_EQ(s, atomic_load(&wd->final_total), atomic_load(&wd->added), "counted");
  SH_SCN_CHECK_EQ(s, st->asks, wd->nclients * ROUNDS, "asks");
  if (!sh_scn_faulty(s)) SH_SCN_CHECK_EQ(s, atomic_load(&wd->refused), 0, "stores failed");
}

static const sh_scenario counter_scenario = {
    .name = "counter",
    .summary = "clients on every worker ask one counter to add; totals only grow",
    .workers = 3,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(counter_scenario);
