/*
 * ask_reply: the ask/reply lifecycle across workers (an ask makes a future,
 * its reply completes it, the asking stack resumes). A client on
 * each worker asks a server on every worker in turn (so most asks cross
 * workers); each ask carries a number the server doubles. The client checks
 * every reply against what it sent, and the run checks that every ask was
 * answered exactly once.
 */
#include <stdatomic.h>

#include <stackhouse/scenario.h>

#define ROUNDS 200

typedef struct world {
  const sh_addr *servers; /* one per worker */
  atomic_uint clients_left;
  atomic_uint replies;
  uint32_t nclients;
} world;

typedef struct client {
  sh_scn_actor a;
  uint32_t round;
} client;

typedef struct client_locals {
  uint64_t sent;
  sh_future *f;
} client_locals;

static sh_yield server_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_scn_answer(st, sh_stack_msg_as(st, sh_scn_num_ask)->v * 2);
}

static const sh_actor_class server_class = {
    .name = "server",
    .size = sizeof(sh_actor),
    .ask = server_ask,
};

/* One round per notice: ask the next server, check the reply, notice itself
 * for the next round (so other actors interleave between rounds). */
static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  client *c = (client *)self;
  sh_scn *s = c->a.s;
  world *wd = sh_scn_state(s);
  client_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->sent = sh_scn_rand(s) >> 8;
    l->f = sh_scn_ask_num(st, wd->servers, l->sent, SH_FOREVER);
    if (!SH_SCN_CHECK(s, l->f != NULL, "sh_ask failed")) return sh_return(st, NULL);
    return sh_suspend(st, 1);
  }
  uint64_t v = 0;
  SH_SCN_CHECK(s, sh_scn_num_of(l->f, &v) && v == l->sent * 2, "wrong reply (error %d)",
               sh_future_error(l->f));
  atomic_fetch_add_explicit(&wd->replies, 1, memory_order_relaxed);
  return sh_scn_round_end(st, ++c->round < ROUNDS, &wd->clients_left);
}

static const sh_actor_class client_class = {
    .name = "client",
    .size = sizeof(client),
    .locals_size = sizeof(client_locals),
    .init = sh_scn_actor_init,
    .notice = client_notice,
};

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  wd->nclients = sh_scn_workers(s);
  atomic_store(&wd->clients_left, wd->nclients);
  /* Plain spawn with K instances: asks round-robin over the servers. */
  int rc = sh_spawn(sys, &server_class, NULL, sh_scn_workers(s), &wd->servers);
  if (rc != 0) return rc;
  return sh_scn_spawn_each(s, sys, &client_class, wd->nclients,
                           SH_SCN_EACH_PINNED | SH_SCN_EACH_KICK, NULL);
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  world *wd = sh_scn_state(s);
  unsigned want = wd->nclients * ROUNDS;
  SH_SCN_CHECK_EQ(s, atomic_load(&wd->replies), want, "replies");
  SH_SCN_CHECK_EQ(s, st->asks, want, "asks");
}

static const sh_scenario ask_reply = {
    .name = "ask_reply",
    .summary = "ask/reply lifecycle: clients on every worker ask round-robin servers",
    .workers = 3,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(ask_reply);
