/*
 * fanout: one stack asks many servers at once (a stack keeps its
 * uncompleted futures and resumes when its state allows).
 *
 * A client on every worker runs ROUNDS rounds; in each, one stack:
 *   1. asks all SERVERS servers (spread over the workers) and waits with
 *      sh_suspend: it must resume exactly once, with every future done and
 *      every reply right;
 *   2. asks them all again and waits with sh_suspend_any in one state: it
 *      must resume once per completion, each resume seeing exactly one more
 *      completed future, and the ones seen before still valid.
 * Some asks are relayed by a server to the next one (up to MAX_HOPS), so the
 * replies come back out of order and from stacks that suspended themselves.
 * A reply's value tells which ask it answers and how many servers it passed.
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/scenario.h>

#define SERVERS 8
#define ROUNDS 16
#define MAX_HOPS 2

typedef struct fan_ask {
  sh_msg hdr;
  uint64_t v;
  uint32_t hops; /* relays still to make before the answer */
} fan_ask;
static SH_MSG_DEFINE(fan_ask, SH_ASK, 0);

/* What an ask of value v that is relayed `hops` times must come back with. */
static uint64_t answer_of(uint64_t v, uint32_t hops) { return 2 * v + 1 + hops; }

typedef struct world {
  const sh_addr *servers[SERVERS];
  uint32_t nclients;
  /* Counters, read by verify after the workers are joined: relaxed
   * increments (the join orders them). */
  atomic_uint relays;      /* asks a server made to the next one */
  atomic_uint all_rounds;  /* sh_suspend fan-outs completed */
  atomic_uint any_rounds;  /* sh_suspend_any fan-outs completed */
  atomic_uint any_resumes; /* resumes of sh_suspend_any stacks */
  atomic_uint clients_left;
} world;

static void count(atomic_uint *c) { atomic_fetch_add_explicit(c, 1, memory_order_relaxed); }

/* ---- servers ------------------------------------------------------------------ */

typedef struct server_locals {
  sh_future *f;
} server_locals;

enum { SRV_RELAYED = 1 };

/* Answers at once, or passes the ask on to the next server and answers
 * with one more than what comes back. */
static sh_yield server_ask(sh_actor *self, sh_stack *st) {
  world *wd = sh_scn_state(sh_scn_of(self));
  server_locals *l = sh_stack_locals(st);
  const fan_ask *q = sh_stack_msg_as(st, fan_ask);
  if (sh_stack_state(st) == SRV_RELAYED) {
    if (sh_future_failed(l->f)) return sh_throw(st, sh_future_error(l->f));
    return sh_scn_answer(st, sh_future_reply(l->f, sh_scn_num)->v + 1);
  }
  if (q->hops == 0) return sh_scn_answer(st, answer_of(q->v, 0));
  fan_ask *next = sh_msg_new(fan_ask, .v = q->v, .hops = q->hops - 1);
  if (next == NULL) return sh_throw(st, -ENOMEM);
  l->f = sh_ask(st, wd->servers[(sh_scn_id(self) + 1) % SERVERS], &next->hdr, SH_FOREVER);
  if (l->f == NULL) return sh_throw(st, -ENOMEM);
  count(&wd->relays);
  return sh_suspend(st, SRV_RELAYED);
}

static const sh_actor_class server_class = {
    .name = "fan_server",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(server_locals),
    .init = sh_scn_actor_init,
    .ask = server_ask,
};

/* ---- clients ------------------------------------------------------------------ */

typedef struct client {
  sh_scn_actor a;
  uint32_t round;
} client;

typedef struct client_locals {
  sh_future *f[SERVERS];
  uint64_t v[SERVERS];
  uint32_t hops[SERVERS];
  uint32_t invocations; /* handler entries of this stack */
  uint32_t seen;        /* sh_suspend_any: bit i set once future i was seen done */
  uint32_t any_resumes;
} client_locals;

enum { C_ALL = 1, C_ANY = 2 };
#define ALL_SEEN ((1u << SERVERS) - 1)

/* Asks every server once; false (and checked) if an ask could not be made. */
static bool ask_all(client *c, sh_stack *st, client_locals *l) {
  world *wd = sh_scn_state(c->a.s);
  for (uint32_t i = 0; i < SERVERS; i++) {
    uint64_t r = sh_scn_rand(c->a.s);
    l->v[i] = r >> 16; /* room for 2v + 1 + hops */
    l->hops[i] = (uint32_t)(r % (MAX_HOPS + 1));
    fan_ask *q = sh_msg_new(fan_ask, .v = l->v[i], .hops = l->hops[i]);
    l->f[i] = q != NULL ? sh_ask(st, wd->servers[i], &q->hdr, SH_FOREVER) : NULL;
    if (!SH_SCN_CHECK(c->a.s, l->f[i] != NULL, "client: ask %u could not be made", i)) return false;
  }
  return true;
}

/* Future i is done and carries the answer to ask i. */
static bool answered(client *c, const client_locals *l, uint32_t i) {
  const sh_future *f = l->f[i];
  uint64_t v = 0;
  bool got = sh_future_done(f) && sh_scn_num_of(f, &v);
  return SH_SCN_CHECK(c->a.s, got && v == answer_of(l->v[i], l->hops[i]),
                      "server %u: future done %d error %d, reply %llu want %llu", i,
                      sh_future_done(f), sh_future_error(f), (unsigned long long)v,
                      (unsigned long long)answer_of(l->v[i], l->hops[i]));
}

/* The round is over: the next one, or this client's end. */
static sh_yield round_end(client *c, sh_stack *st) {
  world *wd = sh_scn_state(c->a.s);
  return sh_scn_round_end(st, ++c->round < ROUNDS, &wd->clients_left);
}

/* Phase 1 ended: the one resume of sh_suspend. Then phase 2's asks. */
static sh_yield all_done(client *c, sh_stack *st, client_locals *l) {
  world *wd = sh_scn_state(c->a.s);
  SH_SCN_CHECK(c->a.s, l->invocations == 2,
               "sh_suspend: %u entries for one fan-out, want 2 (start, one resume)",
               l->invocations);
  for (uint32_t i = 0; i < SERVERS; i++) answered(c, l, i);
  count(&wd->all_rounds);
  l->seen = 0;
  l->any_resumes = 0;
  if (!ask_all(c, st, l)) return round_end(c, st);
  return sh_suspend_any(st, C_ANY);
}

/* Phase 2: one resume per completion. */
static sh_yield any_done(client *c, sh_stack *st, client_locals *l) {
  world *wd = sh_scn_state(c->a.s);
  count(&wd->any_resumes);
  l->any_resumes++;
  uint32_t fresh = 0;
  for (uint32_t i = 0; i < SERVERS; i++) {
    bool seen = (l->seen >> i) & 1u;
    if (!seen && !sh_future_done(l->f[i])) continue;
    /* Seen ones stay valid while the stack stays in this state. */
    answered(c, l, i);
    if (!seen) {
      fresh++;
      l->seen |= 1u << i;
    }
  }
  SH_SCN_CHECK(c->a.s, fresh == 1, "sh_suspend_any: resume %u saw %u new completions, want 1",
               l->any_resumes, fresh);
  if (l->seen != ALL_SEEN && fresh > 0) return sh_suspend_any(st, C_ANY);
  SH_SCN_CHECK(c->a.s, l->any_resumes == SERVERS, "sh_suspend_any: %u resumes for %u asks",
               l->any_resumes, SERVERS);
  count(&wd->any_rounds);
  return round_end(c, st);
}

static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  client *c = (client *)self;
  client_locals *l = sh_stack_locals(st);
  l->invocations++;
  switch (sh_stack_state(st)) {
  case SH_START:
    if (!ask_all(c, st, l)) return round_end(c, st);
    return sh_suspend(st, C_ALL);
  case C_ALL: return all_done(c, st, l);
  case C_ANY: return any_done(c, st, l);
  }
  SH_SCN_CHECK(c->a.s, false, "client: unknown state %d", sh_stack_state(st));
  return sh_return(st, NULL);
}

static const sh_actor_class client_class = {
    .name = "fan_client",
    .size = sizeof(client),
    .locals_size = sizeof(client_locals),
    .init = sh_scn_actor_init,
    .notice = client_notice,
};

/* ---- the run ------------------------------------------------------------------ */

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  wd->nclients = sh_scn_workers(s);
  atomic_store(&wd->clients_left, wd->nclients);
  int rc = sh_scn_spawn_each(s, sys, &server_class, SERVERS, SH_SCN_EACH_PINNED, wd->servers);
  if (rc != 0) return rc;
  return sh_scn_spawn_each(s, sys, &client_class, wd->nclients,
                           SH_SCN_EACH_PINNED | SH_SCN_EACH_KICK, NULL);
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  world *wd = sh_scn_state(s);
  uint64_t fans = (uint64_t)wd->nclients * ROUNDS;
  uint64_t relays = atomic_load(&wd->relays);
  SH_SCN_CHECK_EQ(s, atomic_load(&wd->all_rounds), fans, "sh_suspend fan-outs");
  SH_SCN_CHECK_EQ(s, atomic_load(&wd->any_rounds), fans, "sh_suspend_any fan-outs");
  SH_SCN_CHECK_EQ(s, atomic_load(&wd->any_resumes), fans * SERVERS, "sh_suspend_any resumes");
  uint64_t asks = fans * 2 * SERVERS + relays;
  SH_SCN_CHECK_EQ(s, st->asks, asks, "asks");
  /* Per round: its go notice, then every ask and its reply. */
  SH_SCN_CHECK_EQ(s, st->delivered, fans + 2 * asks, "delivered");
  SH_SCN_CHECK(s, st->replies_unknown == 0 && st->asks_timed_out == 0,
               "%llu unknown replies, %llu timeouts", (unsigned long long)st->replies_unknown,
               (unsigned long long)st->asks_timed_out);
}

static const sh_scenario fanout = {
    .name = "fanout",
    .summary = "fan-out asks: sh_suspend resumes once when all complete, sh_suspend_any on each",
    .workers = 3,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(fanout);
