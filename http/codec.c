/*
 * The HTTP codec: the first handler of every connection's pipeline.
 *
 * Inbound, the parser (parser.h) turns bytes into requests, fired toward
 * the actor one by one; a parse error is fired too, as a request whose
 * _status the dispatcher answers, so that the responses of the requests
 * before it still go first. Outbound, each sh_http_response is encoded
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
 */
#include <assert.h>
#include <string.h>

#include "parser.h"
#include "server.h"

enum {
  F_HEAD = 1,  /* a HEAD request: no body bytes */
  F_CLOSE = 2, /* the connection closes after the response */
  F_KA10 = 4,  /* HTTP/1.0 with keep-alive: say so */
};

typedef struct codec {
  sh_http_parser p;
  sh_http_conn *conn;
  sh_buf *in;        /* the channel's read buffer, to resume decoding from */
  uint32_t head, count, cap;
  bool started;
  bool stopped;      /* a closing request was fired: no more */
  bool blocked;      /* decoding stopped with the ring full */
  bool parsing;      /* the parser was initialised */
  bool closing;      /* a response that closes was written: no more */
  uint8_t ring[SH_HTTP_RING];
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
}

static codec *state(sh_pctx *c) {
  codec *k = sh_pctx_state(c);
  if (!k->started) start(c, k);
  return k;
}

/* ---- decoding ------------------------------------------------------------- */

static int fire(sh_pctx *c, codec *k, sh_http_request *r, uint8_t flags) {
  assert(k->count < k->cap);
  k->ring[(k->head + k->count) % SH_HTTP_RING] = flags;
  if (k->count++ == 0) sh_http_conn_disarm(k->conn);
  return sh_pctx_fire(c, &r->hdr);
}

/* The parser's error as a request the dispatcher answers. */
static int fire_error(sh_pctx *c, codec *k) {
  sh_http_request *r = (sh_http_request *)sh_msg_alloc(&sh_http_request_type);
  if (r == NULL) return -ENOMEM;
  r->_status = k->p.error;
  sh_http_count(&k->conn->actor->n.bad);
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
    if (k->count == k->cap) {
      k->blocked = true;
      return 0;
    }
    sh_http_request *r = NULL;
    int rc = sh_http_parse(&k->p, in, &r);
    if (rc < 0) return rc;
    if (rc == SH_HTTP_MORE) return 0;
    uint8_t f = F_CLOSE;
    if (rc == SH_HTTP_ERROR) {
      rc = fire_error(c, k);
    } else {
      f = flags_of(r);
      sh_http_count(&k->conn->actor->n.requests);
      rc = fire(c, k, r, f);
    }
    if (f & F_CLOSE) k->stopped = true;
    if (rc < 0) return rc;
  }
  /* Past a closing request the peer's bytes are dropped as they come. */
  if (k->stopped) sh_buf_consume(in, sh_buf_len(in));
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

static void hput(hbuf *h, const void *p, size_t n) {
  if (h->n + n > sizeof(h->b)) {
    hflush(h);
    if (n > sizeof(h->b)) {
      if (h->rc == 0 && sh_buf_append(h->out, p, n) != 0) h->rc = -ENOMEM;
      return;
    }
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

static int encode(sh_pctx *c, sh_http_conn *conn, sh_http_response *r, uint8_t flags, bool close) {
  const sh_http_server *srv = conn->actor->srv;
  hbuf h = {.out = sh_pctx_out(c)};
  if (sh_buf_len(h.out) > srv->opts.write_limit) return -ENOBUFS;
  status_line(&h, r->status);
  hput(&h, srv->server_line, srv->server_line_len);
  hput(&h, conn->actor->date, SH_HTTP_DATE_LEN);
  HPUT_LIT(&h, "\r\n");
  if (r->content_type != NULL) {
    sh_http_actor *a = conn->actor;
    if (r->content_type != a->ctype) {
      a->ctype = r->content_type;
      a->ctype_len = strlen(a->ctype);
    }
    HPUT_LIT(&h, "Content-Type: ");
    hput(&h, a->ctype, a->ctype_len);
    HPUT_LIT(&h, "\r\n");
  }
  bool nobody = bodiless(r->status);
  if (!nobody) {
    HPUT_LIT(&h, "Content-Length: ");
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
  uint8_t f = k->ring[k->head];
  k->head = (k->head + 1) % SH_HTTP_RING;
  k->count--;
  return f;
}

static int codec_outbound(sh_pctx *c, sh_msg *m) {
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
    sh_channel_close_after_flush(sh_pctx_channel(c));
    return 0;
  }
  if (k->count == 0) sh_http_conn_arm(k->conn);
  /* The ring had stopped decoding: whole requests may wait in the read
   * buffer, and no read may come to decode them. */
  return k->blocked ? pump(c, k) : 0;
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
