/*
 * A request's head (request line, headers, the empty line), parsed once it
 * is whole and held in the request's own storage: every field is a view
 * into it. The head is known to end in LF, so the loops over its bytes
 * need no length checks: each stops at the latest at that LF, a byte no
 * class of the table admits.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "chars.h"
#include "parser.h"

/* The classes of byte c, as constant expressions to fill the table. */
#define HC_ALPHA(c) (((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z'))
#define HC_DIGIT(c) ((c) >= '0' && (c) <= '9')
#define HC_TSYM(c)                                                                       \
  ((c) == '!' || (c) == '#' || (c) == '$' || (c) == '%' || (c) == '&' || (c) == '\'' ||   \
   (c) == '*' || (c) == '+' || (c) == '-' || (c) == '.' || (c) == '^' || (c) == '_' ||    \
   (c) == '`' || (c) == '|' || (c) == '~')
#define HC(c)                                                                            \
  ((HC_ALPHA(c) || HC_DIGIT(c) || HC_TSYM(c) ? SH_HC_TCHAR : 0) |                        \
   ((c) == '\t' || ((c) >= 0x20 && (c) != 0x7f) ? SH_HC_VALUE : 0) |                      \
   ((c) > 0x20 && (c) < 0x7f ? SH_HC_TARGET : 0) |                                       \
   (HC_DIGIT(c) || ((c) >= 'a' && (c) <= 'f') || ((c) >= 'A' && (c) <= 'F') ? SH_HC_HEX   \
                                                                           : 0) |        \
   (HC_DIGIT(c) ? SH_HC_DIGIT : 0))
#define HL(c) ((uint8_t)((c) >= 'A' && (c) <= 'Z' ? (c) + 32 : (c)))
#define R16(F, b)                                                                       \
  F(b + 0), F(b + 1), F(b + 2), F(b + 3), F(b + 4), F(b + 5), F(b + 6), F(b + 7), F(b + 8), \
      F(b + 9), F(b + 10), F(b + 11), F(b + 12), F(b + 13), F(b + 14), F(b + 15)
#define R256(F)                                                                         \
  R16(F, 0), R16(F, 16), R16(F, 32), R16(F, 48), R16(F, 64), R16(F, 80), R16(F, 96),       \
      R16(F, 112), R16(F, 128), R16(F, 144), R16(F, 160), R16(F, 176), R16(F, 192),       \
      R16(F, 208), R16(F, 224), R16(F, 240)

const uint8_t sh_http_cls[256] = {R256(HC)};
const uint8_t sh_http_lower[256] = {R256(HL)};

/* The pool serves a request from its 2048-byte class, whose objects carry a
 * 16-byte hidden header: a larger request would take a class twice the size
 * for every request. */
_Static_assert(sizeof(sh_http_request) + 16 <= 2048, "sh_http_request outgrew its pool class");

static void request_drop(sh_msg *m) {
  sh_http_request *r = (sh_http_request *)m;
  sh_buf_clear(&r->body);
  free(r->priv_.big);
  r->priv_.big = NULL;
}
/* Unzeroed: zeroing the header slots and the inline head per request
 * would cost more than parsing a small head. */
SH_MSG_DEFINE_DROP(sh_http_request, SH_NOTICE, SH_MSG_UNZEROED, request_drop);

sh_http_request *sh_http_request_alloc(void) {
  sh_http_request *r = (sh_http_request *)sh_msg_alloc(&sh_http_request_type);
  /* The fields before the header slots; the parser writes the rest
   * before anything reads it. */
  if (r != NULL)
    memset((char *)r + sizeof(sh_msg), 0, offsetof(sh_http_request, priv_.h) - sizeof(sh_msg));
  return r;
}

static const char *storage(const sh_http_request *r) {
  return r->priv_.big ? r->priv_.big : r->priv_.head;
}

/* a (n bytes, any case) equals lower-case b. */
static bool ieq(const char *a, const char *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (sh_http_lower[(uint8_t)a[i]] != (uint8_t)b[i]) return false;
  return true;
}

static bool is_ows(uint8_t c) { return c == ' ' || c == '\t'; }

/* Eight bytes at a time: long values and targets are the bulk of a head,
 * and most of their words hold no byte that ends or spoils them. A word
 * the test flags (possibly wrongly: the trick can flag a clean byte above
 * a flagged one) is left to the byte loop that follows. */
#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull
/* Nonzero when a byte of w is below n (n <= 0x80). */
static inline uint64_t below(uint64_t w, uint8_t n) { return (w - ONES * n) & ~w & HIGHS; }

/* From h[i], past whole words whose bytes are all in lo..0x7E, or also
 * 0x80..0xFF when high is 0 (field values, without HTAB: lo 0x20, high 0;
 * targets: lo 0x21, high HIGHS). */
static size_t skip_words(const uint8_t *h, size_t i, size_t len, uint8_t lo, uint64_t high) {
  assert(lo <= 0x80); /* below's bound */
  for (uint64_t w; i + 8 <= len; i += 8) {
    memcpy(&w, h + i, 8);
    if ((below(w, lo) | (w & high) | below(w ^ (ONES * 0x7f), 1)) != 0) break;
  }
  return i;
}

/* What the headers said that the request's fields depend on. */
typedef struct head_facts {
  uint32_t nhost, nte;
  bool te_chunked, conn_close, conn_keep;
} head_facts;

static sh_http_method method_of(const char *m, size_t n) {
  switch (n) {
  case 3:
    if (memcmp(m, "GET", 3) == 0) return SH_HTTP_GET;
    if (memcmp(m, "PUT", 3) == 0) return SH_HTTP_PUT;
    break;
  case 4:
    if (memcmp(m, "POST", 4) == 0) return SH_HTTP_POST;
    if (memcmp(m, "HEAD", 4) == 0) return SH_HTTP_HEAD;
    break;
  case 5:
    if (memcmp(m, "PATCH", 5) == 0) return SH_HTTP_PATCH;
    if (memcmp(m, "TRACE", 5) == 0) return SH_HTTP_TRACE;
    break;
  case 6:
    if (memcmp(m, "DELETE", 6) == 0) return SH_HTTP_DELETE;
    break;
  case 7:
    if (memcmp(m, "OPTIONS", 7) == 0) return SH_HTTP_OPTIONS;
    if (memcmp(m, "CONNECT", 7) == 0) return SH_HTTP_CONNECT;
    break;
  }
  return SH_HTTP_OTHER;
}

/* path and query of a target part starting with '/' or '?' (or empty). */
static void split_path(sh_http_request *r, const char *p, size_t n) {
  const char *q = memchr(p, '?', n);
  size_t pl = q ? (size_t)(q - p) : n;
  if (pl == 0) {
    r->path = (sh_http_str){"/", 1};
  } else {
    r->path = (sh_http_str){p, pl};
  }
  r->query = q ? (sh_http_str){q + 1, n - pl - 1} : (sh_http_str){p + n, 0};
}

/* origin-form, "*" for OPTIONS, or absolute-form with an http authority. */
static uint16_t parse_target(sh_http_request *r) {
  const char *t = r->target.p;
  size_t n = r->target.len;
  if (t[0] == '/') {
    split_path(r, t, n);
    return 0;
  }
  if (n == 1 && t[0] == '*') {
    if (r->method != SH_HTTP_OPTIONS) return 400;
    r->path = r->target;
    r->query = (sh_http_str){t + 1, 0};
    return 0;
  }
  if (n <= 7 || !ieq(t, "http://", 7)) return 400;
  size_t a = 7;
  while (a < n && t[a] != '/' && t[a] != '?') a++;
  if (a == 7) return 400;
  split_path(r, t + a, n - a);
  return 0;
}

static uint16_t parse_version(sh_http_request *r, const uint8_t *v, size_t n) {
  if (n != 8 || memcmp(v, "HTTP/", 5) != 0 || !(sh_http_cls[v[5]] & SH_HC_DIGIT) || v[6] != '.' ||
      !(sh_http_cls[v[7]] & SH_HC_DIGIT))
    return 400;
  if (v[5] != '1' || (v[7] != '0' && v[7] != '1')) return 505;
  r->version = v[7] == '1' ? 11 : 10;
  return 0;
}

/* The request line of head h; *at: where the headers start. */
static uint16_t parse_request_line(sh_http_request *r, const uint8_t *h, size_t len, size_t *at) {
  size_t i = 0;
  while (sh_http_cls[h[i]] & SH_HC_TCHAR) i++;
  if (i == 0 || h[i] != ' ') return 400;
  r->method_name = (sh_http_str){(const char *)h, i};
  r->method = method_of((const char *)h, i);
  size_t t = ++i;
  i = skip_words(h, i, len, 0x21, HIGHS);
  while (sh_http_cls[h[i]] & SH_HC_TARGET) i++;
  if (i == t || h[i] != ' ') return 400;
  r->target = (sh_http_str){(const char *)h + t, i - t};
  size_t v = ++i;
  const uint8_t *lf = memchr(h + v, '\n', len - v);
  size_t e = (size_t)(lf - h), ve = e;
  if (ve > v && h[ve - 1] == '\r') ve--;
  uint16_t st = parse_version(r, h + v, ve - v);
  if (st == 0) st = parse_target(r);
  *at = e + 1;
  return st;
}

/* A Content-Length value: a comma list of equal 1*DIGIT. */
static uint16_t content_length(sh_http_request *r, const uint8_t *v, size_t n) {
  size_t i = 0;
  for (;;) {
    while (i < n && is_ows(v[i])) i++;
    if (i == n || !(sh_http_cls[v[i]] & SH_HC_DIGIT)) return 400;
    int64_t x = 0;
    for (; i < n && (sh_http_cls[v[i]] & SH_HC_DIGIT); i++) {
      if (x > (INT64_MAX - (v[i] - '0')) / 10) return 400;
      x = x * 10 + (v[i] - '0');
    }
    if (r->content_length >= 0 && x != r->content_length) return 400;
    r->content_length = x;
    while (i < n && is_ows(v[i])) i++;
    if (i == n) return 0;
    if (v[i++] != ',') return 400;
  }
}

/* The "close" and "keep-alive" tokens of a Connection value. */
static void connection(head_facts *f, const uint8_t *v, size_t n) {
  size_t i = 0;
  while (i < n) {
    while (i < n && (is_ows(v[i]) || v[i] == ',')) i++;
    size_t s = i;
    while (i < n && v[i] != ',') i++;
    size_t e = i;
    while (e > s && is_ows(v[e - 1])) e--;
    if (e - s == 5 && ieq((const char *)v + s, "close", 5)) f->conn_close = true;
    if (e - s == 10 && ieq((const char *)v + s, "keep-alive", 10)) f->conn_keep = true;
  }
}

/* Notes what a header that matters to the framing or the connection says. */
static uint16_t special(sh_http_request *r, head_facts *f, const uint8_t *name, size_t nl,
                        const uint8_t *v, size_t vl) {
  const char *nm = (const char *)name;
  switch (nl) {
  case 4:
    if (ieq(nm, "host", 4)) f->nhost++;
    break;
  case 10:
    if (ieq(nm, "connection", 10)) connection(f, v, vl);
    break;
  case 14:
    if (ieq(nm, "content-length", 14)) return content_length(r, v, vl);
    break;
  case 17:
    if (ieq(nm, "transfer-encoding", 17)) {
      f->nte++;
      f->te_chunked = vl == 7 && ieq((const char *)v, "chunked", 7);
    }
    break;
  }
  return 0;
}

/* One header line at h[*at] (not the empty line): stored, *at past it. */
static uint16_t parse_header(sh_http_request *r, head_facts *f, const uint8_t *h, size_t len,
                             size_t *at) {
  size_t s = *at, i = s;
  while (sh_http_cls[h[i]] & SH_HC_TCHAR) i++;
  if (i == s || h[i] != ':') return 400; /* also a folded line: SP or HTAB first */
  size_t nl = i - s;
  i++;
  while (is_ows(h[i])) i++;
  size_t vs = i;
  i = skip_words(h, i, len, 0x20, 0);
  while (sh_http_cls[h[i]] & SH_HC_VALUE) i++;
  size_t ve = i;
  if (h[i] == '\r') i++;
  if (h[i] != '\n') return 400;
  while (ve > vs && is_ows(h[ve - 1])) ve--;
  if (r->nheaders == SH_HTTP_MAX_HEADERS) return 431;
  r->priv_.h[r->nheaders++] =
      (sh_http_hslot_){(uint16_t)s, (uint16_t)nl, (uint16_t)vs, (uint16_t)(ve - vs)};
  *at = i + 1;
  return special(r, f, h + s, nl, h + vs, ve - vs);
}

/* The rules between headers, once all are known. */
static uint16_t framing(sh_http_request *r, const head_facts *f) {
  if (f->nte > 1 || (f->nte && (r->version == 10 || r->content_length >= 0))) return 400;
  if (f->nte && !f->te_chunked) return 501;
  if (f->nhost > 1 || (r->version == 11 && f->nhost == 0)) return 400;
  r->chunked = f->nte != 0;
  r->keep_alive = r->version == 11 ? !f->conn_close : f->conn_keep && !f->conn_close;
  return 0;
}

uint16_t sh_http_parse_head(sh_http_request *r, size_t len) {
  const uint8_t *h = (const uint8_t *)storage(r);
  if (len == 0 || len > UINT16_MAX || h[len - 1] != '\n') return 400;
  r->nheaders = 0;
  r->content_length = -1;
  size_t at = 0; /* set by parse_request_line; gcc -O1 cannot see it */
  uint16_t st = parse_request_line(r, h, len, &at);
  head_facts f = {0};
  while (st == 0 && at < len && h[at] != '\n' && !(h[at] == '\r' && h[at + 1] == '\n'))
    st = parse_header(r, &f, h, len, &at);
  if (st != 0) return st;
  if (at == len) return 400; /* no empty line */
  at += h[at] == '\r' ? 2 : 1;
  if (at != len) return 400;
  return framing(r, &f);
}

int sh_http_header_at(const sh_http_request *r, uint32_t i, sh_http_str *name, sh_http_str *value) {
  if (i >= r->nheaders) return -EINVAL;
  const char *h = storage(r);
  if (name) *name = (sh_http_str){h + r->priv_.h[i].no, r->priv_.h[i].nl};
  if (value) *value = (sh_http_str){h + r->priv_.h[i].vo, r->priv_.h[i].vl};
  return 0;
}

bool sh_http_header(const sh_http_request *r, const char *name, sh_http_str *value) {
  size_t n = strlen(name);
  const char *h = storage(r);
  for (uint32_t i = 0; i < r->nheaders; i++) {
    if (r->priv_.h[i].nl != n) continue;
    const char *a = h + r->priv_.h[i].no;
    size_t k = 0;
    while (k < n && sh_http_lower[(uint8_t)a[k]] == sh_http_lower[(uint8_t)name[k]]) k++;
    if (k < n) continue;
    if (value) *value = (sh_http_str){h + r->priv_.h[i].vo, r->priv_.h[i].vl};
    return true;
  }
  return false;
}
