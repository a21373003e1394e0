/*
 * Cross-worker stress on the production backend (epoll, pthreads), for 2, 3,
 * 4 and 8 workers: clients on every worker ask servers on every worker, each
 * client with FANOUT asks in flight at a time, with notices mixed in. At
 * least 100,000 asks per worker count (50,000 under ThreadSanitizer, which
 * is several times slower: the file's TSan run stays well under a minute).
 * Exact accounting afterwards: every ask handled once and answered once
 * with the right value, the sums agree on both sides, the runtime's
 * delivered count is exactly the messages sent, no reply was unknown, and
 * the pools got every object back.
 *
 * Handlers record into the global `g` (cmocka's asserts are for the test
 * thread only); the test thread checks after shutdown.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include <stackhouse/stackhouse.h>

#include "support/harness.h"

#define TARGET_ASKS (TH_UNDER_TSAN ? 50000 : 100000)

#define WATCHDOG_S 240
#define MAX_WORKERS 8
#define SERVERS_PER_WORKER 2
#define CLIENTS_PER_WORKER 4
#define FANOUT 8
#define MAX_SERVERS (MAX_WORKERS * SERVERS_PER_WORKER)
#define MAX_CLIENTS (MAX_WORKERS * CLIENTS_PER_WORKER)

/* ---- messages ------------------------------------------------------------ */

typedef struct work_ask {
  sh_msg hdr;
  uint64_t v;
} work_ask;
SH_MSG_DEFINE(work_ask, SH_ASK, 0);

typedef struct work_reply {
  sh_msg hdr;
  uint64_t v;
} work_reply;
SH_MSG_DEFINE(work_reply, SH_REPLY, 0);

/* A client's side notice to a server, mixed in with the asks. */
typedef struct tally {
  sh_msg hdr;
  uint64_t v;
} tally;
SH_MSG_DEFINE(tally, SH_NOTICE, 0);

/* Starts a client. */
typedef struct start {
  sh_msg hdr;
  int rounds;
} start;
SH_MSG_DEFINE(start, SH_NOTICE, 0);

/* ---- what the handlers saw ----------------------------------------------- */

static struct {
  const sh_addr *servers[MAX_SERVERS];
  int nservers;
  atomic_int next_client;
  atomic_uint_fast64_t server_asks[MAX_SERVERS];
  atomic_uint_fast64_t server_tallies;
  atomic_uint_fast64_t server_v_sum;    /* sum of every v servers were asked */
  atomic_uint_fast64_t server_tally_sum;
  atomic_uint_fast64_t client_replies;  /* futures completed with a reply */
  atomic_uint_fast64_t client_v_sum;    /* sum of every v clients asked */
  atomic_uint_fast64_t client_tally_sum;
  atomic_uint_fast64_t reply_sum;       /* sum of every reply value received */
  atomic_uint_fast64_t expected_reply_sum;
} g;

static uint64_t answer_of(uint64_t v) { return v * 3 + 1; }

/* ---- server ---------------------------------------------------------------- */

typedef struct server {
  sh_actor base;
  int idx; /* into g.servers */
} server;

static int server_init(sh_actor *self, void *arg) {
  ((server *)self)->idx = (int)(intptr_t)arg;
  return 0;
}

static sh_yield server_ask(sh_actor *self, sh_stack *st) {
  uint64_t v = sh_stack_msg_as(st, work_ask)->v;
  atomic_fetch_add(&g.server_asks[((server *)self)->idx], 1);
  atomic_fetch_add(&g.server_v_sum, v);
  return sh_return(st, &sh_msg_new(work_reply, .v = answer_of(v))->hdr);
}

static sh_yield server_notice(sh_actor *self, sh_stack *st) {
  atomic_fetch_add(&g.server_tallies, 1);
  atomic_fetch_add(&g.server_tally_sum, sh_stack_msg_as(st, tally)->v);
  /* A tally is part of the run's goal: the last client may finish while
   * tallies are still queued (asks go before notices), and the run must not
   * end before they are handled. */
  th_done(self);
  return sh_return(st, NULL);
}

static const sh_actor_class server_class = {.name = "server",
                                            .size = sizeof(server),
                                            .init = server_init,
                                            .ask = server_ask,
                                            .notice = server_notice};

/* ---- client: rounds of FANOUT asks to random servers, plus a notice -------- */

typedef struct client {
  sh_actor base;
  uint64_t id;
  uint64_t rng; /* xorshift64, fixed seed per client */
  uint64_t v_sum, tally_sum, reply_sum, expected_sum, replies;
} client;

typedef struct client_locals {
  sh_future *f[FANOUT];
  uint64_t v[FANOUT];
  int round, rounds;
} client_locals;

enum { GOT = 1 };

static int client_init(sh_actor *self, void *arg) {
  (void)arg;
  client *c = (client *)self;
  c->id = (uint64_t)atomic_fetch_add(&g.next_client, 1);
  c->rng = 0x9e3779b97f4a7c15ull ^ (c->id + 1) * 0x2545f4914f6cdd1dull;
  return 0;
}

static const sh_addr *any_server(client *c) {
  return g.servers[th_xorshift(&c->rng) % (uint64_t)g.nservers];
}

static void send_round(client *c, sh_stack *st) {
  client_locals *l = sh_stack_locals(st);
  for (int i = 0; i < FANOUT; i++) {
    /* Unique per ask: client, round, slot. */
    uint64_t v = c->id << 40 | (uint64_t)l->round << 8 | (uint64_t)i;
    l->v[i] = v;
    c->v_sum += v;
    l->f[i] = sh_ask(st, any_server(c), &sh_msg_new(work_ask, .v = v)->hdr, SH_FOREVER);
    CHECK(l->f[i] != NULL);
  }
  uint64_t t = c->id << 40 | (uint64_t)l->round;
  c->tally_sum += t;
  int rc = sh_notice(any_server(c), &sh_msg_new(tally, .v = t)->hdr);
  CHECK(rc == 0);
}

static void collect_round(client *c, sh_stack *st) {
  client_locals *l = sh_stack_locals(st);
  for (int i = 0; i < FANOUT; i++) {
    const work_reply *r = sh_future_reply(l->f[i], work_reply);
    CHECK(sh_future_done(l->f[i]) && sh_future_error(l->f[i]) == 0 && r != NULL);
    if (r == NULL) continue;
    CHECK(r->v == answer_of(l->v[i]));
    c->replies++;
    c->reply_sum += r->v;
    c->expected_sum += answer_of(l->v[i]);
  }
}

static void client_finish(client *c) {
  atomic_fetch_add(&g.client_replies, c->replies);
  atomic_fetch_add(&g.client_v_sum, c->v_sum);
  atomic_fetch_add(&g.client_tally_sum, c->tally_sum);
  atomic_fetch_add(&g.reply_sum, c->reply_sum);
  atomic_fetch_add(&g.expected_reply_sum, c->expected_sum);
  th_done(&c->base); /* the run ends with the last client or tally */
}

static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  client *c = (client *)self;
  client_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->round = 0;
    l->rounds = sh_stack_msg_as(st, start)->rounds;
  } else {
    collect_round(c, st);
    if (++l->round == l->rounds) {
      client_finish(c);
      return sh_return(st, NULL);
    }
  }
  send_round(c, st);
  return sh_suspend(st, GOT);
}

static const sh_actor_class client_class = {.name = "client",
                                            .size = sizeof(client),
                                            .locals_size = sizeof(client_locals),
                                            .init = client_init,
                                            .notice = client_notice};

/* ---- the run ------------------------------------------------------------------ */

static void stress(uint32_t workers) {
  memset(&g, 0, sizeof(g)); /* no system exists yet */
  sh_system *sys = th_system(workers);

  for (uint32_t w = 0; w < workers; w++) {
    for (int k = 0; k < SERVERS_PER_WORKER; k++, g.nservers++)
      g.servers[g.nservers] = th_spawn_on(sys, &server_class, (void *)(intptr_t)g.nservers, w);
  }
  int nclients = (int)workers * CLIENTS_PER_WORKER;
  const sh_addr *clients[MAX_CLIENTS];
  for (int i = 0; i < nclients; i++)
    clients[i] = th_spawn_on(sys, &client_class, NULL, (uint32_t)i % workers);
  int per_round = nclients * FANOUT;
  int rounds = (TARGET_ASKS + per_round - 1) / per_round;
  uint64_t asks = (uint64_t)per_round * (uint64_t)rounds;
  th_reset(nclients + nclients * rounds); /* every client, and one tally per client round */

  assert_int_equal(sh_system_start(sys), 0);
  for (int i = 0; i < nclients; i++)
    assert_int_equal(sh_notice(clients[i], &sh_msg_new(start, .rounds = rounds)->hdr), 0);
  assert_int_equal(sh_system_wait(sys), 0);
  sh_stats s = th_end(sys); /* also: no handler CHECK failed, the pools got everything back */

  assert_true(asks >= TARGET_ASKS);
  uint64_t handled = 0;
  for (int i = 0; i < g.nservers; i++) {
    assert_true(atomic_load(&g.server_asks[i]) > 0); /* every worker's servers were asked */
    handled += atomic_load(&g.server_asks[i]);
  }
  assert_int_equal(handled, asks);
  assert_int_equal(atomic_load(&g.client_replies), asks);
  assert_int_equal(atomic_load(&g.server_v_sum), atomic_load(&g.client_v_sum));
  assert_int_equal(atomic_load(&g.reply_sum), atomic_load(&g.expected_reply_sum));
  uint64_t tallies = (uint64_t)nclients * (uint64_t)rounds;
  assert_int_equal(atomic_load(&g.server_tallies), tallies);
  assert_int_equal(atomic_load(&g.server_tally_sum), atomic_load(&g.client_tally_sum));
  /* start notices + asks + replies + tallies, each handed to a handler once. */
  assert_int_equal(s.delivered, (uint64_t)nclients + 2 * asks + tallies);
  assert_int_equal(s.replies_unknown, 0);
  assert_int_equal(s.dropped_stopped, 0);
  assert_int_equal(s.asks_timed_out, 0);
}

static void test_stress_2_workers(void **state) {
  (void)state;
  stress(2);
}

static void test_stress_3_workers(void **state) {
  (void)state;
  stress(3);
}

static void test_stress_4_workers(void **state) {
  (void)state;
  stress(4);
}

static void test_stress_8_workers(void **state) {
  (void)state;
  stress(8);
}

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stress_2_workers),
      cmocka_unit_test(test_stress_3_workers),
      cmocka_unit_test(test_stress_4_workers),
      cmocka_unit_test(test_stress_8_workers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
