/*
 * The request parser's incremental part: where a head ends, and the body
 * (Content-Length or chunked) as it arrives. The head itself is parsed in
 * head.c once whole.
 *
 * Every byte of a head is looked at once while its end is sought: p->scan
 * is how far the search went, p->scan_state where the last line seen
 * starts (the end is an empty line). The search never looks past max_head
 * bytes, so a head that never ends costs max_head bytes of `in` and then
 * a 431.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chars.h"
#include "parser.h"

enum {
  ST_HEAD = 0,  /* awaiting a head (p->scan, p->scan_state: the search) */
  ST_BODY,      /* Content-Length body: p->remaining bytes to come */
  ST_SIZE,      /* chunked: a chunk-size line (p->line bytes searched) */
  ST_DATA,      /* chunked: p->remaining bytes of chunk data */
  ST_DATA_END,  /* chunked: the CRLF after a chunk's data */
  ST_TRAILER,   /* chunked: trailer lines (p->scan bytes so far) until the empty one */
  ST_DEAD,      /* an error was returned */
};

/* A chunk-size line (extensions and CRLF included) longer than this: 400. */
#define MAX_CHUNK_LINE 4096u

/* What a step of the chunked body says besides an error status (>= 400)
 * and -ENOMEM. */
enum { STEP_MORE = 0, STEP_ON = 1, STEP_DONE = 2 };

void sh_http_parser_init(sh_http_parser *p, const sh_http_limits *lim) {
  memset(p, 0, sizeof *p);
  p->lim = *lim;
}

void sh_http_parser_reset(sh_http_parser *p) {
  if (p->req != NULL) sh_msg_free(&p->req->hdr);
  sh_http_limits lim = p->lim;
  sh_http_parser_init(p, &lim);
}

bool sh_http_parser_busy(const sh_http_parser *p) {
  return p->state == ST_HEAD ? p->scan > 0 : p->state != ST_DEAD;
}

static int fail(sh_http_parser *p, sh_buf *in, uint16_t status) {
  if (p->req != NULL) sh_msg_free(&p->req->hdr);
  p->req = NULL;
  p->state = ST_DEAD;
  p->error = status;
  sh_buf_consume(in, sh_buf_len(in));
  return SH_HTTP_ERROR;
}

static int finish(sh_http_parser *p, sh_http_request **out) {
  *out = p->req;
  p->req = NULL;
  p->state = ST_HEAD;
  p->scan = p->scan_state = 0;
  return SH_HTTP_DONE;
}

/* The byte at offset off of `in`, or -1 past its end. */
static int byte_at(const sh_buf *in, size_t off) {
  const uint8_t *s;
  return sh_buf_span(in, off, &s) > 0 ? s[0] : -1;
}

/* Offset of the first LF in [from, limit) of `in`, or -1. */
static int64_t find_lf(const sh_buf *in, size_t from, size_t limit) {
  while (from < limit) {
    const uint8_t *s;
    size_t n = sh_buf_span(in, from, &s);
    if (n > limit - from) n = limit - from;
    const uint8_t *lf = memchr(s, '\n', n);
    if (lf != NULL) return (int64_t)(from + (size_t)(lf - s));
    from += n;
  }
  return -1;
}

/* Consumes empty lines before a request line: STEP_ON once the first byte
 * is something else, STEP_MORE, or 400 for a CR without its LF. */
static int skip_empty_lines(sh_buf *in) {
  for (;;) {
    uint8_t b[2];
    size_t k = sh_buf_peek(in, 0, b, 2);
    if (k == 0) return STEP_MORE;
    if (b[0] == '\n') {
      sh_buf_consume(in, 1);
      continue;
    }
    if (b[0] != '\r') return STEP_ON;
    if (k < 2) return STEP_MORE;
    if (b[1] != '\n') return 400;
    sh_buf_consume(in, 2);
  }
}

/* At a line start ls (s: its byte, n: the span's bytes from there): the
 * head's length if the line is empty, 0 if not, -1 when unknown yet. */
static int64_t empty_line_at(const sh_buf *in, size_t ls, const uint8_t *s, size_t n) {
  if (s[0] == '\n') return (int64_t)ls + 1;
  if (s[0] != '\r') return 0;
  int c1 = n > 1 ? s[1] : byte_at(in, ls + 1);
  if (c1 < 0) return -1;
  return c1 == '\n' ? (int64_t)ls + 2 : 0;
}

/* The head's length once its end is found (possibly over max_head), 0
 * while it is not, -431 when it cannot end within max_head. */
static int64_t find_head_end(sh_http_parser *p, const sh_buf *in) {
  size_t max = p->lim.max_head, len = sh_buf_len(in);
  size_t limit = len < max ? len : max;
  size_t pos = p->scan, ls = p->scan_state;
  while (pos < limit) {
    const uint8_t *s;
    size_t n = sh_buf_span(in, pos, &s);
    if (n > limit - pos) n = limit - pos;
    size_t base = pos, off = 0;
    while (off < n) {
      if (base + off == ls && ls > 0) {
        int64_t e = empty_line_at(in, ls, s + off, n - off);
        if (e != 0) {
          p->scan = p->scan_state = (uint32_t)ls;
          return e > 0 ? e : 0;
        }
      }
      const uint8_t *lf = memchr(s + off, '\n', n - off);
      if (lf == NULL) break;
      off = (size_t)(lf - s) + 1;
      ls = base + off;
    }
    pos = base + n;
  }
  p->scan = (uint32_t)pos;
  p->scan_state = (uint32_t)ls;
  return pos >= max ? -431 : 0;
}

/* A request message holding a copy of the first `len` bytes of `in`. */
static sh_http_request *take_head(const sh_buf *in, size_t len) {
  sh_http_request *r = sh_http_request_alloc();
  if (r == NULL) return NULL;
  char *dst = r->priv_.head;
  if (len > SH_HTTP_INLINE_HEAD) {
    dst = r->priv_.big = malloc(len);
    if (dst == NULL) {
      sh_msg_free(&r->hdr);
      return NULL;
    }
  }
  sh_buf_peek(in, 0, dst, len);
  return r;
}

static int content_body(sh_http_parser *p, sh_buf *in, sh_http_request **out);
static int chunked_body(sh_http_parser *p, sh_buf *in, sh_http_request **out);

static int head(sh_http_parser *p, sh_buf *in, sh_http_request **out) {
  if (p->scan == 0) {
    int st = skip_empty_lines(in);
    if (st != STEP_ON) return st == STEP_MORE ? SH_HTTP_MORE : fail(p, in, (uint16_t)st);
  }
  int64_t end = find_head_end(p, in);
  if (end == 0) return SH_HTTP_MORE;
  if (end < 0 || end > p->lim.max_head) return fail(p, in, 431);
  sh_http_request *r = take_head(in, (size_t)end);
  if (r == NULL) return -ENOMEM;
  uint16_t st = sh_http_parse_head(r, (size_t)end);
  if (st == 0 && r->content_length >= 0 && (uint64_t)r->content_length > p->lim.max_body)
    st = 413;
  p->req = r;
  if (st != 0) return fail(p, in, st);
  sh_buf_consume(in, (size_t)end);
  p->scan = p->scan_state = 0;
  p->body_len = 0;
  if (r->chunked) {
    p->state = ST_SIZE;
    p->line = 0;
    return chunked_body(p, in, out);
  }
  if (r->content_length > 0) {
    p->state = ST_BODY;
    p->remaining = (uint64_t)r->content_length;
    return content_body(p, in, out);
  }
  return finish(p, out);
}

/* Moves up to p->remaining bytes of `in` into the body: 0 or -ENOMEM. */
static int take_body(sh_http_parser *p, sh_buf *in) {
  size_t n = sh_buf_len(in);
  if (n > p->remaining) n = (size_t)p->remaining;
  if (n == 0) return 0;
  if (sh_buf_move(&p->req->body, in, n) != 0) return -ENOMEM;
  p->remaining -= n;
  p->body_len += n;
  return 0;
}

static int content_body(sh_http_parser *p, sh_buf *in, sh_http_request **out) {
  if (take_body(p, in) != 0) return -ENOMEM;
  return p->remaining > 0 ? SH_HTTP_MORE : finish(p, out);
}

/* The chunk-size line of length n (LF included) in line[]. */
static int chunk_size_line(sh_http_parser *p, const uint8_t *line, size_t n) {
  size_t i = 0;
  uint64_t size = 0;
  /* Any number of digits, leading zeros too (RFC 9112 7.1: a recipient
   * anticipates long numerals); a value past 64 bits is refused before it
   * wraps. Bounded by the line, at most MAX_CHUNK_LINE bytes. */
  while (sh_http_cls[line[i]] & SH_HC_HEX) {
    uint8_t c = sh_http_lower[line[i]];
    if (size >> 60 != 0) return 400;
    size = size << 4 | (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
    i++;
  }
  if (i == 0) return 400;
  size_t e = n - 1; /* the LF */
  if (e > i && line[e - 1] == '\r') e--;
  if (i < e) {
    while (i < e && (line[i] == ' ' || line[i] == '\t')) i++;
    if (i == e || line[i] != ';') return 400;
    while (i < e && (sh_http_cls[line[i]] & SH_HC_VALUE)) i++;
    if (i < e) return 400;
  }
  if (size == 0) {
    p->state = ST_TRAILER;
    p->scan = 0;
  } else {
    if (size > p->lim.max_body - p->body_len) return 413;
    p->state = ST_DATA;
    p->remaining = size;
  }
  return STEP_ON;
}

static int chunk_size(sh_http_parser *p, sh_buf *in) {
  size_t len = sh_buf_len(in);
  size_t limit = len < MAX_CHUNK_LINE ? len : MAX_CHUNK_LINE;
  int64_t lf = find_lf(in, p->line, limit);
  if (lf < 0) {
    p->line = (uint32_t)limit;
    return len >= MAX_CHUNK_LINE ? 400 : STEP_MORE;
  }
  uint8_t line[MAX_CHUNK_LINE];
  size_t n = (size_t)lf + 1;
  sh_buf_peek(in, 0, line, n);
  int st = chunk_size_line(p, line, n);
  if (st == STEP_ON) {
    sh_buf_consume(in, n);
    p->line = 0;
  }
  return st;
}

static int chunk_data(sh_http_parser *p, sh_buf *in) {
  if (take_body(p, in) != 0) return -ENOMEM;
  if (p->remaining > 0) return STEP_MORE;
  p->state = ST_DATA_END;
  return STEP_ON;
}

static int chunk_data_end(sh_http_parser *p, sh_buf *in) {
  uint8_t b[2];
  size_t k = sh_buf_peek(in, 0, b, 2);
  if (k == 0 || (b[0] == '\r' && k < 2)) return STEP_MORE;
  if (b[0] == '\r' ? b[1] != '\n' : b[0] != '\n') return 400;
  sh_buf_consume(in, b[0] == '\r' ? 2 : 1);
  p->state = ST_SIZE;
  return STEP_ON;
}

/* The first n bytes of `in` are all field-value bytes. */
static bool clean(const sh_buf *in, size_t n) {
  for (size_t off = 0; off < n;) {
    const uint8_t *s;
    size_t k = sh_buf_span(in, off, &s);
    if (k > n - off) k = n - off;
    for (size_t i = 0; i < k; i++)
      if (!(sh_http_cls[s[i]] & SH_HC_VALUE)) return false;
    off += k;
  }
  return true;
}

/* A trailer line (not kept) or the empty line that ends the body. */
static int trailer(sh_http_parser *p, sh_buf *in) {
  size_t len = sh_buf_len(in), room = p->lim.max_head - p->scan;
  size_t limit = len < room ? len : room;
  int64_t lf = find_lf(in, p->line, limit);
  if (lf < 0) {
    p->line = (uint32_t)limit;
    return len >= room ? 431 : STEP_MORE;
  }
  size_t n = (size_t)lf;
  if (n > 0 && byte_at(in, n - 1) == '\r') n--;
  if (!clean(in, n)) return 400;
  sh_buf_consume(in, (size_t)lf + 1);
  p->line = 0;
  if (n == 0) return STEP_DONE;
  p->scan += (uint32_t)lf + 1;
  return STEP_ON;
}

static int chunked_body(sh_http_parser *p, sh_buf *in, sh_http_request **out) {
  for (;;) {
    int st;
    switch (p->state) {
    case ST_SIZE: st = chunk_size(p, in); break;
    case ST_DATA: st = chunk_data(p, in); break;
    case ST_DATA_END: st = chunk_data_end(p, in); break;
    default: st = trailer(p, in); break;
    }
    if (st == STEP_ON) continue;
    if (st == STEP_MORE) return SH_HTTP_MORE;
    if (st == STEP_DONE) return finish(p, out);
    if (st < 0) return st;
    return fail(p, in, (uint16_t)st);
  }
}

int sh_http_parse(sh_http_parser *p, sh_buf *in, sh_http_request **out) {
  *out = NULL;
  switch (p->state) {
  case ST_HEAD: return head(p, in, out);
  case ST_BODY: return content_body(p, in, out);
  case ST_DEAD:
    sh_buf_consume(in, sh_buf_len(in));
    return SH_HTTP_MORE;
  default: return chunked_body(p, in, out);
  }
}
