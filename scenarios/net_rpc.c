/*
 * Request/response over channels with a codec: length-prefixed frames,
 * decoded next to the head into request and response messages. The
 * client keeps several requests inflight per connection (channel futures);
 * the server handles several at once (channel stacks), each taking a drawn
 * while, with barrier requests among them that must run alone.
 *
 *   net_rpc       server writes results head-of-line (in request order);
 *                 the client matches responses FIFO, so a result written
 *                 out of turn would answer the wrong request
 *   net_rpc_ids   no head-of-line: results leave as they finish; the client
 *                 matches them by id
 * Both end each connection by closing it with requests still inflight on
 * both sides: every future fails once with the close's error, the server's
 * stacks finish into a closed channel, and nothing leaks.
 *   net_rpc_eof   as net_rpc, but the client shuts its write side after its
 *                 requests: the server reads the end of stream while its
 *                 stacks still run, and must write every result before the
 *                 close that follows it
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <stackhouse/net.h>
#include <stackhouse/scenario.h>

#define CONNS 3
#define REQS 16   /* per connection, the checked round */
#define LATE 4    /* per connection, still inflight when it closes */
#define INFLIGHT 4

/* ---- the codec: [u32 length of the rest][u8 kind][u8 barrier][u64 id][u64 v] */

typedef struct rpc {
  sh_msg hdr;
  uint64_t v;
  bool barrier;
} rpc;
typedef rpc rpc_req;
typedef rpc rpc_resp;
SH_MSG_DEFINE(rpc_req, SH_NOTICE, 0);
SH_MSG_DEFINE(rpc_resp, SH_REPLY, 0);

#define BODY 18u

static int decode(sh_pctx *c, sh_buf *in) {
  /* Bounded by the bytes: each turn consumes a frame. */
  while (sh_buf_len(in) >= 4 + BODY) {
    uint8_t f[4 + BODY];
    sh_buf_peek(in, 0, f, sizeof(f));
    uint32_t len;
    memcpy(&len, f, 4);
    if (len != BODY || f[4] > 1) return -EPROTO;
    rpc *m = (rpc *)sh_msg_alloc(f[4] ? &rpc_resp_type : &rpc_req_type);
    if (m == NULL) return -ENOMEM;
    uint64_t id;
    memcpy(&id, f + 6, 8);
    memcpy(&m->v, f + 14, 8);
    m->barrier = f[5] != 0;
    sh_msg_set_id(&m->hdr, id);
    sh_buf_consume(in, sizeof(f));
    int rc = sh_pctx_fire(c, &m->hdr);
    if (rc < 0) return rc;
  }
  return 0;
}

static int encode(sh_pctx *c, sh_msg *m) {
  rpc *r = (rpc *)m;
  uint8_t f[4 + BODY];
  uint32_t len = BODY;
  uint64_t id = sh_msg_id(m);
  memcpy(f, &len, 4);
  f[4] = sh_msg_is(m, &rpc_resp_type);
  f[5] = r->barrier;
  memcpy(f + 6, &id, 8);
  memcpy(f + 14, &r->v, 8);
  sh_msg_free(m);
  return sh_buf_append(sh_pctx_out(c), f, sizeof(f));
}

static const sh_handler codec = {.name = "rpc_codec", .decode = decode, .outbound = encode};

static bool is_barrier(const sh_msg *m) { return ((const rpc *)m)->barrier; }

/* ---- the world --------------------------------------------------------- */

typedef struct world {
  bool by_id;
  bool half_close; /* net_rpc_eof */
  sh_tcp_server *server;
  sh_netaddr at;
  const sh_addr *client;
  atomic_uint left;
  atomic_uint answered, failed_late, server_closed;
} world;

/* ---- the server ---------------------------------------------------------- */

typedef struct srv_conn {
  uint32_t running;     /* stacks of this channel running now */
  bool barrier_running;
  bool closed;          /* the last stack to end frees this */
} srv_conn;

/* A stack of the connection ended; true when the connection is gone too. */
static bool srv_conn_end(srv_conn *sc) {
  sc->running--;
  sc->barrier_running = false;
  if (!sc->closed || sc->running > 0) return false;
  free(sc);
  return true;
}

typedef struct srv_locals {
  sh_future *f;
  srv_conn *sc;
} srv_locals;

static sh_yield server_channel(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  srv_locals *l = sh_stack_locals(st);
  rpc *req = sh_stack_msg_as(st, rpc);
  if (sh_stack_state(st) == SH_START) {
    l->sc = sh_channel_data(sh_stack_channel(st));
    srv_conn *sc = l->sc;
    if (sc == NULL) return sh_throw(st, -ENOMEM); /* its state could not be made */
    sc->running++;
    SH_SCN_CHECK(s, sc->running <= INFLIGHT, "%u requests run at once, more than %u", sc->running,
                 INFLIGHT);
    SH_SCN_CHECK(s, !sc->barrier_running && (!req->barrier || sc->running == 1),
                 "a barrier request ran with others");
    sc->barrier_running = req->barrier;
    /* A drawn while, so that requests finish out of order. */
    l->f = sh_sleep(st, (int64_t)(req->v % 4));
    if (l->f == NULL) {
      srv_conn_end(sc);
      return sh_throw(st, -ENOMEM);
    }
    return sh_suspend(st, 1);
  }
  if (srv_conn_end(l->sc)) return sh_return(st, NULL);
  rpc_resp *r = (rpc_resp *)sh_msg_alloc(&rpc_resp_type);
  if (r == NULL) return sh_throw(st, -ENOMEM);
  r->v = req->v * 2;
  sh_msg_set_id(&r->hdr, sh_msg_id(&req->hdr));
  return sh_return(st, &r->hdr);
}

static void server_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)error;
  world *wd = sh_scn_state(sh_scn_of(self));
  if (ev == SH_CHANNEL_OPEN) sh_channel_set_data(ch, calloc(1, sizeof(srv_conn)));
  if (ev != SH_CHANNEL_CLOSED) return;
  /* Stacks of this channel may still run: their state goes with them. */
  srv_conn *sc = sh_channel_data(ch);
  if (sc != NULL) sc->closed = true;
  if (sc != NULL && sc->running == 0) free(sc);
  atomic_fetch_add(&wd->server_closed, 1);
}

static const sh_actor_class server_class = {
    .name = "rpc_server",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(srv_locals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .channel = server_channel,
    .channel_event = server_event,
};

/* ---- the client ------------------------------------------------------------- */

typedef struct cli_locals {
  sh_channel *ch;
  sh_future *f[REQS + LATE];
  uint64_t v[REQS + LATE];
  sh_future *nap;
} cli_locals;

enum { C_CONNECTED = 1, C_ANSWERED, C_NAPPED };

static sh_future *ask_one(sh_stack *st, sh_scn *s, cli_locals *l, uint32_t i) {
  rpc_req *q = (rpc_req *)sh_msg_alloc(&rpc_req_type);
  if (q == NULL) return NULL;
  l->v[i] = sh_scn_rand(s) >> 4;
  q->v = l->v[i];
  q->barrier = i % 5 == 2;
  sh_msg_set_id(&q->hdr, i);
  return sh_channel_ask(st, l->ch, &q->hdr);
}

static bool ask_range(sh_stack *st, sh_scn *s, cli_locals *l, uint32_t from, uint32_t to) {
  for (uint32_t i = from; i < to; i++)
    if ((l->f[i] = ask_one(st, s, l, i)) == NULL) return false;
  return true;
}

/* A response must be the one to its own request. */
static void check_answer(sh_scn *s, world *wd, cli_locals *l, uint32_t i) {
  if (sh_future_failed(l->f[i])) {
    SH_SCN_CHECK(s, sh_scn_faulty(s), "request %u failed: %d", i, sh_future_error(l->f[i]));
    return;
  }
  rpc *r = sh_future_reply(l->f[i], rpc);
  SH_SCN_CHECK(s, sh_msg_id(&r->hdr) == i && r->v == l->v[i] * 2,
               "request %u got the response to %llu", i, (unsigned long long)sh_msg_id(&r->hdr));
  atomic_fetch_add(&wd->answered, 1);
}

static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  cli_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case SH_START: {
    /* A shutdown ends the write side after the bytes buffered: with the
     * end of stream coming, every request is written at once. */
    sh_channel_opts o = {.handlers = {&codec}, .nhandlers = 1,
                         .max_future_inflight = wd->half_close ? REQS : INFLIGHT,
                         .match_by_id = wd->by_id};
    l->f[0] = sh_tcp_connect(st, &wd->at, &o);
    if (l->f[0] == NULL) return sh_throw(st, -ENOMEM);
    return sh_suspend(st, C_CONNECTED);
  }
  case C_CONNECTED:
    if (sh_future_failed(l->f[0])) break;
    l->ch = sh_future_reply(l->f[0], sh_channel_msg)->ch;
    if (!ask_range(st, s, l, 0, REQS)) return sh_throw(st, -ENOMEM);
    if (wd->half_close) sh_channel_shutdown(l->ch);
    return sh_suspend(st, C_ANSWERED);
  case C_ANSWERED:
    for (uint32_t i = 0; i < REQS; i++) check_answer(s, wd, l, i);
    if (wd->half_close) {
      sh_channel_close(l->ch);
      break;
    }
    /* Requests left inflight, then a close under them. */
    if (!ask_range(st, s, l, REQS, REQS + LATE)) return sh_throw(st, -ENOMEM);
    l->nap = sh_sleep(st, 1);
    if (l->nap == NULL) return sh_throw(st, -ENOMEM);
    return sh_suspend_any(st, C_NAPPED);
  case C_NAPPED:
    /* The close fails what is still inflight at once: this invocation
     * reads every late future (a future is read in the invocation after
     * it completed). */
    sh_channel_close(l->ch);
    for (uint32_t i = REQS; i < REQS + LATE; i++) {
      int e = sh_future_error(l->f[i]);
      if (e == 0) continue; /* answered before the close */
      SH_SCN_CHECK(s, e == -ECONNABORTED || sh_scn_faulty(s), "late request %u: error %d", i, e);
      atomic_fetch_add(&wd->failed_late, 1);
    }
    break;
  }
  sh_scn_count_down(s, sh_actor_system(self), &wd->left);
  return sh_return(st, NULL);
}

static const sh_actor_class client_class = {
    .name = "rpc_client",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(cli_locals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .notice = client_notice,
};

/* ---- the runs ------------------------------------------------------------------ */

static int start(sh_scn *s, sh_system *sys, bool by_id) {
  world *wd = sh_scn_state(s);
  wd->by_id = by_id;
  atomic_store(&wd->left, CONNS);
  sh_channel_opts o = {.handlers = {&codec}, .nhandlers = 1, .max_stack_inflight = INFLIGHT,
                       .stack_barrier = is_barrier, .head_of_line = !by_id};
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  int rc = sh_tcp_serve(sys, &any, &server_class, &(sh_scn_arg){s, 0}, SH_SPAWN_PER_WORKER, &o,
                        &wd->server);
  if (rc == 0) rc = sh_tcp_server_addr(wd->server, &wd->at);
  if (rc == 0) rc = sh_scn_spawn(s, sys, &client_class, 0, 1, &wd->client);
  for (uint32_t i = 0; rc == 0 && i < CONNS; i++) rc = sh_scn_kick_n(wd->client, i);
  return rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *wd = sh_scn_state(s);
  if (!sh_scn_faulty(s))
    SH_SCN_CHECK_EQ(s, atomic_load(&wd->answered), CONNS * REQS, "requests answered");
  if (wd->server == NULL) return;
  sh_tcp_stats ts;
  sh_tcp_server_stats(wd->server, &ts);
  SH_SCN_CHECK_EQ(s, ts.open, 0, "server channels open after shutdown");
}

static int setup_hol(sh_scn *s, sh_system *sys) { return start(s, sys, false); }
static int setup_ids(sh_scn *s, sh_system *sys) { return start(s, sys, true); }
static int setup_eof(sh_scn *s, sh_system *sys) {
  ((world *)sh_scn_state(s))->half_close = true;
  return start(s, sys, false);
}

static const sh_scenario net_rpc = {
    .name = "net_rpc",
    .summary = "requests inflight both ways, head-of-line results matched FIFO, a close under load",
    .flags = SH_SCN_NET,
    .state_size = sizeof(world),
    .setup = setup_hol,
    .verify = verify,
};
SH_SCENARIO(net_rpc);

static const sh_scenario net_rpc_ids = {
    .name = "net_rpc_ids",
    .summary = "requests inflight both ways, results as they finish matched by id, a close",
    .flags = SH_SCN_NET,
    .state_size = sizeof(world),
    .setup = setup_ids,
    .verify = verify,
};
SH_SCENARIO(net_rpc_ids);

static const sh_scenario net_rpc_eof = {
    .name = "net_rpc_eof",
    .summary = "requests then an end of stream: every result is written before the close",
    .flags = SH_SCN_NET,
    .state_size = sizeof(world),
    .setup = setup_eof,
    .verify = verify,
};
SH_SCENARIO(net_rpc_eof);
