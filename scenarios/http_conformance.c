/*
 * HTTP conformance against a reference model: a differential oracle, not
 * hand-picked asserts. Each run draws a server (max_head, max_body,
 * max_connections, max_inflight, its actors, whether an any-method route
 * is in its table) and a few waves of connections, each connection a
 * pipeline of requests drawn by http_oracle.c, written in drawn chunks
 * and pauses. The model (http_oracle.h) says what every request is owed.
 *
 * The handlers answer a body naming the request (method, target,
 * version, keep-alive, body length and checksum), so a response to
 * another request, or one that lost a body byte, is seen.
 *
 * Waves: the next one connects once the last has ended and the server has
 * no connection open. A wave larger than max_connections begins each
 * connection with a GET of "/h", whose handler holds until every
 * connection of the wave is held or refused: so exactly (size -
 * max_connections) of them must be refused (503 and a close), whichever
 * they are.
 *
 * Invariant: every response is the model's, in request order, up to where
 * the model says the server closes, and nothing after; the server closes
 * there (never sooner, never by its idle timeout); the server's stats
 * (connections, refused, requests, bad, timeouts) are the model's.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_client.h"
#include "http_echo.h"
#include "http_oracle.h"

#define CONNS_MAX 8
#define WAVES_MAX 3
#define WAVE_MAX 4       /* connections of a wave, at most */
#define NCUTS 24         /* drawn write chunks per connection; then the rest at once */
#define POLL_MAX 3000    /* 1 ms polls of a gate or of the server's open count, at most */

typedef struct conn_state {
  ho_stream st;
  uint32_t wave;
  uint32_t next;       /* responses seen */
  bool refused;        /* its first response was max_connections' 503 */
  bool done;           /* ended where the model says */
  uint32_t cuts;       /* write chunks taken */
  uint16_t cut_len[NCUTS];
  uint8_t cut_pause_ms[NCUTS];
} conn_state;

typedef struct world {
  hc_world w;
  hc_conn conns[CONNS_MAX];
  conn_state cs[CONNS_MAX];
  sh_http_server *server;
  ho_server srv;
  sh_http_route routes[8];
  uint32_t max_conns;
  uint32_t nwaves, first[WAVES_MAX + 1]; /* wave k: connections first[k] .. first[k + 1] - 1 */
  bool gated[WAVES_MAX];
  uint32_t refused[WAVES_MAX];           /* seen by the clients */
  atomic_uint wave, held, ended;         /* the wave running; its held, its ended */
  uint64_t refused_base;                 /* the server's refused as the wave began */
  const sh_addr *conductor;
} world;

/* ---- the server ------------------------------------------------------------------------- */

typedef struct handler_locals {
  sh_future *f;
  uint32_t polls;
} handler_locals;

/* The server's enum, by its own names (http.h). */
static const char *const enum_names[] = {"OTHER", "GET", "HEAD", "POST",  "PUT",
                                         "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"};

/* The decimal at v[*at] (past spaces), *at past it; 0 if none. */
static uint32_t next_num(sh_http_str v, size_t *at) {
  uint32_t x = 0;
  while (*at < v.len && v.p[*at] == ' ') ++*at;
  for (; *at < v.len && v.p[*at] >= '0' && v.p[*at] <= '9' && x < 100000; ++*at)
    x = x * 10 + (uint32_t)(v.p[*at] - '0');
  return x;
}

/* What the request asks of its response (http_echo.h), kept in bounds. */
static void shape_of(const sh_http_request *r, ho_shape *sh) {
  sh_http_str v;
  size_t at = 0;
  *sh = (ho_shape){0};
  if (!sh_http_header(r, "x-shape", &v)) return;
  sh->ctype_len = next_num(v, &at);
  sh->fill = next_num(v, &at);
  sh->xlong = next_num(v, &at);
  sh->reason_of = (uint16_t)next_num(v, &at);
  sh->bad_line = (uint8_t)next_num(v, &at);
  if (sh->ctype_len > HO_CTYPE_MAX || sh->fill > HO_FILL_MAX || sh->xlong > HO_XLONG_MAX ||
      sh->bad_line > HO_BAD_LINES)
    *sh = (ho_shape){0};
}

/* The names the request asks to look up ("X-Look", separated by commas),
 * and what sh_http_header says of each. */
static void lookups(const sh_http_request *r, ho_echo_in *in) {
  sh_http_str v;
  if (!sh_http_header(r, "x-look", &v)) return;
  /* Bounded: each turn passes a comma, or ends at the value's end. */
  for (size_t at = 0; at <= v.len && in->nlooks < HO_LOOKS;) {
    const char *c = memchr(v.p + at, ',', v.len - at);
    size_t end = c != NULL ? (size_t)(c - v.p) : v.len, n = end - at;
    char name[HO_LOOK_NAME + 1];
    if (n > HO_LOOK_NAME) n = HO_LOOK_NAME;
    memcpy(name, v.p + at, n);
    name[n] = '\0';
    uint32_t k = in->nlooks++;
    in->look[k] = (sh_http_str){v.p + at, end - at};
    in->found[k] = sh_http_header(r, name, &in->found_value[k]);
    at = end + 1;
  }
}

/* What the request API says of r: its fields, every header by index, the
 * lookups it asked for. */
static void describe(const sh_http_request *r, ho_echo_in *in) {
  assert(r->method <= SH_HTTP_PATCH && r->nheaders <= SH_HTTP_MAX_HEADERS);
  uint32_t sum = HO_SUM0;
  const uint8_t *q;
  size_t n;
  for (size_t off = 0; (n = sh_buf_span(&r->body, off, &q)) > 0; off += n) sum = ho_sum(sum, q, n);
  *in = (ho_echo_in){.method_name = r->method_name, .method_enum = enum_names[r->method],
                     .target = r->target, .path = r->path, .query = r->query,
                     .version = r->version, .keep_alive = r->keep_alive,
                     .body_len = sh_buf_len(&r->body), .body_sum = sum, .nheaders = r->nheaders};
  for (uint32_t i = 0; i < r->nheaders; i++)
    if (sh_http_header_at(r, i, &in->name[i], &in->value[i]) != 0)
      in->name[i] = in->value[i] = (sh_http_str){"(failed)", 8};
  sh_http_str none;
  in->past_rc = sh_http_header_at(r, r->nheaders, &none, &none) < 0;
  lookups(r, in);
}

/* The response: the body, the Content-Type and X-Long asked for; a bad
 * header line tried (refused: nothing of it may show). NULL: no memory. */
static sh_http_response *respond(const ho_shape *sh, const char *body, size_t n) {
  sh_http_response *resp = sh_http_response_new(200, ho_ctype(sh->ctype_len), body, n);
  if (resp == NULL) return NULL;
  int rc = sh->bad_line ? sh_http_response_header(resp, ho_bad_names[sh->bad_line],
                                                  ho_bad_values[sh->bad_line]) : 0;
  if (rc != -ENOMEM && sh->xlong > 0)
    rc = sh_http_response_header(resp, "X-Long", ho_xlong(sh->xlong));
  if (rc == -ENOMEM) sh_msg_free(&resp->hdr), resp = NULL;
  return resp;
}

/* Answers a body naming the request and what the API says of it
 * (http_echo.h), in the shape the request asked for. */
static sh_yield echo(sh_actor *self, sh_stack *st) {
  (void)self;
  sh_http_request *r = sh_http_req(st);
  handler_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START && r->target.len > 2 &&
      memcmp(r->target.p + r->target.len - 2, "&s", 2) == 0) {
    l->f = sh_sleep(st, 1); /* later requests may finish first */
    if (l->f == NULL) return sh_throw(st, -ENOMEM);
    return sh_suspend(st, 1);
  }
  ho_echo_in in;
  ho_shape sh;
  describe(r, &in);
  shape_of(r, &sh);
  in.fill = sh.fill;
  if (sh.reason_of != 0) in.reason_of = sh.reason_of, in.reason = sh_http_reason(sh.reason_of);
  if (sh.bad_line != 0) {
    /* On a response of its own: the one sent must not have it either. */
    sh_http_response *t = sh_http_response_new(200, NULL, NULL, 0);
    if (t == NULL) return sh_throw(st, -ENOMEM);
    in.bad_header = true;
    in.bad_header_rc =
        sh_http_response_header(t, ho_bad_names[sh.bad_line], ho_bad_values[sh.bad_line]);
    sh_msg_free(&t->hdr);
  }
  char *body = malloc(HO_ECHO_BUF);
  if (body == NULL) return sh_throw(st, -ENOMEM);
  size_t n = ho_echo_format(&in, body, HO_ECHO_BUF);
  if (sh.bad_line == 0 && sh.xlong == 0) {
    sh_yield y = sh_http_reply(st, 200, ho_ctype(sh.ctype_len), body, n);
    free(body);
    return y;
  }
  sh_http_response *resp = respond(&sh, body, n);
  free(body);
  if (resp == NULL) return sh_throw(st, -ENOMEM);
  return sh_return(st, &resp->hdr);
}

/* Holds until every connection of the running wave is held or refused. */
static sh_yield hold(sh_actor *self, sh_stack *st) {
  world *wd = sh_http_data(st);
  handler_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) l->polls = 0, atomic_fetch_add(&wd->held, 1);
  uint32_t k = atomic_load(&wd->wave);
  sh_http_stats hs = {0};
  sh_http_server_stats(wd->server, &hs);
  uint64_t in = atomic_load(&wd->held) + (hs.refused - wd->refused_base);
  if (in < wd->first[k + 1] - wd->first[k] && l->polls++ < POLL_MAX) {
    l->f = sh_sleep(st, 1);
    if (l->f == NULL) return sh_throw(st, -ENOMEM);
    return sh_suspend(st, 2);
  }
  return echo(self, st);
}

/* ---- the waves --------------------------------------------------------------------------- */

/* Starts wave n once the server has no connection open. */
static sh_yield conductor(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  handler_locals *l = sh_stack_locals(st);
  uint32_t k = sh_scn_go_n(st);
  if (sh_stack_state(st) == SH_START) l->polls = 0;
  sh_http_stats hs = {0};
  sh_http_server_stats(wd->server, &hs);
  if (hs.open > 0 && l->polls++ < POLL_MAX) {
    l->f = sh_sleep(st, 1);
    if (l->f == NULL) return sh_throw(st, -ENOMEM);
    return sh_suspend(st, 1);
  }
  SH_SCN_CHECK(s, hs.open == 0, "wave %u: %llu connections of the last still open", k,
               (unsigned long long)hs.open);
  wd->refused_base = hs.refused;
  atomic_store(&wd->held, 0);
  atomic_store(&wd->ended, 0);
  atomic_store(&wd->wave, k);
  for (uint32_t i = wd->first[k]; i < wd->first[k + 1]; i++)
    if (hc_connect(&wd->w, i) != 0)
      SH_SCN_CHECK(s, sh_scn_faulty(s), "connection %u not started", i);
  return sh_return(st, NULL);
}

static const sh_actor_class conductor_class = {
    .name = "http_conformance_waves",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(handler_locals),
    .init = sh_scn_actor_init,
    .notice = conductor,
};

/* ---- the clients -------------------------------------------------------------------------- */

static size_t chunk(hc_conn *c, int64_t *pause_ms) {
  conn_state *cs = c->user;
  size_t left = c->out_len - c->sent;
  *pause_ms = 0;
  if (cs->cuts >= NCUTS) return left;
  *pause_ms = cs->cut_pause_ms[cs->cuts];
  size_t n = cs->cut_len[cs->cuts++];
  return n == 0 || n > left ? left : n;
}

static bool bodiless(hc_conn *c) {
  conn_state *cs = c->user;
  return !cs->refused && cs->next < cs->st.nexp && cs->st.exp[cs->next].head;
}

/* A handler's 200 as the model says: its body (length, sum, first bytes;
 * for a HEAD, the length declared and no bytes) and its extra headers. */
static bool handler_ok(const ho_expect *e, const hc_resp *r, size_t *diff) {
  size_t kept = r->body_len < HC_BODY_MAX ? r->body_len : HC_BODY_MAX;
  size_t shown = e->echo_len < HO_ECHO_MAX - 1 ? e->echo_len : HO_ECHO_MAX - 1;
  size_t n = kept < shown ? kept : shown;
  for (*diff = 0; *diff < n && r->body[*diff] == e->echo[*diff];) ++*diff;
  bool body_ok = e->head ? r->body_len == 0 && r->declared == e->echo_len
                         : r->body_len == e->echo_len && r->body_sum == e->echo_sum && *diff == n;
  return e->handler && body_ok && r->xlen == e->xlen && r->xsum == e->xsum;
}

/* Response r against the model's e; false (and a failed check) on a mismatch. */
static bool matches(hc_conn *c, const conn_state *cs, const ho_expect *e, const hc_resp *r) {
  const char *rq = cs->st.out + cs->st.start[cs->next];
  rq += strspn(rq, "\r\n"); /* past empty lines before the request line */
  int rql = (int)strcspn(rq, "\r");
  uint32_t got_len = e->head ? r->declared : r->body_len;
  size_t d = 0;
  /* A 200 is a handler's: one for another request is no fault's doing. */
  if (!HC_STRICT(c->s, r->status != 200 || handler_ok(e, r, &d),
                 "connection %u, request %u (%.*s): got 200 (%u bytes, sum %08x, headers %u/%08x) "
                 "\"%.*s\", want %u (%u bytes, sum %08x, headers %u/%08x) \"%.*s\" (from byte %zu)",
                 c->index, cs->next, rql < 60 ? rql : 60, rq, got_len, r->body_sum, r->xlen,
                 r->xsum, (int)(r->body_len < d + 60 ? r->body_len - d : 60), r->body + d,
                 e->status, e->echo_len, e->echo_sum, e->xlen, e->xsum, 60, e->echo + d, d))
    return false;
  bool ok = (r->status == e->status || (e->alt != 0 && r->status == e->alt)) &&
            r->close == e->close && r->keep_alive == e->keep_alive &&
            (r->status != 405 || ho_allow_bits(r->allow_v) == e->allow) &&
            (!e->head || r->body_len == 0) &&
            (r->status == 200 || (r->xlen == e->xlen && r->xsum == e->xsum));
  return SH_SCN_CHECK(c->s, ok,
                      "connection %u, request %u (%.*s): got %u%s%s Allow \"%s\" body %u/%u "
                      "headers %u; want %u%s%s Allow bits %#x%s headers %u",
                      c->index, cs->next, rql, rq, r->status, r->close ? " close" : "",
                      r->keep_alive ? " keep-alive" : "", r->allow_v, r->body_len, r->declared,
                      r->xlen, e->status, e->close ? " close" : "",
                      e->keep_alive ? " keep-alive" : "", e->allow, e->head ? " no body" : "",
                      e->xlen);
}

static void response(hc_conn *c, const hc_resp *r) {
  world *wd = sh_scn_state(c->s);
  conn_state *cs = c->user;
  if (cs->next == 0 && !cs->refused && wd->gated[cs->wave] && r->status == 503 && r->close) {
    cs->refused = true; /* max_connections': the server closes next */
    wd->refused[cs->wave]++;
    return;
  }
  if (!HC_STRICT(c->s, !cs->refused && cs->next < cs->st.nexp,
                 "connection %u: a response (%u) past the close point, %u owed%s", c->index,
                 r->status, cs->st.nexp, cs->refused ? " (refused)" : "") ||
      !matches(c, cs, &cs->st.exp[cs->next], r)) {
    hc_close(c);
    return;
  }
  if (++cs->next < cs->st.nexp || cs->st.server_closes) return;
  cs->done = true;
  hc_close(c);
}

static bool closed(hc_conn *c, int error) {
  world *wd = sh_scn_state(c->s);
  conn_state *cs = c->user;
  if (!cs->refused && !cs->done) {
    cs->done = cs->next == cs->st.nexp && cs->st.server_closes;
    SH_SCN_CHECK(c->s, cs->done, "connection %u closed (error %d) after %u of %u responses",
                 c->index, error, cs->next, cs->st.nexp);
  }
  uint32_t k = cs->wave;
  if (atomic_fetch_add(&wd->ended, 1) + 1 == wd->first[k + 1] - wd->first[k] && k + 1 < wd->nwaves)
    if (sh_scn_kick_n(wd->conductor, k + 1) != 0)
      SH_SCN_CHECK(c->s, sh_scn_faulty(c->s), "wave %u not started", k + 1);
  return false;
}

static const hc_ops ops = {.chunk = chunk, .after = HC_KEEP, .response = response,
                           .bodiless = bodiless, .closed = closed};

/* ---- the run -------------------------------------------------------------------------------- */

static void draw_cuts(sh_scn *s, conn_state *cs) {
  for (uint32_t k = 0; k < NCUTS; k++) {
    uint64_t kind = sh_scn_below(s, 4);
    cs->cut_len[k] = (uint16_t)(kind == 0 ? 0 : kind == 1 ? 1 : 1 + sh_scn_below(s, 300));
    cs->cut_pause_ms[k] = (uint8_t)(sh_scn_below(s, 4) == 3 ? 1 + sh_scn_below(s, 2) : 0);
  }
}

static void draw_waves(sh_scn *s, world *wd) {
  uint32_t n = 0, waves = 1 + (uint32_t)sh_scn_below(s, WAVES_MAX);
  for (wd->nwaves = 0; wd->nwaves < waves && n < CONNS_MAX; wd->nwaves++) {
    uint32_t k = wd->nwaves, size = 1 + (uint32_t)sh_scn_below(s, WAVE_MAX);
    if (size > CONNS_MAX - n) size = CONNS_MAX - n;
    wd->first[k] = n;
    wd->gated[k] = wd->max_conns != 0 && size > wd->max_conns;
    for (uint32_t i = n; i < n + size; i++) {
      conn_state *cs = &wd->cs[i];
      cs->wave = k;
      ho_build(s, &wd->srv, i, wd->gated[k], &cs->st);
      draw_cuts(s, cs);
      wd->conns[i] = (hc_conn){.ops = &ops, .out = cs->st.out, .out_len = cs->st.len, .user = cs};
    }
    n += size;
  }
  wd->first[wd->nwaves] = n;
}

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  /* max_head mostly small, else around the inline head (1280) or up to 4 KiB. */
  uint64_t mh = sh_scn_below(s, 4);
  wd->srv = (ho_server){.max_head = (uint32_t)(mh < 2   ? 256 + sh_scn_below(s, 769)
                                               : mh == 2 ? 1180 + sh_scn_below(s, 200)
                                                         : 1024 + sh_scn_below(s, 3073)),
                        .max_body = 1 + sh_scn_below(s, 256), .any_route = sh_scn_below(s, 2),
                        .star_route = sh_scn_below(s, 2)};
  wd->max_conns = sh_scn_below(s, 2) ? 0 : 1 + (uint32_t)sh_scn_below(s, 3);
  uint32_t instances = 1 + (uint32_t)sh_scn_below(s, 2);
  uint32_t inflight = sh_scn_below(s, 3) == 0 ? 1 + (uint32_t)sh_scn_below(s, 2) : 0;
  draw_waves(s, wd);
  uint32_t nroutes = ho_routes(&wd->srv, wd->routes, echo, hold);
  assert(nroutes <= sizeof(wd->routes) / sizeof(wd->routes[0]));
  sh_http_config cfg = {.routes = wd->routes, .nroutes = nroutes,
                        .locals_size = sizeof(handler_locals), .data = wd,
                        .instances = instances, .max_connections = wd->max_conns,
                        .idle_timeout_ms = 2000, .max_head = wd->srv.max_head,
                        .max_body = wd->srv.max_body, .max_inflight = inflight};
  wd->w.manual = true;
  int rc = hc_serve(s, sys, &cfg, &wd->server, &wd->w, wd->conns, wd->first[wd->nwaves]);
  if (rc == 0) rc = sh_scn_spawn(s, sys, &conductor_class, 0, 1, &wd->conductor);
  return rc != 0 ? rc : sh_scn_kick_n(wd->conductor, 0);
}

static void verify_stats(sh_scn *s, const world *wd, uint64_t refused) {
  uint64_t handled = 0, misses = 0, fatal = 0, n = wd->first[wd->nwaves];
  for (uint32_t i = 0; i < n; i++) {
    const conn_state *cs = &wd->cs[i];
    if (cs->refused) continue;
    handled += cs->st.handled;
    misses += cs->st.misses;
    for (uint32_t j = 0; j < cs->st.nexp; j++) fatal += cs->st.exp[j].fatal;
  }
  const sh_http_stats *hs = &wd->w.stats;
  SH_SCN_CHECK(s, wd->w.drained, "the server's stats were never read");
  SH_SCN_CHECK_EQ(s, hs->connections, n, "connections accepted");
  SH_SCN_CHECK_EQ(s, hs->refused, refused, "connections refused");
  /* Routing misses are fired to the actors too, which answer them. */
  SH_SCN_CHECK_EQ(s, hs->requests, handled + misses, "requests fired (handled or missed)");
  SH_SCN_CHECK_EQ(s, hs->bad, fatal + misses, "requests answered bad (framing and routing)");
  SH_SCN_CHECK_EQ(s, hs->timeouts, 0, "connections closed by the idle timeout");
  SH_SCN_CHECK_EQ(s, hs->open, 0, "connections open");
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *wd = sh_scn_state(s);
  if (sh_scn_faulty(s)) return;
  uint64_t refused = 0;
  for (uint32_t k = 0; k < wd->nwaves; k++) {
    uint32_t size = wd->first[k + 1] - wd->first[k];
    uint32_t want = wd->gated[k] ? size - wd->max_conns : 0;
    SH_SCN_CHECK(s, wd->refused[k] == want, "wave %u: %u of %u connections refused, want %u", k,
                 wd->refused[k], size, want);
    refused += wd->refused[k];
  }
  for (uint32_t i = 0; i < wd->first[wd->nwaves]; i++)
    SH_SCN_CHECK(s, wd->cs[i].done || wd->cs[i].refused, "connection %u: %u of %u responses", i,
                 wd->cs[i].next, wd->cs[i].st.nexp);
  verify_stats(s, wd, refused);
}

static const sh_scenario http_conformance = {
    .name = "http_conformance",
    .summary = "HTTP pipelines drawn at random against a reference model of RFC 9112 and http.md",
    .flags = SH_SCN_NET,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(http_conformance);
