/*
 * The HTTP codec: the first handler of every connection's pipeline.
 *
 * Inbound, the parser (parser.h) turns bytes into requests, fired toward
 * the actor one by one; a parse error is fired too, as a request whose
 * priv_.status the router (route.c) answers, so that the responses of the
 * requests before it still go first. Outbound, each sh_http_response is encoded
 * straight into the channel's write buffer.
 *
 * The channel writes exactly one response per request fired, in request
 * order (head-of-line, and fallback_reply for a stack without a result),
 * so a ring remembers, per outstanding request, what its response needs:
 * no body for HEAD, "Connection: close" and the close after it. The ring
 * holds at most max_inflight + max_pending_stacks entries, as many as the
 * channel holds requests before it stops reading: decoding stops when it
 * is full and resumes as responses free it (the bytes wait in the
 * channel's read buffer, bounded by the channel).
 *
 * Decoding also stops while the write buffer is past its high watermark,
 * so that a client slow to read is pushed back, not cut off: the write
 * buffer then holds at most the responses of the requests taken before
 * (room() decides it; their sizes are the handlers' and not counted),
 * and decoding resumes when the channel says it drained (the actor's
 * SH_CHANNEL_WRITABLE, sh_http_codec_resume). After the peer's end of
 * stream one request at a time is taken past the watermark, as long as
 * the buffer is under its limit: with none outstanding the channel would
 * close, the requests already read unanswered. Past the limit it does.
 */
#include <assert.h>
#include <string.h>

#include "parser.h"
#include "conn.h"

/* What a lingering close drops before it closes for good. */
#define SH_HTTP_LINGER_BYTES (64u * 1024u)

enum {
  F_HEAD = 1,  /* a HEAD request: no body bytes */
  F_KA10 = 2,  /* HTTP/1.0 with keep-alive: say so */
  F_CLOSE = 4, /* the connection closes after the response (not in the
                * ring: only its last request can ask for it) */
};

/* What sh_http_codec_resume writes: the codec takes it, nothing else sees it. */
typedef struct resume_msg {
  sh_msg hdr;
} resume_msg;
static SH_MSG_DEFINE(resume_msg, SH_NOTICE, 0);

typedef struct codec {
  sh_http_parser p;
  sh_http_conn *conn;
  sh_buf *in;        /* the channel's read buffer, to resume decoding from */
  uint32_t head, count, cap;
  uint32_t high, limit; /* the write buffer's high watermark and limit */
  bool started;
  bool stopped;      /* a closing request was fired: no more */
  bool blocked;      /* decoding stopped: the ring full, or the write buffer high */
  bool parsing;      /* the parser was initialised */
  bool closing;      /* a response that closes was written: no more */
  uint32_t dropped;  /* bytes dropped since the closing response */
  bool close_last;   /* the last request in the ring closes */
  /* Two bits (F_HEAD, F_KA10) per request: the ring is most of the
   * codec's state, and an idle connection pays for all of it. */
  uint8_t ring[SH_HTTP_RING / 4];
} codec;

static void start(sh_pctx *c, codec *k) {
  k->started = true;
  k->conn = sh_channel_data(sh_pctx_channel(c));
  if (k->conn == NULL || k->conn->refused) {
    k->stopped = true;
    return;
  }
  const sh_http_config *cfg = &k->conn->actor->srv->cfg;
  sh_http_limits lim = {.max_head = cfg->max_head, .max_body = cfg->max_body};
  sh_http_parser_init(&k->p, &lim);
  k->parsing = true;
  k->cap = cfg->max_inflight + SH_HTTP_MAX_PENDING;
  assert(k->cap <= SH_HTTP_RING);
  k->high = k->conn->actor->srv->opts.write_high;
  k->limit = k->conn->actor->srv->opts.write_limit;
}

/* 0: the next request may be taken; 1: not now; or -ENOMEM. */
static int room(sh_pctx *c, codec *k) {
  if (k->count == k->cap) return 1;
  size_t out = sh_buf_len(sh_pctx_out(c));
  /* Past the peer's end, alone: nothing else writes meanwhile, so the
   * buffer passes its limit by one response at most (not checked: that
   * response's size is known only as it is encoded, into the channel's
   * buffer). */
  if (out < k->high || (k->count == 0 && k->conn->eof && out <= k->limit)) return 0;
  /* The codec appends to the write buffer directly, which the channel
   * weighs only as it flushes: an empty write through the head marks the
   * buffer high now, so that the channel tells when it drained. */
  sh_msg *none = sh_msg_alloc(&sh_bytes_type);
  if (none == NULL) return -ENOMEM;
  int rc = sh_pctx_write(c, none);
  return rc == -ENOMEM ? rc : 1;
}

static codec *state(sh_pctx *c) {
  codec *k = sh_pctx_state(c);
  if (!k->started) start(c, k);
  return k;
}

/* ---- decoding ------------------------------------------------------------- */

_Static_assert(SH_HTTP_RING % 4 == 0, "the ring packs four requests a byte");

static void ring_set(codec *k, uint32_t i, uint8_t flags) {
  uint8_t *b = &k->ring[i / 4], shift = (uint8_t)(2 * (i % 4));
  *b = (uint8_t)((*b & ~(3u << shift)) | ((flags & 3u) << shift));
}

static uint8_t ring_get(const codec *k, uint32_t i) {
  return (uint8_t)((k->ring[i / 4] >> (2 * (i % 4))) & 3u);
}

static int fire(sh_pctx *c, codec *k, sh_http_request *r, uint8_t flags) {
  assert(k->count < k->cap);
  ring_set(k, (k->head + k->count) % SH_HTTP_RING, flags);
  /* Nothing is fired after a request that closes: it stays the last. */
  k->close_last = (flags & F_CLOSE) != 0;
  if (k->count++ == 0) sh_http_conn_disarm(k->conn);
  return sh_pctx_fire(c, &r->hdr);
}

/* The parser's error as a request the dispatcher answers. */
static int fire_error(sh_pctx *c, codec *k) {
  sh_http_request *r = sh_http_request_alloc();
  if (r == NULL) return -ENOMEM;
  r->priv_.status = k->p.error;
  sh_http_count(&k->conn->actor->n->bad);
  return fire(c, k, r, F_CLOSE);
}

static uint8_t flags_of(const sh_http_request *r) {
  uint8_t f = r->method == SH_HTTP_HEAD ? F_HEAD : 0;
  if (!r->keep_alive) f |= F_CLOSE;
  else if (r->version == 10) f |= F_KA10;
  return f;
}

/* Fires every whole request in `in` while the ring has room. */
static int pump(sh_pctx *c, codec *k) {
  sh_buf *in = k->in;
  k->blocked = false;
  /* Bounded: each turn consumes bytes or stops. */
  while (!k->stopped && sh_buf_len(in) > 0) {
    size_t before = sh_buf_len(in);
    (void)before;
    int rc = room(c, k);
    if (rc != 0) {
      k->blocked = rc > 0;
      return rc < 0 ? rc : 0;
    }
    sh_http_request *r = NULL;
    rc = sh_http_parse(&k->p, in, &r);
    if (rc < 0) return rc;
    if (rc == SH_HTTP_MORE) return 0;
    uint8_t f = F_CLOSE;
    if (rc == SH_HTTP_ERROR) {
      rc = fire_error(c, k);
    } else {
      f = flags_of(r);
      sh_http_count(&k->conn->actor->n->requests);
      rc = fire(c, k, r, f);
    }
    if (f & F_CLOSE) k->stopped = true;
    if (rc < 0) return rc;
    assert(k->stopped || sh_buf_len(in) < before); /* a request took bytes */
  }
  /* Past a closing request the peer's bytes are dropped as they come.
   * Once the last response is written (the lingering close) up to a
   * bound: a peer that keeps sending (an endless head, a refused body) is
   * cut off. Not before: the responses still owed would be lost. */
  if (k->stopped) {
    size_t n = sh_buf_len(in);
    sh_buf_consume(in, n);
    if (!k->closing) return 0;
    if (n > SH_HTTP_LINGER_BYTES - k->dropped) return -ECONNABORTED;
    k->dropped += (uint32_t)n;
  }
  return 0;
}

static int codec_decode(sh_pctx *c, sh_buf *in) {
  codec *k = state(c);
  k->in = in;
  return pump(c, k);
}

/* ---- encoding -------------------------------------------------------------- */

/* A response head is built here and appended in one go. */
typedef struct hbuf {
  sh_buf *out;
  size_t n;
  int rc;
  char b[2048];
} hbuf;

static void hflush(hbuf *h) {
  if (h->n > 0 && h->rc == 0 && sh_buf_append(h->out, h->b, h->n) != 0) h->rc = -ENOMEM;
  h->n = 0;
}

/* Past the buffer: flush it, and append what does not fit at all. */
static __attribute__((noinline)) void hput_long(hbuf *h, const void *p, size_t n) {
  hflush(h);
  if (n > sizeof(h->b)) {
    if (h->rc == 0 && sh_buf_append(h->out, p, n) != 0) h->rc = -ENOMEM;
    return;
  }
  memcpy(h->b, p, n);
  h->n = n;
}

/* Inline: a response is a handful of these, most of a few bytes. */
static inline void hput(hbuf *h, const void *p, size_t n) {
  if (__builtin_expect(h->n + n > sizeof(h->b), 0)) {
    hput_long(h, p, n);
    return;
  }
  memcpy(h->b + h->n, p, n);
  h->n += n;
}
#define HPUT_LIT(h, s) hput((h), (s), sizeof(s) - 1)

static void hput_u64(hbuf *h, uint64_t v) {
  char d[20];
  size_t i = sizeof(d);
  do {
    d[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  hput(h, d + i, sizeof(d) - i);
}

static void status_line(hbuf *h, uint16_t status) {
  if (status < 100 || status > 999) status = 500;
  size_t rl;
  const char *reason = sh_http_reason_n(status, &rl);
  char s[16] = "HTTP/1.1 000 ";
  s[9] = (char)('0' + status / 100);
  s[10] = (char)('0' + status / 10 % 10);
  s[11] = (char)('0' + status % 10);
  hput(h, s, 13);
  hput(h, reason, rl);
  HPUT_LIT(h, "\r\n");
}

/* 1xx and 204 carry neither a body nor Content-Length. */
static bool bodiless(uint16_t status) { return status < 200 || status == 204; }

/* The head up to the Content-Length value (up to the Content-Type line
 * for a bodiless status). */
static void head_prefix(hbuf *h, const sh_http_actor *a, uint16_t status, const char *ctype,
                        size_t ctype_len) {
  const sh_http_server *srv = a->srv;
  status_line(h, status);
  hput(h, srv->server_line, srv->server_line_len);
  hput(h, a->date, SH_HTTP_DATE_LEN);
  HPUT_LIT(h, "\r\n");
  if (ctype != NULL) {
    HPUT_LIT(h, "Content-Type: ");
    hput(h, ctype, ctype_len);
    HPUT_LIT(h, "\r\n");
  }
  if (!bodiless(status)) HPUT_LIT(h, "Content-Length: ");
}

/* The prefix from the actor's copy when the status and Content-Type are
 * the last response's (and the Date did not change since); else built,
 * and kept when it fits. h is empty: nothing was flushed below. */
static void put_prefix(hbuf *h, sh_http_actor *a, const sh_http_response *r) {
  sh_http_prefix *p = &a->pre;
  if (p->valid && p->status == r->status && p->ctype == r->content_type) {
    hput(h, p->b, p->len);
    return;
  }
  size_t cl = r->content_type != NULL ? strlen(r->content_type) : 0;
  head_prefix(h, a, r->status, r->content_type, cl);
  p->valid = cl <= SH_HTTP_PREFIX_CTYPE && h->n <= sizeof(p->b);
  if (!p->valid) return;
  memcpy(p->b, h->b, h->n);
  p->len = (uint32_t)h->n;
  p->status = r->status;
  p->ctype = r->content_type;
}

static int encode(sh_pctx *c, sh_http_conn *conn, sh_http_response *r, uint8_t flags, bool close) {
  /* No limit here: requests are taken only while the buffer is low
   * (room), so it holds the responses of the requests outstanding. */
  hbuf h;
  /* Not an initialiser: it would zero the 2 KiB buffer per response. */
  h.out = sh_pctx_out(c);
  h.n = 0;
  h.rc = 0;
  put_prefix(&h, conn->actor, r);
  bool nobody = bodiless(r->status);
  if (!nobody) {
    hput_u64(&h, r->inline_len + sh_buf_len(&r->body));
    HPUT_LIT(&h, "\r\n");
  }
  if (sh_buf_len(&r->headers) > 0) {
    hflush(&h);
    if (h.rc == 0 && sh_buf_move(h.out, &r->headers, sh_buf_len(&r->headers)) != 0) h.rc = -ENOMEM;
  }
  if (close) HPUT_LIT(&h, "Connection: close\r\n");
  else if (flags & F_KA10) HPUT_LIT(&h, "Connection: keep-alive\r\n");
  HPUT_LIT(&h, "\r\n");
  if (!nobody && !(flags & F_HEAD)) hput(&h, r->inline_body, r->inline_len);
  hflush(&h);
  if (!nobody && !(flags & F_HEAD) && h.rc == 0 && sh_buf_len(&r->body) > 0 &&
      sh_buf_move(h.out, &r->body, sh_buf_len(&r->body)) != 0)
    h.rc = -ENOMEM;
  return h.rc;
}

/* What the response to the oldest outstanding request needs; a response
 * no request asked for (the 503 of a refused connection) closes. */
static uint8_t pop(codec *k) {
  if (k->count == 0) return F_CLOSE;
  uint8_t f = ring_get(k, k->head);
  if (k->count == 1 && k->close_last) f |= F_CLOSE;
  k->head = (k->head + 1) % SH_HTTP_RING;
  k->count--;
  return f;
}

static int codec_outbound(sh_pctx *c, sh_msg *m) {
  if (sh_msg_is(m, &resume_msg_type)) {
    sh_msg_free(m);
    codec *k = state(c);
    return k->blocked && !k->closing ? pump(c, k) : 0;
  }
  if (!sh_msg_is(m, &sh_http_response_type)) return sh_pctx_write(c, m);
  codec *k = state(c);
  sh_http_response *r = (sh_http_response *)m;
  if (k->closing) {
    /* A handler closed the connection before this request's turn. */
    sh_msg_free(m);
    return 0;
  }
  uint8_t f = pop(k);
  bool close = r->close || (f & F_CLOSE);
  int rc = k->conn != NULL ? encode(c, k->conn, r, f, close) : -EPIPE;
  sh_msg_free(m);
  if (rc < 0) return rc;
  if (close) {
    k->stopped = k->closing = true;
    /* A lingering close: end the write side once flushed and drop what
     * the client still sends until it closes too. Closing at once would
     * have the kernel answer the client's unread bytes (a body refused
     * with 413, pipelined requests) with a reset, which can destroy the
     * response before the client reads it. The idle timeout bounds the
     * flush and the linger, as it does after any response. */
    sh_http_conn_arm(k->conn);
    if (sh_channel_shutdown(sh_pctx_channel(c)) != 0) sh_channel_close(sh_pctx_channel(c));
    return 0;
  }
  if (k->count == 0) sh_http_conn_arm(k->conn);
  /* The ring had stopped decoding: whole requests may wait in the read
   * buffer, and no read may come to decode them. */
  return k->blocked ? pump(c, k) : 0;
}

void sh_http_codec_resume(sh_channel *ch) {
  sh_msg *m = sh_msg_alloc(&resume_msg_type);
  /* A closed channel has nothing to resume (-EPIPE); a decoding error
   * closes it, as it would from a read. */
  int rc = m != NULL ? sh_channel_write(ch, m) : -ENOMEM;
  if (rc < 0 && rc != -EPIPE) sh_channel_close(ch);
}

static void codec_closed(sh_pctx *c, int error) {
  (void)error;
  codec *k = sh_pctx_state(c);
  if (k->parsing) sh_http_parser_reset(&k->p);
}

const sh_handler sh_http_codec = {
    .name = "http",
    .state_size = sizeof(codec),
    .decode = codec_decode,
    .outbound = codec_outbound,
    .closed = codec_closed,
};
