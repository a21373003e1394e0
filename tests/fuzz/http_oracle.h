/*
 * The request parser's differential oracle, shared by the fuzz target and
 * the parser's tests: the same bytes fed whole, one byte at a time, and in
 * pieces of sizes drawn from a seed must give the same transcript (every
 * request's fields, headers and body, every error status, and where the
 * parser stands at the end). After each call that asks for more bytes,
 * what the parser left in its input must stay under a bound, whatever the
 * input: the parser's memory is flat.
 *
 * Header-only (static inline functions) so that both programs build it
 * with their own flags, and a test that uses only the transcript
 * (http_log) leaves the rest unused without a warning; include it once.
 */
#ifndef TESTS_FUZZ_HTTP_ORACLE_H
#define TESTS_FUZZ_HTTP_ORACLE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../http/parser.h"

/* A growing transcript. */
typedef struct http_log {
  char *p;
  size_t len, cap;
} http_log;

static inline void http_log_put(http_log *l, const void *p, size_t n) {
  if (l->len + n + 1 > l->cap) {
    size_t cap = l->cap ? l->cap : 256;
    while (cap < l->len + n + 1) cap *= 2;
    char *q = realloc(l->p, cap);
    if (q == NULL) abort();
    l->p = q;
    l->cap = cap;
  }
  memcpy(l->p + l->len, p, n);
  l->len += n;
  l->p[l->len] = 0;
}

__attribute__((format(printf, 2, 3))) static inline void http_log_printf(http_log *l,
                                                                        const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  http_log_put(l, tmp, n < (int)sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static inline void http_log_str(http_log *l, const char *what, sh_http_str s) {
  http_log_printf(l, " %s[%zu]=", what, s.len);
  http_log_put(l, s.p, s.len);
}

/* One request, every field the parser fills. */
static inline void http_log_request(http_log *l, const sh_http_request *r) {
  http_log_printf(l, "DONE m=%d v=%d ka=%d ch=%d cl=%lld", (int)r->method, r->version,
                  r->keep_alive, r->chunked, (long long)r->content_length);
  http_log_str(l, "name", r->method_name);
  http_log_str(l, "target", r->target);
  http_log_str(l, "path", r->path);
  http_log_str(l, "query", r->query);
  for (uint32_t i = 0; i < r->nheaders; i++) {
    sh_http_str n, v;
    if (sh_http_header_at(r, i, &n, &v) != 0) abort();
    http_log_str(l, "h", n);
    http_log_str(l, ":", v);
  }
  size_t bl = sh_buf_len(&r->body);
  http_log_printf(l, " body[%zu]=", bl);
  for (size_t off = 0; off < bl;) {
    const uint8_t *s;
    size_t k = sh_buf_span(&r->body, off, &s);
    http_log_put(l, s, k);
    off += k;
  }
  http_log_put(l, "\n", 1);
}

/* What the parser may leave in its input after asking for more bytes. */
static inline size_t http_oracle_bound(const sh_http_limits *lim) {
  return lim->max_head > 4096 ? lim->max_head : 4096;
}

/* Piece sizes: 0 whole, 1 one byte at a time, else a xorshift seed. */
static inline size_t http_next_piece(uint64_t *mode, size_t left) {
  if (*mode == 0) return left;
  if (*mode == 1) return 1;
  uint64_t x = *mode;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *mode = x | 2; /* never 0 or 1 */
  size_t k = (x >> 8) % 8 == 0 ? 1 + (x >> 16) % 5000 : 1 + (x >> 16) % 40;
  return k < left ? k : left;
}

/* Feeds d[0..n) to a fresh parser: the first `first` bytes (0: none) as
 * one piece, then pieces by mode; the transcript goes to l. false when the
 * parser broke the memory bound. */
static inline bool http_feed(const uint8_t *d, size_t n, const sh_http_limits *lim,
                             size_t first, uint64_t mode, http_log *l) {
  sh_http_parser p;
  sh_http_parser_init(&p, lim);
  sh_buf in = SH_BUF_INIT;
  bool ok = true, dead = false;
  for (size_t at = 0; at < n && !dead;) {
    size_t k = at == 0 && first > 0 && first < n ? first : http_next_piece(&mode, n - at);
    if (sh_buf_append(&in, d + at, k) != 0) abort();
    at += k;
    for (;;) {
      sh_http_request *r;
      int rc = sh_http_parse(&p, &in, &r);
      if (rc == SH_HTTP_DONE) {
        http_log_request(l, r);
        sh_msg_free(&r->hdr);
        continue;
      }
      if (rc == SH_HTTP_ERROR) {
        http_log_printf(l, "ERROR %d\n", p.error);
        dead = true;
      } else if (rc != SH_HTTP_MORE) {
        http_log_printf(l, "RC %d\n", rc);
        dead = true;
      } else if (sh_buf_len(&in) >= http_oracle_bound(lim)) {
        ok = false;
      }
      break;
    }
  }
  if (!dead) http_log_printf(l, "END busy=%d left=%zu\n", sh_http_parser_busy(&p), sh_buf_len(&in));
  sh_http_parser_reset(&p);
  sh_buf_clear(&in);
  return ok;
}

/* d[0..n) gives the same transcript whole, byte by byte and in pieces
 * drawn from seed, under the default limits and small ones. Prints the
 * first difference to stderr. */
static inline bool http_oracle_check(const uint8_t *d, size_t n, uint64_t seed) {
  static const sh_http_limits lims[] = {{8192, 1u << 20}, {300, 100}};
  const uint64_t modes[] = {1, seed | 2};
  for (size_t li = 0; li < sizeof lims / sizeof lims[0]; li++) {
    http_log whole = {0};
    bool ok = http_feed(d, n, &lims[li], 0, 0, &whole);
    if (!ok) fprintf(stderr, "http oracle: input left over the bound (limits %zu, whole)\n", li);
    for (size_t mi = 0; ok && mi < sizeof modes / sizeof modes[0]; mi++) {
      http_log split = {0};
      if (!http_feed(d, n, &lims[li], 0, modes[mi], &split)) {
        fprintf(stderr, "http oracle: input left over the bound (limits %zu)\n", li);
        ok = false;
      } else if (split.len != whole.len || memcmp(split.p, whole.p, whole.len) != 0) {
        fprintf(stderr, "http oracle: limits %zu, mode %zu differ\n--- whole:\n%s\n--- split:\n%s\n",
                li, mi, whole.p ? whole.p : "", split.p ? split.p : "");
        ok = false;
      }
      free(split.p);
    }
    free(whole.p);
    if (!ok) return false;
  }
  return true;
}

#endif
