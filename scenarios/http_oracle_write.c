/*
 * The conformance oracle's writer (http_oracle_req.h): a drawn request's
 * bytes, header names in drawn case, targets in the three forms the
 * server takes (and malformed ones), empty lines before a request line,
 * heads padded to a limit or one past it; and what it wrote, for the
 * model (head_info), which judges from that and the description alone.
 */
#include "http_oracle_req.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *const ho_paths[P_HOLD + 1] = {"/g", "/p", "/b", "/w/x", "/m", "/gx",
                                          "/G", "/w", "/nope", "/", "*", "/h"};

/* Malformed targets (B_TARGET): asterisk-form with another method than
 * OPTIONS, absolute-forms without an authority or of another scheme,
 * neither form, an authority-form (CONNECT's only, RFC 9112 3.2.3). */
static const char *const bad_targets[NBAD_TARGETS] = {"*",    "http://", "http:///g?x", "ftp://h/g",
                                                      "g?x", "h:80",    "http:/g"};
/* Malformed versions (RFC 9112 2.3: "HTTP/" DIGIT "." DIGIT, case-sensitive). */
static const char *const bad_versions[NBAD_VERSIONS] = {"HTTP/1.10", "HTTP/1", "http/1.1",
                                                        "HTTP/A.1"};
/* Authorities of an absolute-form target; the scheme in any case. */
static const char *const schemes[] = {"http://h", "HTTP://h", "http://Host:80", "hTtP://h.example"};
#define NSCHEMES (sizeof(schemes) / sizeof(schemes[0]))

/* Extra headers: names (one of them in several cases: a duplicate) and
 * values with and without whitespace around (trimmed: http.h). */
static const char *const extra_names[] = {"X-A", "X-Dup", "x-dup", "X-DUP", "X-Bb",
                                          /* as long as Transfer-Encoding, Content-Length */
                                          "X-Transfer-Encode", "X-Content-Type"};
static const char *const extra_values[] = {" v", "v", " v1 ", "\tx y\t", "", " ", "  a,b"};
#define NEXTRA_NAMES (sizeof(extra_names) / sizeof(extra_names[0]))
#define NEXTRA_VALUES (sizeof(extra_values) / sizeof(extra_values[0]))
/* Names to look up: present (in another case than sent), absent, a
 * prefix and an extension of a present one, the duplicate. */
static const char *const look_names[] = {"host", "x-dup", "X-A", "content-length", "CONNECTION",
                                         "x-none", "X-Du", "x-dupe", "x-look", "transfer-encoding"};
#define NLOOK_NAMES (sizeof(look_names) / sizeof(look_names[0]))

static const char *const conn_values[] = {NULL, "close", "Close", "keep-alive", "Keep-Alive"};

void ho_put(out_buf *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(o->p + o->len, o->size - o->len, fmt, ap);
  va_end(ap);
  if (n > 0) o->len += (size_t)n < o->size - o->len ? (size_t)n : o->size - o->len - 1;
}

void ho_draw_extras(sh_scn *s, req *r) {
  r->nextra = sh_scn_below(s, 2) ? 0 : (uint8_t)(1 + sh_scn_below(s, HO_EXTRA));
  for (uint32_t k = 0; k < r->nextra; k++) {
    r->extra[k][0] = (uint8_t)sh_scn_below(s, NEXTRA_NAMES);
    r->extra[k][1] = (uint8_t)sh_scn_below(s, NEXTRA_VALUES);
  }
  r->nlooks = sh_scn_below(s, 2) ? 0 : (uint8_t)(1 + sh_scn_below(s, HO_LOOKS));
  for (uint32_t k = 0; k < r->nlooks; k++) r->look[k] = (uint8_t)sh_scn_below(s, NLOOK_NAMES);
}

/* name in a drawn case: as it is, lower, upper, or each letter drawn
 * (RFC 9110 5.1: field names are case-insensitive). */
static const char *cased(sh_scn *s, const char *name, char *buf, size_t size) {
  uint64_t how = sh_scn_below(s, 4);
  size_t n = strlen(name);
  if (how == 0 || n >= size) return name;
  for (size_t i = 0; i <= n; i++) {
    char c = name[i];
    bool up = how == 2 || (how == 3 && sh_scn_below(s, 2));
    if (c >= 'a' && c <= 'z' && up) c = (char)(c - 32);
    else if (c >= 'A' && c <= 'Z' && !up) c = (char)(c + 32);
    buf[i] = c;
  }
  return buf;
}

/* A header line "name:value" (value with its whitespace), recorded. */
__attribute__((format(printf, 4, 5))) static void header(out_buf *o, head_info *h,
                                                         const char *name, const char *fmt, ...) {
  size_t n0 = o->len;
  ho_put(o, "%s:", name);
  size_t v0 = o->len;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(o->p + o->len, o->size - o->len, fmt, ap);
  va_end(ap);
  if (n > 0) o->len += (size_t)n < o->size - o->len ? (size_t)n : o->size - o->len - 1;
  if (h->nheaders <= SH_HTTP_MAX_HEADERS) {
    h->name[h->nheaders] = (sh_http_str){o->p + n0, v0 - n0 - 1};
    h->value[h->nheaders] = (sh_http_str){o->p + v0, o->len - v0};
  }
  h->nheaders++;
  ho_put(o, "\r\n");
}

static void request_line(sh_scn *s, const req *r, uint32_t conn, uint32_t j, out_buf *o,
                         head_info *h) {
  ho_put(o, "%s ", ho_method_names[r->method]);
  size_t t0 = o->len;
  if (r->bad == B_TARGET) ho_put(o, "%s", bad_targets[r->bad_target]);
  else if (r->form == T_ASTERISK) ho_put(o, "*");
  else {
    if (r->form == T_ABSOLUTE) ho_put(o, "%s", schemes[sh_scn_below(s, NSCHEMES)]);
    if (r->path != P_ROOT) ho_put(o, "%s", ho_paths[r->path]);
    if (r->path == P_W) ho_put(o, "%u", j);
    /* An absolute-form without a path, sometimes without a query too. */
    if (!r->no_query)
      ho_put(o, "?c%ur%u%s", conn, j, r->sleep ? "&s" : "");
  }
  h->target = (sh_http_str){o->p + t0, o->len - t0};
  if (r->bad == B_BAD_VERSION) ho_put(o, " %s\r\n", bad_versions[r->bad_target]);
  else ho_put(o, " HTTP/1.%c\r\n", r->bad == B_VERSION ? '2' : r->version == 10 ? '0' : '1');
}

/* Pads the head (now `len` bytes with the empty line) to `target` bytes. */
static void pad_to(out_buf *o, head_info *h, size_t len, size_t target) {
  if (target < len + 10) return; /* no room for "X-Pad: a\r\n" */
  size_t k = target - len - 9;   /* "X-Pad: " k bytes "\r\n" */
  size_t v0 = o->len + 7;
  ho_put(o, "X-Pad: ");
  for (size_t i = 0; i < k; i++) ho_put(o, "a");
  ho_put(o, "\r\n");
  if (h->nheaders <= SH_HTTP_MAX_HEADERS) {
    h->name[h->nheaders] = (sh_http_str){o->p + v0 - 7, 5};
    h->value[h->nheaders] = (sh_http_str){o->p + v0 - 1, k + 1};
  }
  h->nheaders++;
}

/* The headers a handler reads: extra ones, the names to look up, the shape. */
static void handler_headers(sh_scn *s, const req *r, out_buf *o, head_info *h) {
  char b[32];
  for (uint32_t k = 0; k < r->nextra; k++)
    header(o, h, cased(s, extra_names[r->extra[k][0]], b, sizeof(b)), "%s",
           extra_values[r->extra[k][1]]);
  if (r->nlooks > 0) {
    size_t n0 = o->len, v0;
    ho_put(o, "%s: ", cased(s, "X-Look", b, sizeof(b)));
    v0 = o->len;
    for (uint32_t k = 0; k < r->nlooks; k++) {
      size_t at = o->len + (k > 0);
      ho_put(o, "%s%s", k > 0 ? "," : "", cased(s, look_names[r->look[k]], b, sizeof(b)));
      h->look[k] = (sh_http_str){o->p + at, o->len - at};
    }
    h->name[h->nheaders] = (sh_http_str){o->p + n0, 6};
    h->value[h->nheaders++] = (sh_http_str){o->p + v0 - 1, o->len - v0 + 1};
    ho_put(o, "\r\n");
  }
  const ho_shape *sh = &r->shape;
  if (r->shaped)
    header(o, h, cased(s, "X-Shape", b, sizeof(b)), " %u %u %u %u %u", sh->ctype_len, sh->fill,
           sh->xlong, sh->reason_of, sh->bad_line);
}

void ho_write_head(sh_scn *s, const req *r, uint32_t conn, uint32_t j, const ho_server *srv,
                   out_buf *o, head_info *h) {
  char b[32];
  /* RFC 9112 2.2: a server ignores at least one empty line before a
   * request line; a bare CR is no line end. */
  for (uint32_t k = 0; k < r->lead; k++) ho_put(o, sh_scn_below(s, 2) ? "\r\n" : "\n");
  if (r->bad == B_BARE_CR) ho_put(o, "\r");
  size_t at = o->len;
  *h = (head_info){0};
  request_line(s, r, conn, j, o, h);
  if (r->bad != B_NO_HOST) header(o, h, cased(s, "Host", b, sizeof(b)), " h");
  if (r->bad == B_TWO_HOSTS) header(o, h, cased(s, "Host", b, sizeof(b)), " h2");
  if (r->conn != 0) header(o, h, cased(s, "Connection", b, sizeof(b)), " %s", conn_values[r->conn]);
  if (r->bad == B_BAD_CL) header(o, h, "Content-Length", " 1x");
  else if (r->framing == F_LEN)
    header(o, h, cased(s, "Content-Length", b, sizeof(b)), " %.*s%llu", r->cl_zeros, "000",
           (unsigned long long)r->body_len);
  if (r->bad == B_GZIP) header(o, h, "Transfer-Encoding", " gzip");
  if (r->framing == F_CHUNKED)
    header(o, h, cased(s, "Transfer-Encoding", b, sizeof(b)), " chunked");
  if (r->bad == B_NO_COLON) ho_put(o, "X-Bad header\r\n"), h->nheaders++;
  handler_headers(s, r, o, h);
  size_t len = o->len - at + 2; /* with the empty line */
  if (r->pad == PAD_HEAD_AT || r->pad == PAD_HEAD_OVER)
    pad_to(o, h, len, r->pad == PAD_HEAD_AT ? srv->max_head : srv->max_head + 1);
  if (r->pad == PAD_INLINE_AT || r->pad == PAD_INLINE_OVER)
    pad_to(o, h, len, SH_HTTP_INLINE_HEAD + (r->pad == PAD_INLINE_OVER));
  uint32_t want = r->pad == PAD_HDRS_AT ? SH_HTTP_MAX_HEADERS : SH_HTTP_MAX_HEADERS + 1;
  for (uint32_t k = 0; (r->pad == PAD_HDRS_AT || r->pad == PAD_HDRS_OVER) && h->nheaders < want;
       k++)
    header(o, h, "X-Hdr", " %u", k);
  ho_put(o, "\r\n");
  h->len = (uint32_t)(o->len - at);
}

/* A chunk size (leading zeros, either case) and maybe an extension. Up
 * to HO_SIZE_DIGITS digits in all: RFC 9112 7.1 allows any number
 * (1*HEXDIG), the value alone may be too large. */
#define HO_SIZE_DIGITS 24
static void chunk_size(sh_scn *s, out_buf *o, uint64_t size) {
  int digits = 1;
  for (uint64_t v = size; v > 15; v >>= 4) digits++;
  uint64_t zeros = sh_scn_below(s, 4) == 3 ? 1 + sh_scn_below(s, HO_SIZE_DIGITS - digits) : 0;
  for (uint64_t i = 0; i < zeros; i++) ho_put(o, "0");
  ho_put(o, sh_scn_below(s, 2) ? "%llX" : "%llx", (unsigned long long)size);
  static const char *const exts[] = {"", "", "", ";a", ";a=b", ";a=\"x;y\"", ";a;b=c"};
  ho_put(o, "%s\r\n", exts[sh_scn_below(s, sizeof(exts) / sizeof(exts[0]))]);
}

void ho_write_chunked(sh_scn *s, const req *r, const char *body, out_buf *o) {
  static const char *const bad_sizes[] = {[B_BAD_CHUNK] = "zz", [B_OVERFLOW] = "10000000000000000",
                                          [B_HUGE] = "FFFFFFFFFFFFFFFF"};
  /* Other bad requests (a bad head) keep a good chunked body. */
  if (r->bad == B_BAD_CHUNK || r->bad == B_OVERFLOW || r->bad == B_HUGE) {
    ho_put(o, "%s\r\nabc\r\n0\r\n\r\n", bad_sizes[r->bad]);
    return;
  }
  uint64_t off = 0, parts = 1 + sh_scn_below(s, 4);
  /* Each chunk takes at least a byte; the last of `parts` takes the rest. */
  for (uint64_t p = 0; p < parts && off < r->body_len; p++) {
    uint64_t n = p + 1 == parts ? r->body_len - off : 1 + sh_scn_below(s, r->body_len - off);
    chunk_size(s, o, n);
    ho_put(o, "%.*s\r\n", (int)n, body + off);
    off += n;
  }
  chunk_size(s, o, 0);
  if (sh_scn_below(s, 3) == 2) ho_put(o, "X-T: v\r\n");
  ho_put(o, "\r\n");
}
