/*
 * The conformance scenario's generator and reference model
 * (http_oracle.h). A request is drawn as a description (req), written as
 * bytes, and judged by the model from the description and the bytes'
 * head length: the model knows the server only through its configuration
 * (ho_server) and the route table the scenario serves (model_route).
 */
#include "http_oracle.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *const ho_method_names[HO_NMETHODS] = {"GET", "HEAD", "POST", "DELETE", "BREW"};

/* Paths: routed for GET, for POST, for both, under "/w/ *" (routed only
 * when the table has it), then unrouted ones close to routed ones. */
enum { P_G, P_P, P_B, P_W, NPATHS = 8 };
static const char *const paths[NPATHS] = {"/g", "/p", "/b", "/w/x", "/gx", "/G", "/w", "/nope"};

/* Connection header values: none, then two spellings of each token. */
static const char *const conn_values[] = {NULL, "close", "Close", "keep-alive", "Keep-Alive"};
#define NCONN_VALUES (sizeof(conn_values) / sizeof(conn_values[0]))

/* One kind of bad input per bad request; B_OK: none. */
enum { B_OK, B_NO_COLON, B_BAD_CL, B_NO_HOST, B_BAD_CHUNK, B_OVERFLOW, B_HUGE, B_VERSION, B_GZIP,
       NBAD };
/* Heads at a limit and one past it. */
enum { PAD_NONE, PAD_HEAD_AT, PAD_HEAD_OVER, PAD_HDRS_AT, PAD_HDRS_OVER, NPAD };
enum { F_NONE, F_LEN, F_CHUNKED };

typedef struct req {
  uint8_t method, path, conn, bad, pad, framing, version, cl_zeros;
  bool sleep;
  uint64_t body_len, body_seed;
} req;

/* What writing a head found out, for the model. */
typedef struct head_info {
  uint32_t len;      /* bytes, request line to the empty line, CRLFs included */
  uint32_t nheaders;
} head_info;

uint32_t ho_sum(uint32_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 16777619u;
  return h;
}

size_t ho_echo(char *out, size_t size, const char *method, size_t mlen, const char *target,
               size_t tlen, unsigned version, bool keep_alive, uint64_t body_len, uint32_t sum) {
  int n = snprintf(out, size, "%.*s %.*s v%u ka%d n%llu s%08x", (int)mlen, method, (int)tlen,
                   target, version, keep_alive, (unsigned long long)body_len, sum);
  return n < 0 ? 0 : (size_t)n < size ? (size_t)n : size - 1;
}

uint8_t ho_allow_bits(const char *v) {
  uint8_t bits = 0;
  char tok[16];
  /* Tokens separated by commas and spaces; each at most 15 bytes. */
  for (const char *p = v; *p != '\0';) {
    size_t n = strcspn(p, ", ");
    if (n > 0 && n < sizeof(tok)) {
      memcpy(tok, p, n);
      tok[n] = '\0';
      for (uint8_t m = 0; m < HO_NMETHODS; m++)
        if (strcmp(tok, ho_method_names[m]) == 0) bits |= (uint8_t)(1u << m);
    } else if (n > 0) {
      bits |= 0x80; /* a token no method has */
    }
    p += n + strspn(p + n, ", ");
  }
  return bits;
}

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

/* A bad request is GET or POST (a HEAD's error response would have no body
 * to frame by), HTTP/1.1, one fault and no padding. */
static void make_bad(sh_scn *s, req *r) {
  r->bad = (uint8_t)(1 + sh_scn_below(s, NBAD - 1));
  r->pad = PAD_NONE;
  r->version = 11;
  r->method = HO_GET;
  if (r->bad == B_BAD_CHUNK || r->bad == B_OVERFLOW || r->bad == B_HUGE) {
    r->method = HO_POST;
    r->framing = F_CHUNKED;
  }
  if (r->bad == B_BAD_CL) r->framing = F_LEN;
  if (r->bad == B_GZIP) r->framing = F_NONE;
}

/* A calm connection's request: nothing that closes the connection. */
static void tame(const ho_server *srv, req *r) {
  if (r->conn == 1 || r->conn == 2 || (r->version == 10 && r->conn == 0)) r->conn = 3;
  if (r->pad == PAD_HEAD_OVER || r->pad == PAD_HDRS_OVER) r->pad--;
  if (r->body_len > srv->max_body) r->body_len = srv->max_body;
  r->bad = B_OK;
}

static void draw_req(sh_scn *s, const ho_server *srv, bool calm, req *r) {
  /* Mostly what a route takes, so that pipelines are mostly handled. */
  static const uint8_t methods[8] = {HO_GET, HO_GET, HO_GET,    HO_HEAD,
                                     HO_POST, HO_POST, HO_DELETE, HO_BREW};
  uint64_t path = sh_scn_below(s, 12);
  *r = (req){.method = methods[sh_scn_below(s, 8)],
             .path = (uint8_t)(path < 8 ? path % 4 : path - 4),
             .version = sh_scn_below(s, 8) == 7 ? 10 : 11,
             .conn = (uint8_t)(sh_scn_below(s, 4) != 3 ? 0 : sh_scn_below(s, NCONN_VALUES)),
             .sleep = sh_scn_below(s, 4) == 3};
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
  if (sh_scn_below(s, 8) == 7) make_bad(s, r);
  if (calm) tame(srv, r);
  if (r->framing == F_NONE) r->body_len = 0;
}

/* ---- the bytes ------------------------------------------------------------------------ */

typedef struct out_buf {
  char *p;
  size_t len, size;
} out_buf;

__attribute__((format(printf, 2, 3))) static void put(out_buf *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(o->p + o->len, o->size - o->len, fmt, ap);
  va_end(ap);
  if (n > 0) o->len += (size_t)n < o->size - o->len ? (size_t)n : o->size - o->len - 1;
}

static void body_bytes(const req *r, char *b, uint64_t n) {
  uint64_t x = r->body_seed | 1;
  for (uint64_t i = 0; i < n; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    b[i] = (char)('a' + (x >> 59) % 26);
  }
}

static void request_line(const req *r, uint32_t conn, uint32_t j, out_buf *o) {
  put(o, "%s %s", ho_method_names[r->method], paths[r->path]);
  if (r->path == P_W) put(o, "%u", j);
  put(o, "?c%ur%u%s HTTP/1.%c\r\n", conn, j, r->sleep ? "&s" : "",
      r->bad == B_VERSION ? '2' : r->version == 10 ? '0' : '1');
}

/* The head of r (its target names connection conn, request j). */
static head_info write_head(const req *r, uint32_t conn, uint32_t j, const ho_server *srv,
                            out_buf *o) {
  size_t at = o->len;
  head_info h = {0};
  request_line(r, conn, j, o);
  if (r->bad != B_NO_HOST) put(o, "Host: h\r\n"), h.nheaders++;
  if (r->conn != 0) put(o, "Connection: %s\r\n", conn_values[r->conn]), h.nheaders++;
  if (r->bad == B_BAD_CL) put(o, "Content-Length: 1x\r\n"), h.nheaders++;
  else if (r->framing == F_LEN)
    put(o, "Content-Length: %.*s%llu\r\n", r->cl_zeros, "000", (unsigned long long)r->body_len),
        h.nheaders++;
  if (r->bad == B_GZIP) put(o, "Transfer-Encoding: gzip\r\n"), h.nheaders++;
  if (r->framing == F_CHUNKED) put(o, "Transfer-Encoding: chunked\r\n"), h.nheaders++;
  if (r->bad == B_NO_COLON) put(o, "X-Bad header\r\n"), h.nheaders++;
  size_t len = o->len - at + 2; /* with the empty line */
  size_t target = r->pad == PAD_HEAD_AT ? srv->max_head : srv->max_head + 1;
  if ((r->pad == PAD_HEAD_AT || r->pad == PAD_HEAD_OVER) && target >= len + 10) {
    size_t k = target - len - 9; /* "X-Pad: " k bytes "\r\n" */
    put(o, "X-Pad: ");
    for (size_t i = 0; i < k; i++) put(o, "a");
    put(o, "\r\n");
    h.nheaders++;
  }
  uint32_t want = r->pad == PAD_HDRS_AT ? SH_HTTP_MAX_HEADERS : SH_HTTP_MAX_HEADERS + 1;
  for (uint32_t k = 0; (r->pad == PAD_HDRS_AT || r->pad == PAD_HDRS_OVER) && h.nheaders < want;
       k++)
    put(o, "X-%u: v\r\n", k), h.nheaders++;
  put(o, "\r\n");
  h.len = (uint32_t)(o->len - at);
  return h;
}

/* A chunk size (leading zeros, either case) and maybe an extension. Up
 * to HO_SIZE_DIGITS digits in all: RFC 9112 7.1 allows any number
 * (1*HEXDIG), the value alone may be too large. */
#define HO_SIZE_DIGITS 24
static void chunk_size(sh_scn *s, out_buf *o, uint64_t size) {
  int digits = 1;
  for (uint64_t v = size; v > 15; v >>= 4) digits++;
  uint64_t zeros = sh_scn_below(s, 4) == 3 ? 1 + sh_scn_below(s, HO_SIZE_DIGITS - digits) : 0;
  for (uint64_t i = 0; i < zeros; i++) put(o, "0");
  put(o, sh_scn_below(s, 2) ? "%llX" : "%llx", (unsigned long long)size);
  static const char *const exts[] = {"", "", "", ";a", ";a=b", ";a=\"x;y\"", ";a;b=c"};
  put(o, "%s\r\n", exts[sh_scn_below(s, sizeof(exts) / sizeof(exts[0]))]);
}

static void write_chunked(sh_scn *s, const req *r, const char *body, out_buf *o) {
  static const char *const bad_sizes[] = {[B_BAD_CHUNK] = "zz", [B_OVERFLOW] = "10000000000000000",
                                          [B_HUGE] = "FFFFFFFFFFFFFFFF"};
  /* Other bad requests (a bad head) keep a good chunked body. */
  if (r->bad == B_BAD_CHUNK || r->bad == B_OVERFLOW || r->bad == B_HUGE) {
    put(o, "%s\r\nabc\r\n0\r\n\r\n", bad_sizes[r->bad]);
    return;
  }
  uint64_t off = 0, parts = 1 + sh_scn_below(s, 4);
  /* Each chunk takes at least a byte; the last of `parts` takes the rest. */
  for (uint64_t p = 0; p < parts && off < r->body_len; p++) {
    uint64_t n = p + 1 == parts ? r->body_len - off : 1 + sh_scn_below(s, r->body_len - off);
    chunk_size(s, o, n);
    put(o, "%.*s\r\n", (int)n, body + off);
    off += n;
  }
  chunk_size(s, o, 0);
  if (sh_scn_below(s, 3) == 2) put(o, "X-T: v\r\n");
  put(o, "\r\n");
}

/* ---- the model ---------------------------------------------------------------------- */

/* The routes the scenario serves: GET "/g", POST "/p", GET and POST "/b",
 * GET "/h", and, with any_route, any method under "/w/". A route taking
 * GET takes HEAD (docs/http.md, "Routes"). */
static uint8_t path_methods(const req *r) {
  const uint8_t get = (1u << HO_GET) | (1u << HO_HEAD), post = 1u << HO_POST;
  return r->path == P_G ? get : r->path == P_P ? post : r->path == P_B ? get | post : 0;
}

static void model_route(const ho_server *srv, const req *r, ho_expect *e) {
  uint8_t allowed = path_methods(r);
  if (r->path == P_W && srv->any_route) e->status = 200;
  /* RFC 9110 15.6.2: 501 for a method the server supports for no resource. */
  else if (r->method == HO_BREW && !srv->any_route) e->status = 501;
  else if (allowed == 0) e->status = 404;
  else if (allowed & (1u << r->method)) e->status = 200;
  else e->status = 405, e->allow = allowed;
}

static uint16_t bad_status(const req *r, uint16_t *alt) {
  static const uint16_t st[NBAD] = {[B_NO_COLON] = 400, [B_BAD_CL] = 400, [B_NO_HOST] = 400,
                                    [B_BAD_CHUNK] = 400, [B_OVERFLOW] = 400, [B_HUGE] = 413,
                                    [B_VERSION] = 505, [B_GZIP] = 501};
  /* A size past 64 bits is a bad size or a body past max_body: either. */
  if (r->bad == B_OVERFLOW) *alt = 413;
  return st[r->bad];
}

static void model(const ho_server *srv, const req *r, head_info h, const char *target,
                  size_t tlen, uint32_t sum, ho_expect *e) {
  *e = (ho_expect){0};
  if (r->bad != B_OK) e->status = bad_status(r, &e->alt);
  else if (h.len > srv->max_head || h.nheaders > SH_HTTP_MAX_HEADERS) e->status = 431;
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
  const char *m = ho_method_names[r->method];
  e->echo_len = (uint16_t)ho_echo(e->echo, sizeof(e->echo), m, strlen(m), target, tlen,
                                  r->version, !e->close, r->body_len, sum);
}

/* ---- a connection ------------------------------------------------------------------- */

/* Writes request j of r and returns what it is owed. */
static void one_request(sh_scn *s, const ho_server *srv, const req *r, uint32_t conn, uint32_t j,
                        ho_stream *st, ho_expect *e) {
  char body[HO_BODY_MAX];
  out_buf o = {st->out, st->len, sizeof(st->out)};
  head_info h = write_head(r, conn, j, srv, &o);
  const char *target = strchr(st->out + st->len, ' ') + 1;
  size_t tlen = (size_t)(strchr(target, ' ') - target);
  uint64_t n = r->body_len < sizeof(body) ? r->body_len : 0;
  body_bytes(r, body, n);
  if (r->framing == F_LEN && r->bad == B_OK) put(&o, "%.*s", (int)n, body);
  if (r->framing == F_CHUNKED) write_chunked(s, r, body, &o);
  model(srv, r, h, target, tlen, ho_sum(HO_SUM0, body, n), e);
  st->len = (uint32_t)o.len;
}

static void hold_request(uint32_t conn, ho_stream *st, ho_expect *e) {
  out_buf o = {st->out, st->len, sizeof(st->out)};
  put(&o, "GET /h?c%ur0 HTTP/1.1\r\nHost: h\r\n\r\n", conn);
  *e = (ho_expect){.status = 200, .handler = true};
  const char *t = st->out + st->len + 4;
  e->echo_len = (uint16_t)ho_echo(e->echo, sizeof(e->echo), "GET", 3, t, strcspn(t, " "), 11,
                                  true, 0, HO_SUM0);
  st->len = (uint32_t)o.len;
}

void ho_build(sh_scn *s, const ho_server *srv, uint32_t conn, bool hold, ho_stream *st) {
  uint32_t nreqs = 1 + (uint32_t)sh_scn_below(s, HO_REQS);
  /* Half the connections are calm: their pipelines run whole. */
  bool open = true, calm = sh_scn_below(s, 2) == 0;
  st->len = st->nreqs = st->nexp = st->handled = st->misses = st->start[0] = 0;
  st->server_closes = false;
  /* Room for the longest request: a head of max_head + 1 or 65 headers,
   * a body of max_body + 1 in chunks with their zeros and extensions. */
  size_t room = srv->max_head + 1024 + 2 * srv->max_body;
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
