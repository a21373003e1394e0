/*
 * The HTTP scenarios' client (http_client.h): one IO actor, a notice
 * stack per connection that connects and writes, a channel stack per
 * read that parses, and the channel hook that ends or restarts a
 * connection.
 */
#include "http_client.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- responses ------------------------------------------------------------- */

static void parser_reset(hc_parser *p) {
  p->head_len = 0;
  p->in_body = false;
  p->need = 0;
  p->r.status = 0;
  p->r.close = false;
  p->r.allow = false;
  p->r.keep_alive = false;
  p->r.allow_v[0] = '\0';
  p->r.declared = 0;
  p->r.body_len = 0;
  p->r.body_sum = p->r.xsum = HC_SUM0;
  p->r.xlen = 0;
}

static uint32_t fnv(uint32_t h, const char *p, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 16777619u;
  return h;
}

/* A header line the client does not read itself, into the response's sum. */
static void other_header(hc_resp *r, const char *name, const char *v) {
  size_t nl = strlen(name), vl = strlen(v);
  r->xsum = fnv(fnv(fnv(fnv(r->xsum, name, nl), ": ", 2), v, vl), "\n", 1);
  r->xlen += (uint32_t)(nl + vl + 3);
}

static bool bad(hc_conn *c, const char *what) {
  SH_SCN_CHECK(c->s, false, "connection %u, response %u: %s", c->index, c->responses, what);
  hc_close(c);
  return false;
}

/* The header lines of a whole head (status line already read). */
static bool parse_headers(hc_conn *c, char *line) {
  hc_parser *p = &c->p;
  bool has_len = false, has_date = false, has_server = false;
  for (char *end; (end = strstr(line, "\r\n")) != NULL && end != line; line = end + 2) {
    *end = '\0';
    char *colon = strchr(line, ':');
    if (colon == NULL) return bad(c, "a header line without a colon");
    *colon = '\0';
    char *v = colon + 1 + strspn(colon + 1, " \t");
    if (strcasecmp(line, "Content-Length") == 0) {
      char *e;
      unsigned long n = strtoul(v, &e, 10);
      if (*e != '\0' || has_len || n > HC_BODY_LIMIT) return bad(c, "a bad Content-Length");
      p->need = (uint32_t)n;
      has_len = true;
    } else if (strcasecmp(line, "Transfer-Encoding") == 0) {
      return bad(c, "a Transfer-Encoding in a response");
    } else if (strcasecmp(line, "Allow") == 0) {
      p->r.allow = true;
      snprintf(p->r.allow_v, sizeof(p->r.allow_v), "%s", v);
    } else if (strcasecmp(line, "Connection") == 0) {
      p->r.close = strcasecmp(v, "close") == 0;
      p->r.keep_alive = strcasecmp(v, "keep-alive") == 0;
    } else if (strcasecmp(line, "Date") == 0) {
      has_date = true;
    } else if (strcasecmp(line, "Server") == 0) {
      has_server = true;
    } else {
      other_header(&p->r, line, v);
    }
  }
  if (!has_len) return bad(c, "no Content-Length");
  if (!has_date || !has_server) return bad(c, "no Date or no Server header");
  return true;
}

/* A whole head in p->head (NUL-terminated, ends with an empty line). */
static bool parse_head(hc_conn *c) {
  hc_parser *p = &c->p;
  unsigned st;
  char sp;
  if (sscanf(p->head, "HTTP/1.1 %3u%c", &st, &sp) != 2 || sp != ' ' || st < 100 || st > 599)
    return bad(c, "a bad status line");
  p->r.status = (uint16_t)st;
  return parse_headers(c, strstr(p->head, "\r\n") + 2);
}

static void response_done(hc_conn *c) {
  c->responses++;
  c->t_response = sh_clock_ms();
  hc_resp r = c->p.r;
  parser_reset(&c->p);
  if (c->ops->response != NULL) c->ops->response(c, &r);
}

/* One byte of a head; false when the connection is given up. */
static bool head_byte(hc_conn *c, char b) {
  hc_parser *p = &c->p;
  if (p->head_len + 1 >= HC_HEAD_MAX) return bad(c, "a head too long");
  p->head[p->head_len++] = b;
  if (p->head_len < 4 || memcmp(p->head + p->head_len - 4, "\r\n\r\n", 4) != 0) return true;
  p->head[p->head_len] = '\0';
  if (!parse_head(c)) return false;
  p->in_body = true;
  p->r.declared = p->need;
  if (c->ops->bodiless != NULL && c->ops->bodiless(c)) p->need = 0;
  if (p->need == 0) response_done(c);
  return true;
}

/* Bytes read: every response they complete goes to the script. */
static void feed(hc_conn *c, const sh_buf *in) {
  const uint8_t *q;
  size_t off = 0, n;
  while (c->ch != NULL && !c->closing && (n = sh_buf_span(in, off, &q)) > 0) {
    for (size_t i = 0; i < n && c->ch != NULL && !c->closing; i++) {
      hc_parser *p = &c->p;
      if (!p->in_body) {
        if (!head_byte(c, (char)q[i])) return;
        continue;
      }
      /* A long body is counted; its first HC_BODY_MAX bytes are kept. */
      if (p->r.body_len < HC_BODY_MAX) p->r.body[p->r.body_len] = (char)q[i];
      p->r.body_sum = fnv(p->r.body_sum, (const char *)q + i, 1);
      if (++p->r.body_len == p->need) response_done(c);
    }
    off += n;
  }
}

bool hc_partial_matches(const hc_conn *c, uint16_t status, const char *body, size_t n) {
  const hc_parser *p = &c->p;
  /* A head cut short is checked by nothing but its length; another status
   * may come of a fault (503 for memory). */
  if (!p->in_body || p->r.status != status) return true;
  uint32_t kept = p->r.body_len < HC_BODY_MAX ? p->r.body_len : HC_BODY_MAX;
  return p->r.body_len <= n && memcmp(p->r.body, body, kept) == 0;
}

bool hc_strict_at(sh_scn *s, bool cond, const char *file, int line, const char *fmt, ...) {
  if (cond) return true;
  char msg[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (sh_scn_faulty(s)) {
    fprintf(stderr, "%s:%d: %s (no fault excuses it)\n", file, line, msg);
    abort();
  }
  return sh_scn_check_at(s, false, file, line, "%s", msg);
}

bool hc_in_order(hc_conn *c, const hc_resp *r, uint32_t *next, uint32_t total, uint16_t status,
                 const char *body, size_t n) {
  /* A 200 that names another request (reordered, duplicated, corrupt) is
   * no fault's doing; another status may be (503 for memory). */
  bool mine = *next < total &&
              (r->status != 200 || (r->body_len == n && memcmp(r->body, body, n) == 0));
  int shown = (int)(r->body_len < 64 ? r->body_len : 64);
  if (!HC_STRICT(c->s, mine, "connection %u, request %u: got %u \"%.*s\", want \"%.*s\"",
                 c->index, *next, r->status, shown, r->body, (int)n, body) ||
      !SH_SCN_CHECK(c->s, r->status == status && !r->close,
                    "connection %u, request %u: got %u%s, want %u", c->index, *next, r->status,
                    r->close ? " and a close" : "", status)) {
    hc_close(c);
    return false;
  }
  if (++*next == total) hc_close(c);
  return true;
}

size_t hc_whole(hc_conn *c, int64_t *pause_ms) {
  *pause_ms = 0;
  return c->out_len - c->sent;
}

/* ---- connections ------------------------------------------------------------- */

void hc_close(hc_conn *c) {
  if (c->ch == NULL || c->closing) return;
  /* Its hook may come later: nothing more is read or written meanwhile. */
  c->closing = true;
  sh_channel_close(c->ch);
}

typedef struct job_locals {
  sh_future *f;
  sh_channel *ch;
  hc_conn *c;
  uint32_t gen;
  size_t n; /* the chunk about to be written */
} job_locals;

enum { J_CONNECTED = 1, J_PAUSED, J_WRITTEN };

/* The start notice of the stack that waits for the server's closes. */
#define HC_DRAIN UINT32_MAX
/* How long it waits, at most (ms). */
#define HC_DRAIN_MS 3000u

/* The connection this stack started is still the live one. */
static bool live(const job_locals *l) {
  return l->c->gen == l->gen && l->c->ch == l->ch && !l->c->closing;
}

static sh_yield script_done(sh_stack *st, hc_conn *c) {
  c->t_written = sh_clock_ms();
  if (c->ops->after == HC_SHUTDOWN) sh_channel_shutdown(c->ch);
  if (c->ops->after == HC_CLOSE) hc_close(c);
  return sh_return(st, NULL);
}

static sh_yield write_chunk(sh_stack *st, job_locals *l) {
  hc_conn *c = l->c;
  /* Counted first: a write may close the channel at once, and its hook
   * rewinds sent for the next connection. */
  size_t at = c->sent;
  c->sent += l->n;
  sh_bytes *b = sh_bytes_new(c->out + at, l->n);
  l->f = b != NULL ? sh_channel_send(st, c->ch, &b->hdr) : NULL;
  if (l->f != NULL) return sh_suspend(st, J_WRITTEN);
  hc_close(c); /* the script cannot go on on this connection */
  return sh_throw(st, -ENOMEM);
}

/* The script's next step: a chunk, a pause before it, or the end. */
static sh_yield next_chunk(sh_stack *st, job_locals *l) {
  hc_conn *c = l->c;
  int64_t pause = 0;
  l->n = c->ops->chunk(c, &pause);
  if (l->n > c->out_len - c->sent) l->n = c->out_len - c->sent;
  if (l->n == 0) return script_done(st, c);
  if (pause <= 0) return write_chunk(st, l);
  l->f = sh_sleep(st, pause);
  if (l->f == NULL) return sh_throw(st, -ENOMEM);
  return sh_suspend(st, J_PAUSED);
}

static void ended(sh_actor *self, hc_conn *c, int error);
static sh_yield drain(sh_actor *self, sh_stack *st);

static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  hc_world *w = sh_scn_state(s);
  job_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START)
    l->c = sh_scn_go_n(st) == HC_DRAIN ? NULL : &w->conns[sh_scn_go_n(st)];
  if (l->c == NULL) return drain(self, st);
  switch (sh_stack_state(st)) {
  case SH_START:
    l->gen = ++l->c->gen;
    l->c->t_connect = sh_clock_ms();
    /* A slow reader also reads little at a time. */
    sh_channel_opts o = {.read_pages = l->c->ops->read_pause_ms > 0 ? 1 : 0,
                         .max_pending_stacks = l->c->ops->read_pause_ms > 0 ? 2 : 0};
    l->f = sh_tcp_connect(st, &w->at, &o);
    if (l->f == NULL) return sh_throw(st, -ENOMEM);
    return sh_suspend(st, J_CONNECTED);
  case J_CONNECTED:
    if (sh_future_failed(l->f)) {
      ended(self, l->c, sh_future_error(l->f));
      return sh_return(st, NULL);
    }
    l->ch = l->c->ch = sh_future_reply(l->f, sh_channel_msg)->ch;
    l->c->closing = false;
    parser_reset(&l->c->p); /* its sums start from HC_SUM0, not the zeroed state's 0 */
    sh_channel_set_data(l->ch, l->c);
    return next_chunk(st, l);
  case J_PAUSED:
    if (!live(l)) return sh_return(st, NULL);
    return write_chunk(st, l);
  case J_WRITTEN:
    /* A failed write: the channel closed, and its hook tells the rest. */
    if (sh_future_failed(l->f) || !live(l)) return sh_return(st, NULL);
    return next_chunk(st, l);
  }
  return sh_throw(st, -EPROTO);
}

static sh_yield client_channel(sh_actor *self, sh_stack *st) {
  (void)self;
  hc_conn *c = sh_channel_data(sh_stack_channel(st));
  /* A slow reader takes a while over each read (the channel stops reading
   * meanwhile, once its requests waiting reach their bound). */
  if (sh_stack_state(st) == SH_START && c != NULL && c->ops->read_pause_ms > 0) {
    job_locals *l = sh_stack_locals(st);
    l->f = sh_sleep(st, c->ops->read_pause_ms);
    if (l->f != NULL) return sh_suspend(st, 1);
  }
  if (c != NULL && c->ch == sh_stack_channel(st)) feed(c, &sh_stack_msg_as(st, sh_bytes)->buf);
  return sh_return(st, NULL);
}

/* A connection ended: the script says whether to connect again. */
static void ended(sh_actor *self, hc_conn *c, int error) {
  sh_scn *s = sh_scn_of(self);
  hc_world *w = sh_scn_state(s);
  c->ch = NULL;
  c->error = error;
  c->t_close = sh_clock_ms();
  bool again = c->ops->closed != NULL && c->ops->closed(c, error);
  parser_reset(&c->p);
  c->responses = 0;
  if (again) {
    c->sent = c->resume;
    if (sh_scn_kick_n(sh_self(self), c->index) == 0) return;
  }
  if (!SH_SCN_CHECK(s, !c->ended, "connection %u ended twice", c->index)) return;
  c->ended = true;
  if (atomic_fetch_sub(&w->left, 1) != 1) return;
  /* The last one: the server must close its ends too, and soon. */
  if (w->server == NULL || sh_scn_kick_n(sh_self(self), HC_DRAIN) != 0)
    sh_scn_done(s, sh_actor_system(self));
}

/* Waits (a stack of the client) until the server has no connection open. */
static sh_yield drain(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  hc_world *w = sh_scn_state(s);
  job_locals *l = sh_stack_locals(st);
  sh_http_stats hs = {0};
  if (sh_stack_state(st) == SH_START) l->n = 0;
  sh_http_server_stats(w->server, &hs);
  if (hs.open > 0 && l->n++ < HC_DRAIN_MS) {
    l->f = sh_sleep(st, 1);
    if (l->f != NULL) return sh_suspend(st, J_PAUSED);
  }
  SH_SCN_CHECK(s, hs.open == 0, "%llu server connections still open %zu ms after the clients'"
               " last closed", (unsigned long long)hs.open, l->n);
  w->stats = hs;
  w->drained = true;
  sh_scn_done(s, sh_actor_system(self));
  return sh_return(st, NULL);
}

static void client_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  hc_conn *c = sh_channel_data(ch);
  if (ev == SH_CHANNEL_CLOSED && c != NULL && c->ch == ch) ended(self, c, error);
}

static const sh_actor_class client_class = {
    .name = "http_client",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(job_locals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .notice = client_notice,
    .channel = client_channel,
    .channel_event = client_event,
};

int hc_serve(sh_scn *s, sh_system *sys, const sh_http_config *cfg, sh_http_server **srv,
             hc_world *w, hc_conn *conns, uint32_t n) {
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  int rc = sh_http_serve(sys, &any, cfg, srv);
  if (rc == 0) rc = sh_http_server_addr(*srv, &w->at);
  if (rc != 0) return rc;
  w->conns = conns;
  w->nconns = n;
  w->server = *srv;
  return hc_start(s, sys, w);
}

int hc_start(sh_scn *s, sh_system *sys, hc_world *w) {
  atomic_store(&w->left, w->nconns);
  for (uint32_t i = 0; i < w->nconns; i++) {
    w->conns[i].s = s;
    w->conns[i].index = i;
  }
  int rc = sh_scn_spawn(s, sys, &client_class, 0, 1, &w->client);
  for (uint32_t i = 0; rc == 0 && !w->manual && i < w->nconns; i++)
    rc = sh_scn_kick_n(w->client, i);
  return rc;
}

int hc_connect(hc_world *w, uint32_t i) {
  if (!w->manual || i >= w->nconns) return -EINVAL;
  return sh_scn_kick_n(w->client, i);
}
