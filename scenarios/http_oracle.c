/*
 * The conformance scenario's generator and reference model
 * (http_oracle.h). A request is drawn as a description (req), written as
 * bytes (http_oracle_write.c), and judged by the model from the
 * description and what the writer says it wrote (head_info: the head's
 * length, its target, its headers as written): the model knows the
 * server only through its configuration (ho_server) and the route table
 * the scenario serves (ho_routes, model_route).
 */
#include "http_oracle_req.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

const char *const ho_method_names[HO_NMETHODS] = {
    "GET",   "HEAD", "POST", "PUT",   "DELETE", "CONNECT", "OPTIONS",
    "TRACE", "PATCH", "BREW", "get", "LABEL",  "SEARCH",  "CHECKIN"};

uint32_t ho_sum(uint32_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 16777619u;
  return h;
}

uint16_t ho_allow_bits(const char *v) {
  uint16_t bits = 0;
  char tok[16];
  /* Tokens separated by commas and spaces; each at most 15 bytes. */
  for (const char *p = v; *p != '\0';) {
    size_t n = strcspn(p, ", ");
    bool known = false;
    if (n > 0 && n < sizeof(tok)) {
      memcpy(tok, p, n);
      tok[n] = '\0';
      for (uint8_t m = 0; m <= HO_PATCH; m++)
        if (strcmp(tok, ho_method_names[m]) == 0) bits |= (uint16_t)(1u << m), known = true;
    }
    if (n > 0 && !known) bits |= 0x8000;
    p += n + strspn(p + n, ", ");
  }
  return bits;
}

#define M(m) SH_HTTP_M(SH_HTTP_##m)
uint32_t ho_routes(const ho_server *srv, sh_http_route *out, sh_stack_fn echo, sh_stack_fn hold) {
  uint32_t n = 0;
  out[n++] = (sh_http_route){M(GET), "/g", echo};
  out[n++] = (sh_http_route){M(POST), "/p", echo};
  out[n++] = (sh_http_route){M(GET) | M(POST), "/b", echo};
  out[n++] = (sh_http_route){M(GET), "/h", hold};
  out[n++] = (sh_http_route){M(PUT) | M(TRACE) | M(CONNECT), "/m", echo};
  if (srv->any_route) out[n++] = (sh_http_route){0, "/w/*", echo};
  if (srv->star_route) out[n++] = (sh_http_route){M(OPTIONS), "*", echo};
  return n;
}
#undef M

/* ---- the draws ---------------------------------------------------------------------- */

static uint64_t body_len_of(sh_scn *s, const ho_server *srv) {
  switch (sh_scn_below(s, 8)) {
  case 0: return sh_scn_below(s, 16);
  case 1: return srv->max_body - 1;
  case 2: return srv->max_body;
  case 3: return srv->max_body + 1;
  default: return sh_scn_below(s, srv->max_body + 1);
  }
}

/* A bad request is not a HEAD (its error response would have no body to
 * frame by), HTTP/1.1, one fault and no padding. */
static void make_bad(sh_scn *s, req *r, bool star) {
  /* Methods for "*" that are not OPTIONS (RFC 9112 3.2.4: OPTIONS only). */
  static const uint8_t not_options[] = {HO_GET, HO_POST, HO_PUT, HO_DELETE, HO_PATCH, HO_TRACE};
  r->bad = star ? B_TARGET : (uint8_t)(1 + sh_scn_below(s, NBAD - 1));
  r->pad = PAD_NONE;
  r->version = 11;
  r->method = HO_GET;
  r->form = T_ORIGIN;
  if (r->path >= P_ROOT) r->path = P_G, r->no_query = false; /* the paths of other forms */
  if (r->bad == B_BAD_CHUNK || r->bad == B_OVERFLOW || r->bad == B_HUGE) {
    r->method = HO_POST;
    r->framing = F_CHUNKED;
  }
  if (r->bad == B_BAD_CL) r->framing = F_LEN;
  if (r->bad == B_GZIP) r->framing = F_NONE;
  if (r->bad == B_TARGET) r->bad_target = star ? 0 : (uint8_t)sh_scn_below(s, NBAD_TARGETS);
  if (r->bad == B_BAD_VERSION) r->bad_target = (uint8_t)sh_scn_below(s, NBAD_VERSIONS);
  if (r->bad == B_TARGET && r->bad_target == 0)
    r->method = not_options[sh_scn_below(s, sizeof(not_options))];
}

/* A calm connection's request: nothing that closes the connection. */
static void tame(const ho_server *srv, req *r) {
  if (r->conn == 1 || r->conn == 2 || (r->version == 10 && r->conn == 0)) r->conn = 3;
  if (r->pad == PAD_HEAD_OVER || r->pad == PAD_HDRS_OVER) r->pad--;
  if (r->pad >= PAD_INLINE_AT && SH_HTTP_INLINE_HEAD + 1 > srv->max_head) r->pad = PAD_NONE;
  if (r->body_len > srv->max_body) r->body_len = srv->max_body;
  r->bad = B_OK;
}

/* The target's form; "*" is OPTIONS' alone. */
static void draw_target(sh_scn *s, req *r) {
  uint64_t f = sh_scn_below(s, 8);
  r->form = f < 5 ? T_ORIGIN : f < 7 ? T_ABSOLUTE : T_ASTERISK;
  if (r->form == T_ABSOLUTE && sh_scn_below(s, 4) == 0) {
    r->path = P_ROOT;
    r->no_query = !r->sleep && sh_scn_below(s, 2);
  }
  if (r->form == T_ASTERISK) r->method = HO_OPTIONS, r->path = P_STAR, r->sleep = false;
}

/* What the handler is asked to make of its response (http_echo.h). */
static void draw_shape(sh_scn *s, req *r) {
  static const uint16_t asked[] = {200, 404, 431, 299, 599, 99, 418};
  ho_shape *sh = &r->shape;
  r->shaped = sh_scn_below(s, 4) == 0;
  if (!r->shaped) return;
  /* Lengths below, at and past the encoder's 2048-byte staging buffer,
   * and past a response's 512-byte inline body. */
  static const uint32_t ct_base[] = {0, 1400, 1900, 2030, 2100}, ct_span[] = {1, 200, 149, 40, 300};
  uint64_t k = sh_scn_below(s, 5);
  sh->ctype_len = k == 0 ? 0 : ct_base[k] + (uint32_t)sh_scn_below(s, ct_span[k]);
  static const uint32_t fill_base[] = {0, 400, 2000, 4000}, fill_span[] = {1, 200, 100, 200};
  k = sh_scn_below(s, 4);
  sh->fill = fill_base[k] + (k ? (uint32_t)sh_scn_below(s, fill_span[k]) : 0);
  static const uint32_t xl_base[] = {0, 1, 500, 2048}, xl_span[] = {1, 100, 20, 300};
  k = sh_scn_below(s, 4);
  sh->xlong = xl_base[k] + (k ? (uint32_t)sh_scn_below(s, xl_span[k]) : 0);
  sh->reason_of = sh_scn_below(s, 2) ? 0 : asked[sh_scn_below(s, sizeof(asked) / sizeof(asked[0]))];
  sh->bad_line = sh_scn_below(s, 2) ? 0 : (uint8_t)(1 + sh_scn_below(s, HO_BAD_LINES));
}

static void draw_req(sh_scn *s, const ho_server *srv, bool calm, req *r) {
  /* Mostly what a route takes, so that pipelines are mostly handled. */
  static const uint8_t methods[16] = {HO_GET,     HO_GET,     HO_GET,   HO_HEAD,
                                      HO_POST,    HO_POST,    HO_PUT,   HO_PATCH,
                                      HO_DELETE,  HO_OPTIONS, HO_TRACE, HO_CONNECT,
                                      HO_BREW,    HO_GET,     HO_PUT,   HO_LOWER_GET};
  uint64_t path = sh_scn_below(s, 14);
  *r = (req){.method = methods[sh_scn_below(s, 16)],
             .path = (uint8_t)(path < 10 ? path % NROUTED : path - NROUTED),
             .version = sh_scn_below(s, 8) == 7 ? 10 : 11,
             .conn = (uint8_t)(sh_scn_below(s, 4) != 3 ? 0 : sh_scn_below(s, 5)),
             .sleep = sh_scn_below(s, 4) == 3,
             .lead = (uint8_t)(sh_scn_below(s, 4) == 3 ? 1 + sh_scn_below(s, 3) : 0)};
  /* The unknown methods share a slot. */
  if (r->method == HO_LOWER_GET) r->method = (uint8_t)(HO_LOWER_GET + sh_scn_below(s, 4));
  draw_target(s, r);
  uint64_t f = sh_scn_below(s, r->method == HO_POST ? 4 : 8);
  r->framing = f == 0 || (f == 1 && r->method == HO_POST) ? F_LEN : f == 2 ? F_CHUNKED : F_NONE;
  if (r->method == HO_HEAD) r->framing = F_NONE;
  /* RFC 9112 6.1: Transfer-Encoding in HTTP/1.0 is faulty framing. */
  if (r->version == 10 && r->framing == F_CHUNKED) r->framing = F_LEN;
  r->body_len = body_len_of(s, srv);
  r->body_seed = sh_scn_rand(s);
  r->cl_zeros = sh_scn_below(s, 4) == 3 ? (uint8_t)(1 + sh_scn_below(s, 3)) : 0;
  r->pad = sh_scn_below(s, 4) == 3 ? (uint8_t)(1 + sh_scn_below(s, NPAD - 1)) : PAD_NONE;
  if (r->method == HO_HEAD && r->pad != PAD_NONE) r->method = HO_GET;
  ho_draw_extras(s, r);
  draw_shape(s, r);
  if (sh_scn_below(s, 8) == 7) make_bad(s, r, false);
  /* A third of the asterisk-forms with another method than OPTIONS. */
  else if (r->form == T_ASTERISK && sh_scn_below(s, 3) == 0) make_bad(s, r, true);
  if (calm) tame(srv, r);
  if (r->framing == F_NONE) r->body_len = 0;
}

/* ---- the model ---------------------------------------------------------------------- */

/* The methods routes take on r's path (ho_routes' table): a route taking
 * GET takes HEAD (docs/http.md, "Routes"); "*" is a prefix of every path. */
static uint16_t path_methods(const ho_server *srv, const req *r) {
  const uint16_t get = (1u << HO_GET) | (1u << HO_HEAD), post = 1u << HO_POST;
  const uint16_t m = (1u << HO_PUT) | (1u << HO_TRACE) | (1u << HO_CONNECT);
  uint16_t a = r->path == P_G ? get : r->path == P_P ? post : r->path == P_B ? get | post
                                                            : r->path == P_M ? m : 0;
  return srv->star_route ? (uint16_t)(a | 1u << HO_OPTIONS) : a;
}

static void model_route(const ho_server *srv, const req *r, ho_expect *e) {
  uint16_t allowed = path_methods(srv, r);
  bool known = r->method <= HO_PATCH;
  if (r->path == P_W && srv->any_route) e->status = 200;
  /* RFC 9110 15.6.2: 501 for a method the server supports for no resource. */
  else if (!known && !srv->any_route) e->status = 501;
  else if (allowed == 0) e->status = 404;
  else if (known && (allowed & (1u << r->method))) e->status = 200;
  else e->status = 405, e->allow = allowed;
}

static uint16_t bad_status(const req *r, uint16_t *alt) {
  static const uint16_t st[NBAD] = {[B_NO_COLON] = 400, [B_BAD_CL] = 400, [B_NO_HOST] = 400,
                                    [B_BAD_CHUNK] = 400, [B_OVERFLOW] = 400, [B_HUGE] = 413,
                                    [B_VERSION] = 505, [B_GZIP] = 501, [B_TARGET] = 400,
                                    [B_BARE_CR] = 400, [B_BAD_VERSION] = 400,
                                    /* RFC 9112 3.2: more than one Host is a 400. */
                                    [B_TWO_HOSTS] = 400};
  /* A size past 64 bits is a bad size or a body past max_body: either. */
  if (r->bad == B_OVERFLOW) *alt = 413;
  return st[r->bad];
}

/* A field value without its leading and trailing SP and HTAB (RFC 9110 5.5). */
static sh_http_str trimmed(sh_http_str v) {
  while (v.len > 0 && (v.p[0] == ' ' || v.p[0] == '\t')) v.p++, v.len--;
  while (v.len > 0 && (v.p[v.len - 1] == ' ' || v.p[v.len - 1] == '\t')) v.len--;
  return v;
}

static bool same_name(sh_http_str a, sh_http_str b) {
  if (a.len != b.len) return false;
  for (size_t i = 0; i < a.len; i++) {
    char x = a.p[i], y = b.p[i];
    if (x >= 'A' && x <= 'Z') x = (char)(x + 32);
    if (y >= 'A' && y <= 'Z') y = (char)(y + 32);
    if (x != y) return false;
  }
  return true;
}

/* The standard reason phrases of the statuses a handler is asked about
 * (RFC 9110 15; 431: RFC 6585); "" for one without (418 is unused). */
static const char *reason_of(uint16_t st) {
  return st == 200 ? "OK" : st == 404 ? "Not Found" : st == 431 ? "Request Header Fields Too Large"
                                                                 : "";
}

/* What the headers and lookups of the handler's body must say. */
static void model_headers(const req *r, const head_info *h, ho_echo_in *in) {
  in->nheaders = h->nheaders;
  for (uint32_t i = 0; i < h->nheaders; i++) {
    in->name[i] = h->name[i];
    in->value[i] = trimmed(h->value[i]);
  }
  in->past_rc = 1; /* an index past the last fails */
  in->nlooks = r->nlooks;
  /* The first header of the name, whatever the case of either (http.h). */
  for (uint32_t k = 0; k < r->nlooks; k++) {
    in->look[k] = h->look[k];
    for (uint32_t i = 0; i < h->nheaders && !in->found[k]; i++)
      if (same_name(h->name[i], h->look[k])) in->found[k] = true, in->found_value[k] = in->value[i];
  }
}

/* The handler's body and its extra headers for r (its 200). */
static void model_echo(const req *r, const head_info *h, uint32_t j, uint32_t sum, ho_expect *e) {
  ho_echo_in in = {0};
  char path[16];
  const char *m = ho_method_names[r->method];
  in.method_name = (sh_http_str){m, strlen(m)};
  in.method_enum = r->method <= HO_PATCH ? m : "OTHER";
  in.target = h->target;
  /* origin-form: absolute-path ["?" query]; absolute-form: its path, "/"
   * when it has none (RFC 9112 3.3); asterisk-form: "*". */
  int pl = snprintf(path, sizeof(path), "%s", ho_paths[r->path]);
  if (r->path == P_W) pl += snprintf(path + pl, sizeof(path) - (size_t)pl, "%u", j);
  in.path = (sh_http_str){path, (size_t)pl};
  const sh_http_str *t = &h->target;
  const char *q = r->form == T_ASTERISK || r->no_query ? NULL : memchr(t->p, '?', t->len);
  in.query = q ? (sh_http_str){q + 1, t->len - (size_t)(q + 1 - t->p)} : (sh_http_str){"", 0};
  in.version = r->version;
  in.keep_alive = !e->close;
  in.body_len = r->body_len;
  in.body_sum = sum;
  model_headers(r, h, &in);
  in.fill = r->shaped ? r->shape.fill : 0;
  if (r->shaped && r->shape.reason_of) {
    in.reason_of = r->shape.reason_of;
    in.reason = reason_of(in.reason_of);
  }
  in.bad_header = r->shaped && r->shape.bad_line;
  in.bad_header_rc = -EINVAL;
  char body[HO_ECHO_BUF];
  size_t n = ho_echo_format(&in, body, sizeof(body));
  e->echo_len = (uint32_t)n;
  e->echo_sum = ho_sum(HO_SUM0, body, n);
  snprintf(e->echo, sizeof(e->echo), "%.*s", (int)n, body);
  const char *ct = ho_ctype(r->shaped ? r->shape.ctype_len : 0);
  e->xsum = ho_sum(ho_sum(ho_sum(HO_SUM0, "Content-Type: ", 14), ct, strlen(ct)), "\n", 1);
  e->xlen = 15 + (uint32_t)strlen(ct);
  if (!r->shaped || r->shape.xlong == 0) return;
  e->xsum = ho_sum(ho_sum(e->xsum, "X-Long: ", 8), ho_xlong(r->shape.xlong), r->shape.xlong);
  e->xsum = ho_sum(e->xsum, "\n", 1);
  e->xlen += 9 + r->shape.xlong;
}

static void model(const ho_server *srv, const req *r, const head_info *h, uint32_t j, uint32_t sum,
                  ho_expect *e) {
  *e = (ho_expect){.xsum = HO_SUM0};
  if (r->bad != B_OK) e->status = bad_status(r, &e->alt);
  else if (h->len > srv->max_head || h->nheaders > SH_HTTP_MAX_HEADERS) e->status = 431;
  else if (r->framing != F_NONE && r->body_len > srv->max_body) e->status = 413;
  if (e->status != 0) {
    e->fatal = e->close = true;
    return;
  }
  bool close_tok = r->conn == 1 || r->conn == 2, ka_tok = r->conn == 3 || r->conn == 4;
  e->close = r->version == 11 ? close_tok : !ka_tok;
  e->keep_alive = r->version == 10 && ka_tok;
  e->head = r->method == HO_HEAD;
  model_route(srv, r, e);
  if (e->status != 200) return;
  e->handler = true;
  model_echo(r, h, j, sum, e);
}

/* ---- a connection ------------------------------------------------------------------- */

static void body_bytes(const req *r, char *b, uint64_t n) {
  uint64_t x = r->body_seed | 1;
  for (uint64_t i = 0; i < n; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    b[i] = (char)('a' + (x >> 59) % 26);
  }
}

/* Writes request j of r and returns what it is owed. */
static void one_request(sh_scn *s, const ho_server *srv, const req *r, uint32_t conn, uint32_t j,
                        ho_stream *st, ho_expect *e) {
  char body[HO_BODY_MAX];
  out_buf o = {st->out, st->len, sizeof(st->out)};
  head_info h;
  ho_write_head(s, r, conn, j, srv, &o, &h);
  uint64_t n = r->body_len < sizeof(body) ? r->body_len : 0;
  body_bytes(r, body, n);
  if (r->framing == F_LEN && r->bad == B_OK) ho_put(&o, "%.*s", (int)n, body);
  if (r->framing == F_CHUNKED) ho_write_chunked(s, r, body, &o);
  model(srv, r, &h, j, ho_sum(HO_SUM0, body, n), e);
  st->len = (uint32_t)o.len;
}

/* A GET of the holding route, which answers as the others do. */
static void hold_request(uint32_t conn, ho_stream *st, ho_expect *e) {
  out_buf o = {st->out, st->len, sizeof(st->out)};
  req r = {.method = HO_GET, .path = P_HOLD, .version = 11, .form = T_ORIGIN};
  head_info h = {.nheaders = 1};
  ho_put(&o, "GET /h?c%ur0 HTTP/1.1\r\nHost: h\r\n\r\n", conn);
  const char *t = st->out + st->len + 4;
  h.target = (sh_http_str){t, strcspn(t, " ")};
  h.name[0] = (sh_http_str){t + h.target.len + 11, 4};
  h.value[0] = (sh_http_str){t + h.target.len + 16, 2};
  *e = (ho_expect){.status = 200, .handler = true};
  model_echo(&r, &h, 0, HO_SUM0, e);
  st->len = (uint32_t)o.len;
}
void ho_build(sh_scn *s, const ho_server *srv, uint32_t conn, bool hold, ho_stream *st) {
  uint32_t nreqs = 1 + (uint32_t)sh_scn_below(s, HO_REQS);
  /* Half the connections are calm: their pipelines run whole. */
  bool open = true, calm = sh_scn_below(s, 2) == 0;
  st->len = st->nreqs = st->nexp = st->handled = st->misses = st->start[0] = 0;
  st->server_closes = false;
  /* Room for the longest request: a head of max_head + 1, or of 65
   * headers, or of SH_HTTP_INLINE_HEAD + 1, a body of max_body + 1 in
   * chunks with their zeros and extensions. */
  size_t longest = srv->max_head > SH_HTTP_INLINE_HEAD ? srv->max_head : SH_HTTP_INLINE_HEAD;
  size_t room = longest + 1024 + 2 * srv->max_body;
  for (uint32_t j = 0; j < nreqs && sizeof(st->out) - st->len > room; j++) {
    ho_expect e;
    req r;
    if (j == 0 && hold) hold_request(conn, st, &e);
    else draw_req(s, srv, calm, &r), one_request(s, srv, &r, conn, j, st, &e);
    st->start[++st->nreqs] = st->len;
    if (!open) continue; /* written, never answered */
    st->exp[st->nexp++] = e;
    if (e.status == 200) st->handled++;
    else if (!e.fatal) st->misses++;
    if (e.close) open = false, st->server_closes = true;
  }
}
