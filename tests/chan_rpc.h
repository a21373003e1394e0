/*
 * Request/response over a real channel, for the tests that check the
 * inflight rules of channels end to end on either backend (header only,
 * public API only): a length-prefixed codec, a server whose stacks nap a
 * while and report what ran beside them, and a client that keeps several
 * requests inflight on one connection.
 *
 * The server tells in each response how many of the connection's stacks
 * ran at its start and whether a barrier shared its time with another
 * stack, so that the client checks the server's limits from what it gets.
 *
 * The including file defines, after including this one:
 *   static void rpc_check(sh_actor *self, bool ok, const char *what, long a, long b);
 *   static void rpc_finished(sh_actor *self);
 * rpc_check records a failed check (what, with two figures); rpc_finished
 * says a client's run is over. The counters below are the process's: one
 * run at a time (rpc_reset between runs).
 */
#ifndef TESTS_CHAN_RPC_H
#define TESTS_CHAN_RPC_H

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <stackhouse/net.h>

static void rpc_check(sh_actor *self, bool ok, const char *what, long a, long b);
static void rpc_finished(sh_actor *self);

/* ---- the codec -------------------------------------------------------------- */

/* [u32 length of the rest][u8 kind][u8 barrier][u8 running][u8 overlap]
 * [u8 nap][3 bytes zero][u64 id][u64 v] */
#define RPC_BODY 24u
#define RPC_FRAME (4u + RPC_BODY)

typedef struct rpc {
  sh_msg hdr;
  uint64_t v;
  bool barrier;   /* requests: runs alone */
  uint8_t nap;    /* requests: the server's stack sleeps this many ms */
  uint8_t running; /* responses: stacks of the connection running at its start */
  bool overlap;   /* responses: a barrier shared its time with another stack */
} rpc;
typedef rpc rpc_req;
typedef rpc rpc_resp;
static SH_MSG_DEFINE(rpc_req, SH_NOTICE, 0);
static SH_MSG_DEFINE(rpc_resp, SH_REPLY, 0);

/* Lays out one frame (for raw sockets too). */
static inline void rpc_frame(uint8_t *f, bool resp, const rpc *m, uint64_t id) {
  uint32_t len = RPC_BODY;
  memset(f, 0, RPC_FRAME);
  memcpy(f, &len, 4);
  f[4] = resp;
  f[5] = m->barrier;
  f[6] = m->running;
  f[7] = m->overlap;
  f[8] = m->nap;
  memcpy(f + 12, &id, 8);
  memcpy(f + 20, &m->v, 8);
}

/* Reads one frame back; false when it is malformed. */
static inline bool rpc_unframe(const uint8_t *f, bool *resp, rpc *m, uint64_t *id) {
  uint32_t len;
  memcpy(&len, f, 4);
  if (len != RPC_BODY || f[4] > 1) return false;
  *resp = f[4];
  m->barrier = f[5];
  m->running = f[6];
  m->overlap = f[7];
  m->nap = f[8];
  memcpy(id, f + 12, 8);
  memcpy(&m->v, f + 20, 8);
  return true;
}

static int rpc_decode(sh_pctx *c, sh_buf *in) {
  /* Bounded by the bytes: each turn consumes a frame. */
  while (sh_buf_len(in) >= RPC_FRAME) {
    uint8_t f[RPC_FRAME];
    sh_buf_peek(in, 0, f, sizeof(f));
    rpc d = {.v = 0};
    bool resp;
    uint64_t id;
    if (!rpc_unframe(f, &resp, &d, &id)) return -EPROTO;
    rpc *m = (rpc *)sh_msg_alloc(resp ? &rpc_resp_type : &rpc_req_type);
    if (m == NULL) return -ENOMEM;
    sh_msg_fill(&m->hdr, &d, sizeof(d));
    sh_msg_set_id(&m->hdr, id);
    sh_buf_consume(in, sizeof(f));
    int rc = sh_pctx_fire(c, &m->hdr);
    if (rc < 0) return rc;
  }
  return 0;
}

static int rpc_encode(sh_pctx *c, sh_msg *m) {
  uint8_t f[RPC_FRAME];
  rpc_frame(f, sh_msg_is(m, &rpc_resp_type), (const rpc *)m, sh_msg_id(m));
  sh_msg_free(m);
  return sh_buf_append(sh_pctx_out(c), f, sizeof(f));
}

static const sh_handler rpc_codec = {.name = "rpc_codec", .decode = rpc_decode,
                                     .outbound = rpc_encode};

static bool rpc_is_barrier(const sh_msg *m) { return ((const rpc *)m)->barrier; }

/* ---- what the runs count ------------------------------------------------------ */

static atomic_uint rpc_started, rpc_ended; /* server stacks */
static atomic_uint rpc_srv_closed;         /* server channels closed */
static atomic_uint rpc_cli_closed;         /* client channels closed (CLOSED events) */
static atomic_int rpc_cli_close_error;     /* the error of the last of them */
static atomic_uint rpc_answered, rpc_aborted; /* client futures: answered, failed by the close */

static inline void rpc_reset(void) {
  atomic_store(&rpc_started, 0);
  atomic_store(&rpc_ended, 0);
  atomic_store(&rpc_srv_closed, 0);
  atomic_store(&rpc_cli_closed, 0);
  atomic_store(&rpc_cli_close_error, 0);
  atomic_store(&rpc_answered, 0);
  atomic_store(&rpc_aborted, 0);
}

/* ---- the server ------------------------------------------------------------------ */

typedef struct rpc_conn {
  uint32_t running;
  bool barrier_running, barrier_shared;
  bool closed; /* the last stack to end frees this */
} rpc_conn;

/* The server's channel options: at most `inflight` stacks at once, barrier
 * requests alone, results in request order or as they finish. */
static inline sh_channel_opts rpc_server_opts(uint32_t inflight, bool head_of_line) {
  return (sh_channel_opts){.handlers = {&rpc_codec}, .nhandlers = 1,
                           .max_stack_inflight = inflight, .stack_barrier = rpc_is_barrier,
                           .head_of_line = head_of_line};
}

typedef struct rpc_srv_locals {
  sh_future *f;
  rpc_conn *sc;
  uint8_t running;
  bool overlap;
} rpc_srv_locals;

static void rpc_conn_start(rpc_srv_locals *l, const rpc *req) {
  rpc_conn *sc = l->sc;
  l->overlap = sc->barrier_running || (req->barrier && sc->running > 0);
  if (sc->barrier_running) sc->barrier_shared = true;
  sc->running++;
  l->running = (uint8_t)sc->running;
  if (req->barrier) {
    sc->barrier_running = true;
    sc->barrier_shared = false;
  }
}

/* A stack of the connection ended; true when the connection is gone. */
static bool rpc_conn_end(rpc_srv_locals *l, const rpc *req) {
  rpc_conn *sc = l->sc;
  sc->running--;
  if (req->barrier) {
    l->overlap = l->overlap || sc->barrier_shared;
    sc->barrier_running = false;
  }
  atomic_fetch_add(&rpc_ended, 1);
  if (!sc->closed) return false;
  if (sc->running == 0) free(sc);
  return true;
}

static sh_yield rpc_server_channel(sh_actor *self, sh_stack *st) {
  (void)self;
  rpc_srv_locals *l = sh_stack_locals(st);
  rpc *req = sh_stack_msg_as(st, rpc);
  if (sh_stack_state(st) == SH_START) {
    l->sc = sh_channel_data(sh_stack_channel(st));
    if (l->sc == NULL) return sh_throw(st, -ENOMEM);
    atomic_fetch_add(&rpc_started, 1);
    rpc_conn_start(l, req);
    l->f = sh_sleep(st, req->nap);
    if (l->f == NULL) {
      rpc_conn_end(l, req);
      return sh_throw(st, -ENOMEM);
    }
    return sh_suspend(st, 1);
  }
  /* The peer went away meanwhile: the result would go nowhere. */
  if (rpc_conn_end(l, req)) return sh_return(st, NULL);
  rpc_resp *r = (rpc_resp *)sh_msg_alloc(&rpc_resp_type);
  if (r == NULL) return sh_throw(st, -ENOMEM);
  r->v = req->v * 2;
  r->running = l->running;
  r->overlap = l->overlap;
  sh_msg_set_id(&r->hdr, sh_msg_id(&req->hdr));
  return sh_return(st, &r->hdr);
}

static void rpc_server_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)self, (void)error;
  if (ev == SH_CHANNEL_OPEN) sh_channel_set_data(ch, calloc(1, sizeof(rpc_conn)));
  if (ev != SH_CHANNEL_CLOSED) return;
  /* Stacks of this channel may still run: their state goes with them. */
  rpc_conn *sc = sh_channel_data(ch);
  if (sc != NULL) sc->closed = true;
  if (sc != NULL && sc->running == 0) free(sc);
  atomic_fetch_add(&rpc_srv_closed, 1);
}

static const sh_actor_class rpc_server_class = {
    .name = "rpc_server",
    .size = sizeof(sh_actor),
    .locals_size = sizeof(rpc_srv_locals),
    .kind = SH_IO_ACTOR,
    .channel = rpc_server_channel,
    .channel_event = rpc_server_event,
};

/* ---- the client --------------------------------------------------------------------- */

#define RPC_MAX_REQS 32

typedef enum rpc_mode {
  /* REQS requests, a barrier every fifth, drawn naps; the server writes
   * results head-of-line and the client matches them FIFO: a result out of
   * turn answers the wrong request. Then an orderly close. */
  RPC_HOL = 0,
  /* The same without head-of-line: results as they finish, matched by id. */
  RPC_BY_ID = 1,
  /* 5 requests with max_future_inflight 2 and long naps; the client closes
   * under them: every one fails once with -ECONNABORTED. */
  RPC_CLOSE = 2,
} rpc_mode;

typedef struct rpc_plan {
  rpc_mode mode;
  sh_netaddr at;
  uint64_t seed; /* the client's draws (naps, values) */
  uint32_t reqs; /* RPC_HOL, RPC_BY_ID: how many (at most RPC_MAX_REQS) */
  uint32_t max_inflight; /* the server's limit, which the client checks */
  void *ctx;     /* the including file's */
} rpc_plan;

typedef struct rpc_client {
  sh_actor base;
  rpc_plan plan;
} rpc_client;

typedef struct rpc_go {
  sh_msg hdr;
} rpc_go;
static SH_MSG_DEFINE(rpc_go, SH_NOTICE, 0);

#define RPC_CLOSE_REQS 5
#define RPC_CLOSE_NAP_MS 200 /* the server's naps: long past the client's close */
#define RPC_CLOSE_AFTER_MS 20 /* the client's wait before it closes */

typedef struct rpc_cli_locals {
  sh_channel *ch;
  sh_future *f[RPC_MAX_REQS];
  uint64_t v[RPC_MAX_REQS];
  sh_future *nap;
} rpc_cli_locals;

enum { RC_CONNECTED = 1, RC_ANSWERED, RC_NAPPED, RC_SETTLED };

static uint64_t rpc_draw(rpc_client *c) {
  c->plan.seed ^= c->plan.seed << 13;
  c->plan.seed ^= c->plan.seed >> 7;
  c->plan.seed ^= c->plan.seed << 17;
  return c->plan.seed;
}

static bool rpc_ask_all(rpc_client *c, sh_stack *st, rpc_cli_locals *l, uint32_t n) {
  bool closing = c->plan.mode == RPC_CLOSE;
  for (uint32_t i = 0; i < n; i++) {
    rpc_req *q = (rpc_req *)sh_msg_alloc(&rpc_req_type);
    if (q == NULL) return false;
    l->v[i] = rpc_draw(c) >> 8;
    q->v = l->v[i];
    q->barrier = !closing && i % 5 == 2;
    q->nap = closing ? RPC_CLOSE_NAP_MS : (uint8_t)(l->v[i] % 4);
    sh_msg_set_id(&q->hdr, i);
    if ((l->f[i] = sh_channel_ask(st, l->ch, &q->hdr)) == NULL) return false;
  }
  return true;
}

/* Each response is its own request's, within the server's limits. */
static void rpc_check_answers(rpc_client *c, rpc_cli_locals *l) {
  sh_actor *self = &c->base;
  for (uint32_t i = 0; i < c->plan.reqs; i++) {
    int e = sh_future_error(l->f[i]);
    rpc_check(self, e == 0, "request failed (index, error)", (long)i, e);
    if (e != 0) continue;
    rpc *r = sh_future_reply(l->f[i], rpc);
    rpc_check(self, sh_msg_id(&r->hdr) == i && r->v == l->v[i] * 2,
              "request answered by another's response (index, id)", (long)i,
              (long)sh_msg_id(&r->hdr));
    rpc_check(self, r->running <= c->plan.max_inflight,
              "more stacks at once than the limit (seen, limit)", r->running,
              (long)c->plan.max_inflight);
    rpc_check(self, !r->overlap, "a barrier ran with another stack (index, 0)", (long)i, 0);
    atomic_fetch_add(&rpc_answered, 1);
  }
}

/* Right after the close, every future not answered before it has failed
 * with the close's error (this invocation reads them: the close fails
 * them at once). */
static void rpc_check_aborted(rpc_client *c, rpc_cli_locals *l) {
  for (uint32_t i = 0; i < RPC_CLOSE_REQS; i++) {
    int e = sh_future_error(l->f[i]);
    rpc_check(&c->base, sh_future_done(l->f[i]) && e == -ECONNABORTED,
              "a future the close should fail (index, error)", (long)i, e);
    if (e == -ECONNABORTED) atomic_fetch_add(&rpc_aborted, 1);
  }
}

static sh_yield rpc_client_connected(rpc_client *c, sh_stack *st, rpc_cli_locals *l) {
  if (sh_future_failed(l->f[0])) {
    rpc_check(&c->base, false, "connect failed (error, 0)", sh_future_error(l->f[0]), 0);
    rpc_finished(&c->base);
    return sh_return(st, NULL);
  }
  l->ch = sh_future_reply(l->f[0], sh_channel_msg)->ch;
  uint32_t n = c->plan.mode == RPC_CLOSE ? RPC_CLOSE_REQS : c->plan.reqs;
  if (!rpc_ask_all(c, st, l, n)) return sh_throw(st, -ENOMEM);
  if (c->plan.mode != RPC_CLOSE) return sh_suspend(st, RC_ANSWERED);
  /* Two requests reach the server, three wait here; then the close. */
  l->nap = sh_sleep(st, RPC_CLOSE_AFTER_MS);
  if (l->nap == NULL) return sh_throw(st, -ENOMEM);
  return sh_suspend_any(st, RC_NAPPED);
}

static sh_yield rpc_client_notice(sh_actor *self, sh_stack *st) {
  rpc_client *c = (rpc_client *)self;
  rpc_cli_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case SH_START: {
    bool closing = c->plan.mode == RPC_CLOSE;
    sh_channel_opts o = {.handlers = {&rpc_codec}, .nhandlers = 1,
                         .max_future_inflight = closing ? 2 : 8,
                         .match_by_id = c->plan.mode == RPC_BY_ID};
    l->f[0] = sh_tcp_connect(st, &c->plan.at, &o);
    if (l->f[0] == NULL) return sh_throw(st, -ENOMEM);
    return sh_suspend(st, RC_CONNECTED);
  }
  case RC_CONNECTED:
    return rpc_client_connected(c, st, l);
  case RC_ANSWERED:
    rpc_check_answers(c, l);
    sh_channel_close(l->ch);
    break;
  case RC_NAPPED:
    sh_channel_close(l->ch);
    rpc_check_aborted(c, l);
    /* Time for the server's stacks to end into the closed connection. */
    l->nap = sh_sleep(st, RPC_CLOSE_NAP_MS * 2);
    if (l->nap == NULL) return sh_throw(st, -ENOMEM);
    return sh_suspend(st, RC_SETTLED);
  case RC_SETTLED:
    rpc_check(self, sh_future_error(l->nap) == 0, "the client's nap failed (error, 0)",
              sh_future_error(l->nap), 0);
    break;
  }
  rpc_finished(self);
  return sh_return(st, NULL);
}

static void rpc_client_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)self, (void)ch;
  if (ev != SH_CHANNEL_CLOSED) return;
  atomic_fetch_add(&rpc_cli_closed, 1);
  atomic_store(&rpc_cli_close_error, error);
}

static int rpc_client_init(sh_actor *self, void *arg) {
  ((rpc_client *)self)->plan = *(const rpc_plan *)arg;
  return 0;
}

static const sh_actor_class rpc_client_class = {
    .name = "rpc_client",
    .size = sizeof(rpc_client),
    .locals_size = sizeof(rpc_cli_locals),
    .kind = SH_IO_ACTOR,
    .init = rpc_client_init,
    .notice = rpc_client_notice,
    .channel_event = rpc_client_event,
};

#endif
