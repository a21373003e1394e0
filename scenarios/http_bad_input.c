/*
 * Bad HTTP input, each kind of http.h's list on a connection of its own,
 * among clients that send good requests to the same server:
 *
 *   400  a malformed request line, a header without a colon, a NUL in a
 *        header, header folding, conflicting Content-Length headers, a
 *        bad chunk size
 *   431  a head longer than max_head, more than SH_HTTP_MAX_HEADERS headers
 *   413  a declared body over max_body
 *   501  a transfer coding other than chunked
 *   505  an HTTP version other than 1.0 and 1.1
 * each answered with its status and "Connection: close", then closed by
 * the server; and, keeping the connection (a good request after it is
 * answered 200):
 *   501  a method no route knows
 *   404  a path no route has
 *   405  a path whose routes take other methods (with Allow)
 * and good requests that ask for the close: "Connection: close" (a request
 * pipelined after it is not answered) and HTTP/1.0 without keep-alive,
 * answered 200 with "Connection: close", then closed.
 *
 * Invariant: every bad request gets exactly its status, the good clients
 * are answered in full, the server closes what it must (the workload ends
 * only once it has no connection open).
 */
#include <stdio.h>
#include <string.h>

#include "http_client.h"

#define S(x) x, sizeof(x) - 1
#define GOOD "GET /g HTTP/1.1\r\nHost: h\r\n\r\n"
#define GOODS 2
#define GOOD_REQS 8
#define MAX_HEAD 1024u
#define MAX_BODY 1000u

typedef struct bad_case {
  const char *p;
  size_t n;
  uint16_t status;
  bool keeps; /* the connection stays open: GOOD follows, answered 200 */
} bad_case;

enum { LONG_HEAD, MANY_HEADERS, BUILT };

static const bad_case fixed[] = {
    {S("GET\r\nHost: h\r\n\r\n"), 400, false},
    {S("GET /g HTTP/1.1\r\nHost h\r\n\r\n"), 400, false},
    {S("GET /g HTTP/1.1\r\nHost: h\0x\r\n\r\n"), 400, false},
    {S("GET /g HTTP/1.1\r\nHost: h\r\nX-A: b\r\n c\r\n\r\n"), 400, false},
    {S("POST /g HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n"), 400,
     false},
    {S("POST /g HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), 400, false},
    {S("POST /g HTTP/1.1\r\nHost: h\r\nContent-Length: 5000\r\n\r\n"), 413, false},
    {S("POST /g HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n"), 501, false},
    {S("GET /g HTTP/2.0\r\nHost: h\r\n\r\n"), 505, false},
    {S("BREW /g HTTP/1.1\r\nHost: h\r\n\r\n" GOOD), 501, true},
    {S("GET /nope HTTP/1.1\r\nHost: h\r\n\r\n" GOOD), 404, true},
    {S("DELETE /g HTTP/1.1\r\nHost: h\r\n\r\n" GOOD), 405, true},
    {S("GET /g HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n" GOOD), 200, false},
    {S("GET /g HTTP/1.0\r\n\r\n"), 200, false},
};
#define FIXED (sizeof(fixed) / sizeof(fixed[0]))
#define CONNS (FIXED + BUILT + GOODS)

typedef struct seen {
  uint32_t n;           /* responses */
  uint16_t status[2];   /* the first two */
  bool close[2], allow[2];
} seen;

typedef struct world {
  hc_world w;
  hc_conn conns[CONNS];
  bad_case cases[FIXED + BUILT];
  seen seen[CONNS];
  sh_http_server *server;
  char long_head[MAX_HEAD + 128];
  char many[SH_HTTP_MAX_HEADERS * 16 + 64];
  char goods[GOOD_REQS * sizeof(GOOD)];
} world;

/* ---- the server ---------------------------------------------------------------------- */

static sh_yield answer_g(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_http_reply(st, 200, "text/plain", "g", 1);
}

static const sh_http_route routes[] = {
    {SH_HTTP_M(SH_HTTP_GET) | SH_HTTP_M(SH_HTTP_POST), "/g", answer_g},
    {SH_HTTP_M(SH_HTTP_DELETE), "/del", answer_g},
};

/* ---- the clients ------------------------------------------------------------------------- */

static uint32_t wanted(const world *wd, uint32_t i) {
  if (i >= FIXED + BUILT) return GOOD_REQS;
  return wd->cases[i].keeps ? 2 : 1;
}

static void response(hc_conn *c, const hc_resp *r) {
  world *wd = sh_scn_state(c->s);
  seen *sn = &wd->seen[c->index];
  if (sn->n < 2) {
    sn->status[sn->n] = r->status;
    sn->close[sn->n] = r->close;
    sn->allow[sn->n] = r->allow;
  }
  /* The bad ones that close wait for the server's close. */
  if (++sn->n == wanted(wd, c->index) && (c->index >= FIXED + BUILT || wd->cases[c->index].keeps))
    hc_close(c);
}

static const hc_ops ops = {.chunk = hc_whole, .response = response};

/* ---- the run ------------------------------------------------------------------------------- */

static void build(world *wd) {
  int n = snprintf(wd->long_head, sizeof(wd->long_head), "GET /g HTTP/1.1\r\nX-L: ");
  memset(wd->long_head + n, 'a', MAX_HEAD);
  memcpy(wd->long_head + n + MAX_HEAD, "\r\n\r\n", 4);
  wd->cases[FIXED + LONG_HEAD] = (bad_case){wd->long_head, (size_t)n + MAX_HEAD + 4, 431, false};
  size_t m = (size_t)snprintf(wd->many, sizeof(wd->many), "GET /g HTTP/1.1\r\n");
  for (uint32_t k = 0; k <= SH_HTTP_MAX_HEADERS; k++)
    m += (size_t)snprintf(wd->many + m, sizeof(wd->many) - m, "X-%u: v\r\n", k);
  m += (size_t)snprintf(wd->many + m, sizeof(wd->many) - m, "\r\n");
  wd->cases[FIXED + MANY_HEADERS] = (bad_case){wd->many, m, 431, false};
  for (uint32_t j = 0; j < GOOD_REQS; j++) memcpy(wd->goods + j * (sizeof(GOOD) - 1), GOOD, sizeof(GOOD) - 1);
}

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  memcpy(wd->cases, fixed, sizeof(fixed));
  build(wd);
  for (uint32_t i = 0; i < CONNS; i++) {
    bool bad = i < FIXED + BUILT;
    wd->conns[i] = (hc_conn){.ops = &ops, .out = bad ? wd->cases[i].p : wd->goods,
                             .out_len = bad ? wd->cases[i].n : GOOD_REQS * (sizeof(GOOD) - 1)};
  }
  sh_http_config cfg = {.routes = routes, .nroutes = 2, .max_head = MAX_HEAD,
                        .max_body = MAX_BODY};
  return hc_serve(s, sys, &cfg, &wd->server, &wd->w, wd->conns, CONNS);
}

static void check_case(sh_scn *s, world *wd, uint32_t i) {
  const bad_case *bc = &wd->cases[i];
  const seen *sn = &wd->seen[i];
  bool ok = sn->n == wanted(wd, i) && sn->status[0] == bc->status && sn->close[0] == !bc->keeps &&
            (bc->status != 405 || sn->allow[0]) &&
            (!bc->keeps || (sn->status[1] == 200 && !sn->close[1]));
  SH_SCN_CHECK(s, ok,
               "bad input %u (\"%.20s...\"): %u responses, %u (close %d) then %u (close %d); "
               "want %u, %s",
               i, bc->p, sn->n, sn->status[0], sn->close[0], sn->status[1], sn->close[1],
               bc->status, bc->keeps ? "then 200" : "closed");
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *wd = sh_scn_state(s);
  if (!sh_scn_faulty(s)) {
    for (uint32_t i = 0; i < FIXED + BUILT; i++) check_case(s, wd, i);
    for (uint32_t i = FIXED + BUILT; i < CONNS; i++)
      SH_SCN_CHECK(s, wd->seen[i].n == GOOD_REQS && wd->seen[i].status[0] == 200,
                   "good client %u: %u responses", i, wd->seen[i].n);
  }
}

static const sh_scenario http_bad_input = {
    .name = "http_bad_input",
    .summary = "HTTP bad input: each kind answered with its status (and closed), others served",
    .flags = SH_SCN_NET,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(http_bad_input);
