/*
 * ask_reply: the ask/reply lifecycle of seed 000 across workers. A client on
 * each worker asks a server on every worker in turn (so most asks cross
 * workers); each ask carries a number the server doubles. The client checks
 * every reply against what it sent, and the run checks that every ask was
 * answered exactly once.
 */
#include <errno.h>
#include <stdatomic.h>

#include "scenario.h"

#define ROUNDS 200

typedef struct num_ask {
  sh_msg hdr;
  uint64_t v;
} num_ask;
static SH_MSG_DEFINE(num_ask, SH_ASK, 0);

typedef struct num_reply {
  sh_msg hdr;
  uint64_t v;
} num_reply;
static SH_MSG_DEFINE(num_reply, SH_REPLY, 0);

typedef struct go {
  sh_msg hdr;
} go;
static SH_MSG_DEFINE(go, SH_NOTICE, 0);

typedef struct world {
  const sh_addr *servers; /* one per worker */
  atomic_uint clients_done;
  atomic_uint replies;
  uint32_t nclients;
} world;

typedef struct client {
  sh_actor base;
  sh_scn *s;
  uint32_t round;
} client;

typedef struct client_locals {
  uint64_t sent;
  sh_future *f;
} client_locals;

static sh_yield server_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  num_ask *q = sh_stack_msg_as(st, num_ask);
  num_reply *r = sh_msg_new(num_reply, .v = q->v * 2);
  return r != NULL ? sh_return(st, &r->hdr) : sh_throw(st, -ENOMEM);
}

static const sh_actor_class server_class = {
    .name = "server",
    .size = sizeof(sh_actor),
    .ask = server_ask,
};

static int client_init(sh_actor *self, void *arg) {
  ((client *)self)->s = arg;
  return 0;
}

/* One round per notice: ask the next server, check the reply, notice itself
 * for the next round (so other actors interleave between rounds). */
static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  client *c = (client *)self;
  world *wd = sh_scn_state(c->s);
  client_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case SH_START: {
    l->sent = sh_scn_rand(c->s) >> 8;
    num_ask *q = sh_msg_new(num_ask, .v = l->sent);
    SH_SCN_CHECK(c->s, q != NULL, "out of memory");
    if (q == NULL) return sh_return(st, NULL);
    l->f = sh_ask(st, wd->servers, &q->hdr, 0);
    SH_SCN_CHECK(c->s, l->f != NULL, "sh_ask failed");
    if (l->f == NULL) return sh_return(st, NULL);
    return sh_suspend(st, 1);
  }
  case 1: {
    num_reply *r = sh_future_reply(l->f, num_reply);
    SH_SCN_CHECK(c->s, r != NULL && r->v == l->sent * 2, "wrong reply (error %d)",
                 sh_future_error(l->f));
    atomic_fetch_add_explicit(&wd->replies, 1, memory_order_relaxed);
    if (++c->round < ROUNDS) {
      go *g = sh_msg_new(go);
      SH_SCN_CHECK(c->s, g != NULL && sh_notice(sh_self(self), &g->hdr) == 0, "notice failed");
    } else if (atomic_fetch_add_explicit(&wd->clients_done, 1, memory_order_acq_rel) + 1 ==
               wd->nclients) {
      sh_scn_done(c->s, sh_actor_system(self));
    }
    return sh_return(st, NULL);
  }
  }
  return sh_return(st, NULL);
}

static const sh_actor_class client_class = {
    .name = "client",
    .size = sizeof(client),
    .locals_size = sizeof(client_locals),
    .init = client_init,
    .notice = client_notice,
};

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  wd->nclients = sh_scn_workers(s);
  /* Plain spawn with K instances: asks round-robin over the servers. */
  int rc = sh_spawn(sys, &server_class, NULL, sh_scn_workers(s), &wd->servers);
  if (rc != 0) return rc;
  for (uint32_t i = 0; i < wd->nclients; i++) {
    const sh_addr *a;
    rc = sh_spawn_on(sys, &client_class, s, i, &a);
    if (rc != 0) return rc;
    go *g = sh_msg_new(go);
    if (g == NULL) return -ENOMEM;
    rc = sh_notice(a, &g->hdr);
    if (rc != 0) return rc;
  }
  return 0;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  world *wd = sh_scn_state(s);
  unsigned want = wd->nclients * ROUNDS;
  SH_SCN_CHECK(s, atomic_load(&wd->replies) == want, "%u replies, want %u",
               atomic_load(&wd->replies), want);
  SH_SCN_CHECK(s, st->asks == want, "%llu asks, want %u", (unsigned long long)st->asks, want);
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
