/*
 * Slow HTTP peers against an HTTP server with an idle timeout T
 * (idle_timeout_ms): the time a connection may take to send a whole
 * request while none of its requests is handled.
 *
 *   in time      writes its head a byte at a time, in T / 4 in all: answered
 *   slowloris    writes its head a byte at a time, in about 5 T: closed
 *                (after a 408, or without a response) at least T after its
 *                connect and before it could finish
 *   idle         one request, answered, then nothing: the server closes it
 *                at least T after the request, at most 1.5 T (and some
 *                slack) after its response
 *   slow handler one request whose handler takes 2 T: not closed, answered
 *   slow reader  four pipelined requests for 64 KB each, far more than the
 *                network holds, read a page at a time with a pause of T / 10
 *                before each read (about 6 T in all; T / 40 on a real
 *                machine, whose socket buffers take it all at once): every
 *                byte arrives (a peer still reading its responses is not
 *                idle, and a close would drop what it asked for)
 *
 * T is 2 s in the simulator (the network's weather, a partition of up to
 * 200 ms, must not make the one in time late) and 400 ms on a real
 * machine.
 */
#include <string.h>

#include "http_client.h"

enum { IN_TIME, SLOWLORIS, IDLE, SLOW_HANDLER, SLOW_READER, CONNS };

#define BIG 65536u
#define BIG_REQS 4

typedef struct peer {
  uint32_t ok, other;  /* responses 200, and any other */
  uint16_t other_status;
  bool other_close;    /* the other one said "Connection: close" */
  bool body_bad;
} peer;

typedef struct world {
  hc_world w;
  hc_conn conns[CONNS];
  peer peers[CONNS];
  int64_t t;           /* the idle timeout */
  sh_http_server *server;
  hc_ops slow_reader;  /* ops[SLOW_READER] with its pause */
  char big[BIG];
} world;

static const char *const scripts[CONNS] = {
    [IN_TIME] = "GET /fast HTTP/1.1\r\nHost: h\r\n\r\n",
    [SLOWLORIS] = "GET /fast HTTP/1.1\r\nHost: h\r\nX-Slow: very slow indeed\r\n\r\n",
    [IDLE] = "GET /fast HTTP/1.1\r\nHost: h\r\n\r\n",
    [SLOW_HANDLER] = "GET /slow HTTP/1.1\r\nHost: h\r\n\r\n",
    /* Four pipelined requests in one literal (parenthesized: clang's
     * -Wstring-concatenation takes a split literal in an array for a
     * missing comma). */
    [SLOW_READER] = ("GET /big HTTP/1.1\r\nHost: h\r\n\r\nGET /big HTTP/1.1\r\nHost: h\r\n\r\n"
                     "GET /big HTTP/1.1\r\nHost: h\r\n\r\nGET /big HTTP/1.1\r\nHost: h\r\n\r\n"),
};

static char big_byte(uint32_t k) { return (char)('a' + k * 7 % 26); }

/* ---- the server ---------------------------------------------------------------------- */

typedef struct handler_locals {
  sh_future *f;
} handler_locals;

static sh_yield answer_fast(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_http_reply(st, 200, "text/plain", "ok", 2);
}

static sh_yield answer_slow(sh_actor *self, sh_stack *st) {
  (void)self;
  world *wd = sh_http_data(st);
  handler_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_sleep(st, 2 * wd->t);
    if (l->f == NULL) return sh_throw(st, -ENOMEM);
    return sh_suspend(st, 1);
  }
  return sh_http_reply(st, 200, "text/plain", "slow", 4);
}

static sh_yield answer_big(sh_actor *self, sh_stack *st) {
  (void)self;
  world *wd = sh_http_data(st);
  return sh_http_reply(st, 200, "text/plain", wd->big, BIG);
}

static const sh_http_route routes[] = {
    {SH_HTTP_M(SH_HTTP_GET), "/fast", answer_fast},
    {SH_HTTP_M(SH_HTTP_GET), "/slow", answer_slow},
    {SH_HTTP_M(SH_HTTP_GET), "/big", answer_big},
};

/* ---- the peers ----------------------------------------------------------------------------- */

static world *world_of(const hc_conn *c) { return sh_scn_state(c->s); }

/* A byte at a time, the whole head taking T / 4 (a loaded machine's
 * timers may stretch it). */
static size_t bytes_in_time(hc_conn *c, int64_t *pause_ms) {
  *pause_ms = world_of(c)->t / 4 / (int64_t)c->out_len;
  return 1;
}

/* A byte at a time, the whole head taking about 5 T. */
static size_t bytes_too_slow(hc_conn *c, int64_t *pause_ms) {
  *pause_ms = 5 * world_of(c)->t / (int64_t)c->out_len;
  return 1;
}

static uint32_t wanted(const hc_conn *c) { return c->index == SLOW_READER ? BIG_REQS : 1; }

static void response(hc_conn *c, const hc_resp *r) {
  peer *p = &world_of(c)->peers[c->index];
  if (r->status != 200) {
    p->other++;
    p->other_status = r->status;
    p->other_close = r->close;
    return;
  }
  p->ok++;
  if (c->index == SLOW_READER) {
    p->body_bad |= r->body_len != BIG || memcmp(r->body, world_of(c)->big, HC_BODY_MAX) != 0;
  }
  /* The idle one waits for the server's close; the others close when done. */
  if (c->index != IDLE && p->ok == wanted(c)) hc_close(c);
}

static const hc_ops ops[CONNS] = {
    [IN_TIME] = {.chunk = bytes_in_time, .response = response},
    [SLOWLORIS] = {.chunk = bytes_too_slow, .response = response},
    [IDLE] = {.chunk = hc_whole, .response = response},
    [SLOW_HANDLER] = {.chunk = hc_whole, .response = response},
    [SLOW_READER] = {.chunk = hc_whole, .response = response, .read_pause_ms = 1},
};

/* ---- the run ---------------------------------------------------------------------------------- */

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  wd->t = sh_scn_simulated(s) ? 2000 : 400;
  for (uint32_t k = 0; k < BIG; k++) wd->big[k] = big_byte(k);
  for (uint32_t i = 0; i < CONNS; i++)
    wd->conns[i] = (hc_conn){.ops = &ops[i], .out = scripts[i], .out_len = strlen(scripts[i])};
  wd->slow_reader = ops[SLOW_READER];
  wd->slow_reader.read_pause_ms = wd->t / (sh_scn_simulated(s) ? 10 : 40);
  wd->conns[SLOW_READER].ops = &wd->slow_reader;
  sh_http_config cfg = {.routes = routes, .nroutes = 3, .locals_size = sizeof(handler_locals),
                        .data = wd, .idle_timeout_ms = wd->t};
  return hc_serve(s, sys, &cfg, &wd->server, &wd->w, wd->conns, CONNS);
}

static void check_answered(sh_scn *s, world *wd, uint32_t i, const char *who) {
  peer *p = &wd->peers[i];
  SH_SCN_CHECK(s, p->ok == wanted(&wd->conns[i]) && p->other == 0 && !p->body_bad,
               "%s: %u responses 200 (want %u), %u others (last %u), a bad body: %d", who, p->ok,
               wanted(&wd->conns[i]), p->other, p->other_status, p->body_bad);
}

static void check_slowloris(sh_scn *s, world *wd) {
  const hc_conn *c = &wd->conns[SLOWLORIS];
  const peer *p = &wd->peers[SLOWLORIS];
  SH_SCN_CHECK(s, p->ok == 0 && (p->other == 0 || (p->other == 1 && p->other_status == 408 &&
                                                   p->other_close)),
               "slowloris: %u responses 200, %u others (last %u, close %d)", p->ok, p->other,
               p->other_status, p->other_close);
  SH_SCN_CHECK(s, c->sent < c->out_len, "slowloris: its whole head was written before a close");
  SH_SCN_CHECK(s, c->t_close - c->t_connect >= wd->t * 9 / 10,
               "slowloris: closed %lld ms after its connect, the timeout is %lld",
               (long long)(c->t_close - c->t_connect), (long long)wd->t);
}

static void check_idle(sh_scn *s, world *wd) {
  const hc_conn *c = &wd->conns[IDLE];
  check_answered(s, wd, IDLE, "idle");
  SH_SCN_CHECK(s, c->error == 0, "idle: closed with error %d", c->error);
  SH_SCN_CHECK(s, c->t_close - c->t_written >= wd->t * 9 / 10,
               "idle: closed %lld ms after its request, the timeout is %lld",
               (long long)(c->t_close - c->t_written), (long long)wd->t);
  SH_SCN_CHECK(s, c->t_close - c->t_response <= wd->t * 5 / 2,
               "idle: closed %lld ms after its response, the timeout is %lld",
               (long long)(c->t_close - c->t_response), (long long)wd->t);
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *wd = sh_scn_state(s);
  if (!sh_scn_faulty(s)) {
    check_answered(s, wd, IN_TIME, "in time");
    check_slowloris(s, wd);
    check_idle(s, wd);
    check_answered(s, wd, SLOW_HANDLER, "slow handler");
    check_answered(s, wd, SLOW_READER, "slow reader");
  }
}

static const sh_scenario http_slow_client = {
    .name = "http_slow_client",
    .summary = "HTTP idle timeout: slow head in time answered, slowloris and idle closed",
    .flags = SH_SCN_NET,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(http_slow_client);
