/*
 * HTTP pipelining, end to end: an HTTP server of two connection actors
 * answers /n with a body naming the request (its method, its query, the
 * body it read); a few clients each write many requests back to back on
 * one connection, GETs, POSTs with a Content-Length body and POSTs with a
 * chunked body, some of whose handlers sleep (so that later ones finish
 * first). Each client writes its stream in chunks cut at a point inside
 * every request that moves by one byte from request to request (and with
 * the seed), some requests a byte at a time.
 *
 * Invariant: on each connection the responses come back complete and in
 * request order, each exactly once (a response names its request), well
 * framed (status line, Content-Length, Date, Server). A connection reset
 * (sh/net/reset) may cut the stream: what came before the reset must be
 * responses to a prefix of the requests, the response cut short a prefix
 * of the next one; the client connects again and goes on from the first
 * request it has no response to. Without faults every request is
 * answered, and after shutdown the server has no connection open.
 */
#include <stdio.h>
#include <string.h>

#include "http_client.h"

#define CLIENTS 4
#define REQS 24          /* per client */
#define OUT_MAX 4096u
#define RECONNECTS 64    /* per client, at most */
#define RESP_MAX 160u

typedef struct stream {
  char out[OUT_MAX];
  uint32_t start[REQS + 1]; /* each request's offset in out, and the end */
  uint32_t cut[REQS];       /* a chunk ends at start[j] + cut[j] */
  uint32_t next;            /* the first request without its response */
  uint32_t chunks;          /* chunks written on this connection */
  uint32_t reconnects;
} stream;

typedef struct world {
  hc_world w;
  hc_conn conns[CLIENTS];
  stream streams[CLIENTS];
  sh_http_server *server;
  uint32_t answered;
} world;

/* ---- the requests and what answers them --------------------------------------------- */

static bool is_post(uint32_t j) { return j % 3 != 0; }
static bool is_chunked(uint32_t j) { return j % 3 == 2; }
static bool sleeps(uint32_t j) { return j % 4 == 3; }

/* The body of request j of client i (POSTs), n bytes. */
static uint32_t body_of(uint32_t i, uint32_t j, char *b) {
  uint32_t n = 1 + (i * 5 + j * 3) % 23;
  for (uint32_t k = 0; k < n; k++) b[k] = (char)('a' + (i * 31 + j * 7 + k) % 26);
  return n;
}

static int query_of(uint32_t i, uint32_t j, char *q, size_t size) {
  return snprintf(q, size, "c%ur%u%s", i, j, sleeps(j) ? "s" : "");
}

/* Request j of client i into out; its length. */
static uint32_t request(uint32_t i, uint32_t j, char *out, size_t size) {
  char q[32], b[32];
  query_of(i, j, q, sizeof(q));
  uint32_t n = body_of(i, j, b);
  int len;
  if (!is_post(j))
    len = snprintf(out, size, "GET /n?%s HTTP/1.1\r\nHost: h\r\n\r\n", q);
  else if (!is_chunked(j))
    len = snprintf(out, size, "POST /n?%s HTTP/1.1\r\nHost: h\r\nContent-Length: %u\r\n\r\n%.*s",
                   q, n, (int)n, b);
  else if (n / 2 == 0) /* a zero-size chunk would end the body: one chunk */
    len = snprintf(out, size,
                   "POST /n?%s HTTP/1.1\r\nTransfer-Encoding: chunked\r\nHost: h\r\n\r\n"
                   "%x\r\n%.*s\r\n0\r\n\r\n", q, n, (int)n, b);
  else /* two chunks, sizes in lower and upper case hex */
    len = snprintf(out, size,
                   "POST /n?%s HTTP/1.1\r\nTransfer-Encoding: chunked\r\nHost: h\r\n\r\n"
                   "%x\r\n%.*s\r\n%X\r\n%.*s\r\n0\r\n\r\n",
                   q, n / 2, (int)(n / 2), b, n - n / 2, (int)(n - n / 2), b + n / 2);
  return (uint32_t)len;
}

/* The body of the response to request j of client i; its length. */
static uint32_t expected(uint32_t i, uint32_t j, char *out, size_t size) {
  char q[32], b[32];
  query_of(i, j, q, sizeof(q));
  uint32_t n = is_post(j) ? body_of(i, j, b) : 0;
  return (uint32_t)snprintf(out, size, "%s %s %.*s", is_post(j) ? "POST" : "GET", q, (int)n, b);
}

/* ---- the server ---------------------------------------------------------------------- */

typedef struct handler_locals {
  sh_future *f;
} handler_locals;

static sh_yield answer_n(sh_actor *self, sh_stack *st) {
  (void)self;
  sh_http_request *r = sh_http_req(st);
  handler_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START && r->query.len > 0 && r->query.p[r->query.len - 1] == 's') {
    l->f = sh_sleep(st, 1);
    if (l->f == NULL) return sh_throw(st, -ENOMEM);
    return sh_suspend(st, 1);
  }
  char b[64], out[RESP_MAX];
  size_t n = sh_buf_peek(&r->body, 0, b, sizeof(b));
  int len = snprintf(out, sizeof(out), "%.*s %.*s %.*s", (int)r->method_name.len,
                     r->method_name.p, (int)r->query.len, r->query.p, (int)n, b);
  return sh_http_reply(st, 200, "text/plain", out, (size_t)len);
}

static const sh_http_route routes[] = {
    {SH_HTTP_M(SH_HTTP_GET) | SH_HTTP_M(SH_HTTP_POST), "/n", answer_n},
};

/* ---- the clients ----------------------------------------------------------------------- */

/* Chunks end at each request's cut point; every other chunk comes after a
 * pause, so that the server reads it apart from the one before; a request
 * in eight goes a byte at a time. */
static size_t chunk(hc_conn *c, int64_t *pause_ms) {
  stream *sm = c->user;
  uint32_t j = 0;
  while (j < REQS && sm->start[j] + sm->cut[j] <= c->sent) j++;
  size_t end = j < REQS ? sm->start[j] + sm->cut[j] : c->out_len;
  for (uint32_t k = 0; k < REQS; k++)
    if (k % 8 == 5 && sm->start[k] <= c->sent && c->sent < sm->start[k + 1]) end = c->sent + 1;
  *pause_ms = sm->chunks++ % 2;
  return end - c->sent;
}

static void response(hc_conn *c, const hc_resp *r) {
  world *wd = sh_scn_state(c->s);
  stream *sm = c->user;
  char want[RESP_MAX];
  uint32_t n = expected(c->index, sm->next, want, sizeof(want));
  if (hc_in_order(c, r, &sm->next, REQS, 200, want, n)) wd->answered++;
}

static bool closed(hc_conn *c, int error) {
  stream *sm = c->user;
  if (sm->next == REQS) return false;
  char want[RESP_MAX];
  uint32_t n = expected(c->index, sm->next, want, sizeof(want));
  HC_STRICT(c->s, hc_partial_matches(c, 200, want, n),
            "client %u, request %u: the response cut short is not a prefix of its own", c->index,
            sm->next);
  SH_SCN_CHECK(c->s, sh_scn_faulty(c->s), "client %u closed (error %d) with %u of %u answered",
               c->index, error, sm->next, REQS);
  if (!sh_scn_faulty(c->s) || ++sm->reconnects > RECONNECTS) return false;
  c->resume = sm->start[sm->next];
  sm->chunks = 0;
  return true;
}

static const hc_ops ops = {.chunk = chunk, .after = HC_KEEP, .response = response, .closed = closed};

/* ---- the run ---------------------------------------------------------------------------- */

static void make_stream(world *wd, uint32_t i, uint64_t seed) {
  stream *sm = &wd->streams[i];
  uint32_t off = 0;
  for (uint32_t j = 0; j < REQS; j++) {
    sm->start[j] = off;
    uint32_t len = request(i, j, sm->out + off, OUT_MAX - off);
    /* The cut moves by one byte from request to request, client to client
     * and seed to seed: over the seeds, every split point of each request. */
    sm->cut[j] = (uint32_t)((seed + i * REQS + j) % len);
    off += len;
  }
  sm->start[REQS] = off;
  wd->conns[i] = (hc_conn){.ops = &ops, .out = sm->out, .out_len = off, .user = sm};
}

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  for (uint32_t i = 0; i < CLIENTS; i++) make_stream(wd, i, sh_scn_seed(s));
  sh_http_config cfg = {.routes = routes, .nroutes = 1, .locals_size = sizeof(handler_locals),
                        .instances = 2};
  return hc_serve(s, sys, &cfg, &wd->server, &wd->w, wd->conns, CLIENTS);
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *wd = sh_scn_state(s);
  if (!sh_scn_faulty(s))
    SH_SCN_CHECK_EQ(s, wd->answered, CLIENTS * REQS, "requests answered");
}

static const sh_scenario http_pipeline = {
    .name = "http_pipeline",
    .summary = "HTTP requests pipelined, split at every point: responses whole, in order, once",
    .flags = SH_SCN_NET,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(http_pipeline);
