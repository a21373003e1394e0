/*
 * HTTP handlers that ask a backend: the route /b?k asks a backend actor
 * for 2k with a timeout, and the backend, by k, answers at once, answers
 * soon, answers well after the timeout, never answers (its stack sleeps
 * until the system stops), or refuses (-EBUSY). A handler whose ask
 * failed throws the ask's error, which the server answers by http.h's
 * mapping: 504 for a timeout, 503 for -EBUSY.
 *
 * Invariant: clients that pipeline these requests get, on each
 * connection, every response in request order, once: 200 with 2k for an
 * answer in time, 504 for a late or missing one, 503 for a refusal. After
 * shutdown the server has no connection open, and the invariants every
 * scenario shares say every ask resolved once and nothing leaked.
 */
#include <stdio.h>
#include <string.h>

#include "http_client.h"

#define CLIENTS 3
#define REQS 15 /* per client */
#define OUT_MAX 1024u
#define TIMEOUT_MS 40
#define LATE_MS 120
#define NEVER_MS 600000

enum { K_NEVER, K_NOW, K_LATE, K_SOON, K_REFUSE, K_KINDS };

typedef struct stream {
  char out[OUT_MAX];
  uint32_t next; /* the request whose response comes next */
} stream;

typedef struct world {
  hc_world w;
  hc_conn conns[CLIENTS];
  stream streams[CLIENTS];
  const sh_addr *backend;
  sh_http_server *server;
  uint32_t answered;
} world;

static uint32_t kind_of(uint64_t k) { return (uint32_t)(k % K_KINDS); }

static uint16_t status_of(uint64_t k) {
  switch (kind_of(k)) {
  case K_NEVER:
  case K_LATE: return 504;
  case K_REFUSE: return 503;
  default: return 200;
  }
}

/* ---- the backend ----------------------------------------------------------------------- */

typedef struct backend_locals {
  sh_future *f;
} backend_locals;

static const int64_t delay_of[K_KINDS] = {[K_NEVER] = NEVER_MS, [K_LATE] = LATE_MS,
                                          [K_SOON] = 1};

static sh_yield backend_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  backend_locals *l = sh_stack_locals(st);
  uint64_t k = sh_stack_msg_as(st, sh_scn_num_ask)->v;
  if (sh_stack_state(st) == SH_START) {
    if (kind_of(k) == K_REFUSE) return sh_throw(st, -EBUSY);
    if (delay_of[kind_of(k)] > 0) {
      l->f = sh_sleep(st, delay_of[kind_of(k)]);
      if (l->f == NULL) return sh_throw(st, -ENOMEM);
      return sh_suspend(st, 1);
    }
  }
  /* A sleep cut short by the system's stop: the answer goes nowhere. */
  return sh_scn_answer(st, 2 * k);
}

static const sh_actor_class backend_class = {
    .name = "http_backend",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(backend_locals),
    .init = sh_scn_actor_init,
    .ask = backend_ask,
};

/* ---- the server --------------------------------------------------------------------------- */

static sh_yield answer_b(sh_actor *self, sh_stack *st) {
  (void)self;
  world *wd = sh_http_data(st);
  sh_future **f = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    sh_http_request *r = sh_http_req(st);
    char q[24] = {0};
    memcpy(q, r->query.p, r->query.len < sizeof(q) - 1 ? r->query.len : sizeof(q) - 1);
    unsigned long long k;
    if (sscanf(q, "%llu", &k) != 1) return sh_http_reply(st, 400, NULL, NULL, 0);
    *f = sh_scn_ask_num(st, wd->backend, k, TIMEOUT_MS);
    if (*f == NULL) return sh_throw(st, -ENOMEM);
    return sh_suspend(st, 1);
  }
  uint64_t v;
  if (!sh_scn_num_of(*f, &v)) return sh_throw(st, sh_future_error(*f));
  char b[32];
  int n = snprintf(b, sizeof(b), "%llu", (unsigned long long)v);
  return sh_http_reply(st, 200, "text/plain", b, (size_t)n);
}

static const sh_http_route routes[] = {{SH_HTTP_M(SH_HTTP_GET), "/b", answer_b}};

/* ---- the clients --------------------------------------------------------------------------- */

static void response(hc_conn *c, const hc_resp *r) {
  world *wd = sh_scn_state(c->s);
  stream *sm = c->user;
  uint64_t k = (uint64_t)c->index * REQS + sm->next;
  char want[32];
  int n = snprintf(want, sizeof(want), "%llu", (unsigned long long)(2 * k));
  if (hc_in_order(c, r, &sm->next, REQS, status_of(k), want, (size_t)n)) wd->answered++;
}

static bool closed(hc_conn *c, int error) {
  stream *sm = c->user;
  SH_SCN_CHECK(c->s, sm->next == REQS || sh_scn_faulty(c->s),
               "client %u closed (error %d) with %u of %u answered", c->index, error, sm->next,
               REQS);
  return false;
}

static const hc_ops ops = {.chunk = hc_whole, .response = response, .closed = closed};

/* ---- the run ---------------------------------------------------------------------------------- */

static void make_stream(world *wd, uint32_t i) {
  stream *sm = &wd->streams[i];
  size_t off = 0;
  for (uint32_t j = 0; j < REQS; j++)
    off += (size_t)snprintf(sm->out + off, OUT_MAX - off, "GET /b?%u HTTP/1.1\r\nHost: h\r\n\r\n",
                            i * REQS + j);
  wd->conns[i] = (hc_conn){.ops = &ops, .out = sm->out, .out_len = off, .user = sm};
}

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  for (uint32_t i = 0; i < CLIENTS; i++) make_stream(wd, i);
  int rc = sh_scn_spawn(s, sys, &backend_class, 0, 1, &wd->backend);
  sh_http_config cfg = {.routes = routes, .nroutes = 1, .locals_size = sizeof(sh_future *),
                        .data = wd};
  return rc != 0 ? rc : hc_serve(s, sys, &cfg, &wd->server, &wd->w, wd->conns, CLIENTS);
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  world *wd = sh_scn_state(s);
  if (!sh_scn_faulty(s)) {
    SH_SCN_CHECK_EQ(s, wd->answered, CLIENTS * REQS, "requests answered");
    /* Every late and missing answer timed out, and nothing else did. */
    SH_SCN_CHECK_EQ(s, st->asks_timed_out, CLIENTS * REQS * 2 / K_KINDS, "asks timed out");
  }
}

static const sh_scenario http_backend_timeout = {
    .name = "http_backend_timeout",
    .summary = "HTTP handlers ask a backend that is late or silent: 504/503/200 in order",
    .flags = SH_SCN_NET,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(http_backend_timeout);
