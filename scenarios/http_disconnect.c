/*
 * HTTP clients that go away mid-request, among clients that do not:
 *
 *   normal       a few pipelined requests, answered in order, then a close
 *   half head    part of a request head (a drawn length), then a close
 *   half body    a head declaring 100 bytes, part of them, then a close
 *   half chunks  a chunked body cut inside a chunk, then a close
 *   unanswered   a whole request whose handler takes a while, then a close
 *                before its response
 *   half close   the same request, then the end of its stream (shutdown):
 *                still answered, then closed by the server
 *   eof in head  part of a head, then the end of its stream: closed by the
 *                server (after a 400 or without a response)
 *
 * Invariant: the normal clients and the half close are answered in full;
 * the server closes its end of every connection soon after the client's
 * (the workload ends only once its stats say none is open); nothing
 * leaks.
 */
#include <stdio.h>
#include <string.h>

#include "http_client.h"

enum { HALF_HEAD, HALF_BODY, HALF_CHUNKS, UNANSWERED, HALF_CLOSE, EOF_IN_HEAD, NORMAL };
#define NORMALS 3
#define CONNS (NORMAL + NORMALS)
#define NORMAL_REQS 6

typedef struct world {
  hc_world w;
  hc_conn conns[CONNS];
  uint32_t ok[CONNS], other[CONNS];
  sh_http_server *server;
  char normal_out[NORMAL_REQS * 40];
} world;

static const char *const scripts[NORMAL] = {
    [HALF_HEAD] = "GET /d HTTP/1.1\r\nHost: h\r\nX-A: b\r\n\r\n",
    [HALF_BODY] = "POST /d HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n"
                  "0123456789012345678901234567890123456789012345678901234567890123456789",
    [HALF_CHUNKS] = "POST /d HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "20\r\n0123456789012345678901234567890",
    [UNANSWERED] = "GET /d?slow HTTP/1.1\r\nHost: h\r\n\r\n",
    [HALF_CLOSE] = "GET /d?slow HTTP/1.1\r\nHost: h\r\n\r\n",
    [EOF_IN_HEAD] = "GET /d HTTP/1.1\r\nHost: h\r\nX-A: b\r\n\r\n",
};

/* ---- the server ---------------------------------------------------------------------- */

static sh_yield answer_d(sh_actor *self, sh_stack *st) {
  (void)self;
  sh_future **f = sh_stack_locals(st);
  sh_http_request *r = sh_http_req(st);
  if (sh_stack_state(st) == SH_START && r->query.len > 0) {
    *f = sh_sleep(st, 5);
    if (*f == NULL) return sh_throw(st, -ENOMEM);
    return sh_suspend(st, 1);
  }
  return sh_http_reply(st, 200, "text/plain", r->target.p, r->target.len);
}

static const sh_http_route routes[] = {{0, "/d", answer_d}};

/* ---- the clients ------------------------------------------------------------------------- */

static void response(hc_conn *c, const hc_resp *r) {
  world *wd = sh_scn_state(c->s);
  if (r->status != 200) {
    wd->other[c->index]++;
    return;
  }
  wd->ok[c->index]++;
  if (c->index >= NORMAL && wd->ok[c->index] == NORMAL_REQS) hc_close(c);
}

static const hc_ops ops[] = {
    {.chunk = hc_whole, .after = HC_CLOSE, .response = response},
    {.chunk = hc_whole, .after = HC_SHUTDOWN, .response = response},
    {.chunk = hc_whole, .after = HC_KEEP, .response = response},
};

static const hc_ops *ops_of(uint32_t i) {
  if (i == HALF_CLOSE || i == EOF_IN_HEAD) return &ops[1];
  return i >= NORMAL ? &ops[2] : &ops[0];
}

/* ---- the run ------------------------------------------------------------------------------- */

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  size_t n = 0;
  for (uint32_t j = 0; j < NORMAL_REQS; j++)
    n += (size_t)snprintf(wd->normal_out + n, sizeof(wd->normal_out) - n,
                          "GET /d%s HTTP/1.1\r\nHost: h\r\n\r\n", j % 2 ? "?slow" : "");
  for (uint32_t i = 0; i < CONNS; i++) {
    hc_conn *c = &wd->conns[i];
    *c = (hc_conn){.ops = ops_of(i), .out = wd->normal_out, .out_len = n};
    if (i >= NORMAL) continue;
    c->out = scripts[i];
    c->out_len = strlen(scripts[i]);
    /* Cut short where the seed says (the head's end at the most). */
    if (i == HALF_HEAD || i == EOF_IN_HEAD)
      c->out_len = 1 + sh_scn_rand(s) % (strstr(c->out, "\r\n\r\n") + 3 - c->out);
  }
  sh_http_config cfg = {.routes = routes, .nroutes = 1, .locals_size = sizeof(sh_future *)};
  return hc_serve(s, sys, &cfg, &wd->server, &wd->w, wd->conns, CONNS);
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *wd = sh_scn_state(s);
  if (!sh_scn_faulty(s)) {
    for (uint32_t i = NORMAL; i < CONNS; i++)
      SH_SCN_CHECK(s, wd->ok[i] == NORMAL_REQS && wd->other[i] == 0,
                   "normal client %u: %u of %u answered 200, %u otherwise", i, wd->ok[i],
                   NORMAL_REQS, wd->other[i]);
    SH_SCN_CHECK(s, wd->ok[HALF_CLOSE] == 1 && wd->other[HALF_CLOSE] == 0,
                 "half close: %u answered 200, %u otherwise", wd->ok[HALF_CLOSE],
                 wd->other[HALF_CLOSE]);
    SH_SCN_CHECK(s, wd->ok[EOF_IN_HEAD] == 0 && wd->other[EOF_IN_HEAD] <= 1,
                 "eof in head: %u answered 200, %u otherwise", wd->ok[EOF_IN_HEAD],
                 wd->other[EOF_IN_HEAD]);
    /* A connection its client closed at once may be gone before its accept. */
    uint64_t n = wd->w.stats.connections;
    SH_SCN_CHECK(s, n >= NORMALS + 1 && n <= CONNS, "%llu connections accepted of %u",
                 (unsigned long long)n, CONNS);
  }
}

static const sh_scenario http_disconnect = {
    .name = "http_disconnect",
    .summary = "HTTP clients gone mid-head, mid-body, before the response: the rest served",
    .flags = SH_SCN_NET,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(http_disconnect);
