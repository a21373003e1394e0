/*
 * The HTTP server (http.h): a TCP server whose connection actors run the
 * codec (codec.c) at the head of each connection, route each request to
 * its handler in a channel stack, and keep, per actor, the Date header
 * and the idle timeout of their connections, both on one periodic timer.
 */
#define _POSIX_C_SOURCE 200809L
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"

/* Closed connections' records an actor keeps for the next ones. */
#define FREE_RECORDS 256u

/* ---- the server's life ------------------------------------------------------- */

static void server_release(sh_http_server *s) {
  if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) free(s);
}

/* ---- Date ---------------------------------------------------------------------- */

/* RFC 7231's IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT". */
static void format_date(char out[SH_HTTP_DATE_LEN + 1], int64_t ms) {
  static const char days[] = "SunMonTueWedThuFriSat";
  static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char y[16];
  int yn = snprintf(y, sizeof(y), "%04d", tm.tm_year + 1900);
  if (yn != 4) memcpy(y, "9999", 5);
  char *p = out;
  memcpy(p, days + 3 * tm.tm_wday, 3);
  p[3] = ',';
  p[4] = ' ';
  p[5] = (char)('0' + tm.tm_mday / 10);
  p[6] = (char)('0' + tm.tm_mday % 10);
  p[7] = ' ';
  memcpy(p + 8, months + 3 * tm.tm_mon, 3);
  p[11] = ' ';
  memcpy(p + 12, y, 4);
  p[16] = ' ';
  const int hms[3] = {tm.tm_hour, tm.tm_min, tm.tm_sec};
  for (int i = 0; i < 3; i++) {
    p[17 + 3 * i] = (char)('0' + hms[i] / 10);
    p[18 + 3 * i] = (char)('0' + hms[i] % 10);
    p[19 + 3 * i] = i < 2 ? ':' : ' ';
  }
  memcpy(p + 26, "GMT", 4);
}

/* ---- idle connections ------------------------------------------------------------ */

/* Armed connections are appended as they arm, so the list stays ordered
 * by armed_at and the sweep stops at the first one not yet due. */
void sh_http_conn_arm(sh_http_conn *c) {
  sh_http_actor *a = c->actor;
  if (c->armed_at >= 0) return;
  c->armed_at = sh_clock_ms();
  c->armed_pending = sh_channel_pending_bytes(c->ch);
  c->next = NULL;
  c->prev = a->armed_tail;
  if (a->armed_tail != NULL) a->armed_tail->next = c;
  else a->armed_head = c;
  a->armed_tail = c;
}

void sh_http_conn_disarm(sh_http_conn *c) {
  sh_http_actor *a = c->actor;
  if (c->armed_at < 0) return;
  if (c->prev != NULL) c->prev->next = c->next;
  else a->armed_head = c->next;
  if (c->next != NULL) c->next->prev = c->prev;
  else a->armed_tail = c->prev;
  c->prev = c->next = NULL;
  c->armed_at = -1;
}

static void sweep(sh_http_actor *a) {
  int64_t idle = a->srv->cfg.idle_timeout_ms;
  if (idle == SH_FOREVER) return;
  int64_t now = sh_clock_ms();
  sh_http_conn *c;
  /* Bounded by the armed connections: each turn disarms one, and one armed
   * again goes behind every due one (its armed_at is now, and idle > 0):
   * at most one turn per open connection. */
  uint32_t turns = 0, open = a->nconns;
  while ((c = a->armed_head) != NULL && now - c->armed_at >= idle) {
    assert(++turns <= open);
    (void)open;
    size_t pending = sh_channel_pending_bytes(c->ch);
    bool draining = pending > 0 && pending < c->armed_pending;
    sh_http_conn_disarm(c);
    /* A peer still reading its responses is slow, not idle: a timeout
     * counts from its last progress (closing would drop what it asked for). */
    if (draining) {
      sh_http_conn_arm(c);
      continue;
    }
    sh_http_count(&a->n->timeouts);
    sh_channel_close(c->ch);
  }
}

/* The timer runs only while the actor has connections, so that an idle
 * server is quiet (and a finished simulation has nothing left to run). */
/* The Date header, and the cached response head that holds it. */
static void refresh_date(sh_http_actor *a) {
  format_date(a->date, sh_time_ms());
  a->pre.valid = false;
}

static void ticking_start(sh_http_actor *a) {
  refresh_date(a);
  int64_t idle = a->srv->cfg.idle_timeout_ms, period = 1000;
  if (idle != SH_FOREVER && idle / 2 < period) period = idle / 2 > 0 ? idle / 2 : 1;
  /* No timer (no memory): a stale Date and no idle timeout, nothing worse. */
  a->ticking = sh_timer_start(&a->base, period, period, NULL, &a->timer) == 0;
}

static void ticking_stop(sh_http_actor *a) {
  if (a->ticking) (void)sh_timer_cancel(&a->base, a->timer);
  a->ticking = false;
}

static void actor_tick(sh_actor *self, uint64_t id, void *arg) {
  (void)id;
  (void)arg;
  sh_http_actor *a = (sh_http_actor *)self;
  refresh_date(a);
  sweep(a);
}

/* ---- connections ------------------------------------------------------------------ */

static sh_http_conn *conn_new(sh_http_actor *a, sh_channel *ch) {
  sh_http_conn *c = a->free;
  if (c != NULL) {
    a->free = c->next;
    a->nfree--;
  } else if ((c = malloc(sizeof(*c))) == NULL) {
    return NULL;
  }
  *c = (sh_http_conn){.actor = a, .ch = ch, .armed_at = -1};
  return c;
}

static void conn_free(sh_http_actor *a, sh_http_conn *c) {
  sh_http_conn_disarm(c);
  if (a->nfree >= FREE_RECORDS) {
    free(c);
    return;
  }
  c->next = a->free;
  a->free = c;
  a->nfree++;
}

/* Past max_connections: 503 at once, and the close after it. */
static void refuse(sh_http_conn *c) {
  c->refused = true;
  sh_http_count(&c->actor->n->refused);
  sh_http_response *r = sh_http_response_status(503, true);
  if (r == NULL || sh_channel_write(c->ch, &r->hdr) != 0) sh_channel_close(c->ch);
}

/* A connection takes a place under max_connections: false past it.
 * Relaxed: the count orders no other memory, and a compare-exchange
 * always sees its latest value, so the limit is exact. */
static bool admit(sh_http_server *s) {
  unsigned n = atomic_load_explicit(&s->served, memory_order_relaxed);
  do {
    if (n >= s->cfg.max_connections) return false;
  } while (!atomic_compare_exchange_weak_explicit(&s->served, &n, n + 1, memory_order_relaxed,
                                                  memory_order_relaxed));
  return true;
}

static void opened(sh_http_actor *a, sh_channel *ch) {
  sh_http_server *s = a->srv;
  sh_http_count(&a->n->connections);
  atomic_fetch_add_explicit(&s->open, 1, memory_order_relaxed);
  sh_http_conn *c = conn_new(a, ch);
  if (c == NULL) {
    sh_channel_close(ch);
    return;
  }
  sh_channel_set_data(ch, c);
  sh_http_conn_arm(c);
  if (s->cfg.max_connections != 0 && !admit(s)) refuse(c);
}

static void actor_event(sh_actor *self, sh_channel *ch, int event, int error) {
  (void)error;
  sh_http_actor *a = (sh_http_actor *)self;
  if (event == SH_CHANNEL_OPEN) {
    if (a->nconns++ == 0) ticking_start(a);
    opened(a, ch);
  } else if (event == SH_CHANNEL_WRITABLE || event == SH_CHANNEL_EOF) {
    sh_http_conn *c = sh_channel_data(ch);
    if (c == NULL) return;
    if (event == SH_CHANNEL_EOF) {
      c->eof = true;
    } else if (c->armed_at >= 0) {
      /* The peer read its responses down to the low watermark: progress,
       * and the rest is taken at once or read slowly (the sweep's rule).
       * Else a buffer that empties between two sweeps would look idle
       * since it was armed, and close as soon as it drained. */
      sh_http_conn_disarm(c);
      sh_http_conn_arm(c);
    }
    sh_http_codec_resume(ch);
  } else if (event == SH_CHANNEL_CLOSED) {
    if (a->nconns > 0 && --a->nconns == 0) ticking_stop(a);
    atomic_fetch_sub_explicit(&a->srv->open, 1, memory_order_relaxed);
    sh_http_conn *c = sh_channel_data(ch);
    if (c != NULL && !c->refused && a->srv->cfg.max_connections != 0)
      atomic_fetch_sub_explicit(&a->srv->served, 1, memory_order_relaxed);
    if (c != NULL) conn_free(a, c);
    sh_channel_set_data(ch, NULL);
  }
}

/* ---- the actor's life ---------------------------------------------------------------- */

static int actor_init(sh_actor *self, void *arg) {
  sh_http_actor *a = (sh_http_actor *)self;
  /* Everything after the runtime's part starts empty. */
  memset((char *)a + sizeof(a->base), 0, sizeof(*a) - sizeof(a->base));
  sh_http_server *s = a->srv = arg;
  unsigned i = atomic_fetch_add_explicit(&s->nactors, 1, memory_order_relaxed);
  /* One slot per instance spawned: never short. */
  if (i >= s->max_actors) return -ENOSPC;
  a->n = &s->counters[i];
  atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
  return 0;
}

static void actor_stop(sh_actor *self) {
  sh_http_actor *a = (sh_http_actor *)self;
  sh_http_conn *c;
  while ((c = a->free) != NULL) {
    a->free = c->next;
    free(c);
  }
  server_release(a->srv);
}

/* ---- routing ---------------------------------------------------------------------------- */

static bool path_matches(const char *route, size_t n, const sh_http_str *path) {
  if (n > 0 && route[n - 1] == '*') return path->len >= n - 1 && memcmp(route, path->p, n - 1) == 0;
  return path->len == n && memcmp(route, path->p, n) == 0;
}

/* The allowed methods of routes of a path, as an Allow header. */
static void allow_header(sh_http_response *r, uint32_t methods) {
  static const char *const names[] = {NULL,   "GET",     "HEAD",    "POST",  "PUT",
                                      "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"};
  char v[96];
  size_t n = 0;
  for (uint32_t m = SH_HTTP_GET; m <= SH_HTTP_PATCH; m++) {
    if (!(methods & SH_HTTP_M(m))) continue;
    size_t l = strlen(names[m]);
    if (n > 0) {
      memcpy(v + n, ", ", 2);
      n += 2;
    }
    memcpy(v + n, names[m], l);
    n += l;
  }
  v[n] = '\0';
  (void)sh_http_response_header(r, "Allow", v);
}

/* A route's methods: one that takes GET takes HEAD too (the encoder drops
 * the body), as every general-purpose server must. */
static uint32_t methods_of(const sh_http_route *rt) {
  uint32_t m = rt->methods;
  return m & SH_HTTP_M(SH_HTTP_GET) ? m | SH_HTTP_M(SH_HTTP_HEAD) : m;
}

/* 404, 405 (with Allow) or 501 for a request no route takes. */
static sh_yield no_route(sh_http_actor *a, sh_stack *st, const sh_http_request *req) {
  const sh_http_server *s = a->srv;
  uint32_t allowed = 0;
  bool any_method = false;
  for (uint32_t i = 0; i < s->cfg.nroutes; i++) {
    const sh_http_route *rt = &s->cfg.routes[i];
    if (rt->methods == 0) any_method = true;
    if (path_matches(rt->path, s->plen[i], &req->path)) allowed |= methods_of(rt);
  }
  sh_http_count(&a->n->bad);
  uint16_t status = req->method == SH_HTTP_OTHER && !any_method ? 501 : allowed != 0 ? 405 : 404;
  sh_http_response *r = sh_http_response_status(status, false);
  if (r != NULL && status == 405) allow_header(r, allowed);
  return sh_return(st, r != NULL ? &r->hdr : NULL);
}

static int route_for(const sh_http_server *s, const sh_http_request *req, uint32_t m) {
  for (uint32_t i = 0; i < s->cfg.nroutes; i++) {
    const sh_http_route *rt = &s->cfg.routes[i];
    if ((rt->methods == 0 || (rt->methods & m)) && path_matches(rt->path, s->plen[i], &req->path))
      return (int)i;
  }
  return -1;
}

/* A GET route takes HEAD only when no route takes HEAD itself: one that
 * does, even listed after, is not shadowed. */
static int route_of(const sh_http_server *s, const sh_http_request *req) {
  int i = route_for(s, req, SH_HTTP_M(req->method));
  if (i < 0 && req->method == SH_HTTP_HEAD) i = route_for(s, req, SH_HTTP_M(SH_HTTP_GET));
  return i;
}

/* The class's channel handler: every entry of every request's stack. */
static sh_yield dispatch(sh_actor *self, sh_stack *st) {
  sh_http_actor *a = (sh_http_actor *)self;
  const sh_http_server *s = a->srv;
  sh_http_request *req = sh_http_req(st);
  if (req->_route == 0) {
    if (req->_status != 0) {
      sh_http_response *r = sh_http_response_status(req->_status, true);
      return sh_return(st, r != NULL ? &r->hdr : NULL);
    }
    int i = route_of(s, req);
    if (i < 0) return no_route(a, st, req);
    req->_route = (uint16_t)(i + 1);
  }
  return s->cfg.routes[req->_route - 1].handler(self, st);
}

/* ---- the channel's options ------------------------------------------------------------- */

/* Requests are no barriers: head-of-line keeps the responses in order. */
static bool no_barrier(const sh_msg *m) {
  (void)m;
  return false;
}

/* A stack without a response still answers, in its turn. */
static sh_msg *fallback(sh_channel *ch, int error) {
  uint16_t status = 500;
  switch (error) {
#ifndef SH_MUTANT_server_timeout_as_500
  case -ETIMEDOUT: status = 504; break;
#endif
  case -EAGAIN:
  case -EBUSY:
  case -ENOBUFS:
  case -ESHUTDOWN:
  case -ECONNREFUSED: status = 503; break;
  default: break;
  }
  sh_http_response *r = sh_http_response_status(status, false);
  /* Nothing to answer with: the order of responses would be lost. */
  if (r == NULL) sh_channel_close(ch);
  return r != NULL ? &r->hdr : NULL;
}

/* ---- serving ------------------------------------------------------------------------------ */

static int validate(const sh_http_config *c) {
  /* A request names its route in 16 bits (sh_http_request._route). */
  if ((c->routes == NULL && c->nroutes > 0) || c->nroutes > UINT16_MAX || c->max_head < 256 ||
      c->max_head > 65535 || c->max_inflight > SH_HTTP_MAX_INFLIGHT || c->idle_timeout_ms < SH_FOREVER ||
      c->instances == 0 || c->locals_size > SH_HTTP_MAX_LOCALS ||
      strlen(c->server_name) > SH_HTTP_MAX_NAME ||
      c->server_name[strcspn(c->server_name, "\r\n")] != '\0')
    return -EINVAL;
  for (uint32_t i = 0; i < c->nroutes; i++) {
    const sh_http_route *r = &c->routes[i];
    if (r->path == NULL || r->handler == NULL || (r->path[0] != '/' && strcmp(r->path, "*") != 0))
      return -EINVAL;
  }
  return 0;
}

static sh_http_config with_defaults(const sh_http_config *in) {
  sh_http_config c = *in;
  if (c.instances == 0) c.instances = SH_SPAWN_PER_WORKER;
  if (c.idle_timeout_ms == 0) c.idle_timeout_ms = 60000;
  if (c.max_head == 0) c.max_head = 8192;
  if (c.max_body == 0) c.max_body = 1u << 20;
  if (c.max_inflight == 0) c.max_inflight = 16;
  if (c.server_name == NULL) c.server_name = "stackhouse";
  return c;
}

/* The connection actors' classes, one per size of stack locals: the
 * runtime reads an actor's class until the system is freed, after the
 * server's memory went with the last stop, so the classes are static. */
#define HTTP_CLASS(locals)                                                                   \
  {.name = "http", .size = sizeof(sh_http_actor), .locals_size = (locals), .kind = SH_IO_ACTOR, \
   .init = actor_init, .stop = actor_stop, .timeout = actor_tick, .channel = dispatch,          \
   .channel_event = actor_event}
static const sh_actor_class classes[] = {
    HTTP_CLASS(0),    HTTP_CLASS(64),    HTTP_CLASS(256),   HTTP_CLASS(1024),
    HTTP_CLASS(4096), HTTP_CLASS(16384), HTTP_CLASS(SH_HTTP_MAX_LOCALS),
};
#undef HTTP_CLASS

static const sh_actor_class *class_for(size_t locals_size) {
  size_t i = 0;
  while (classes[i].locals_size < locals_size) i++;
  return &classes[i];
}

static void setup(sh_http_server *s) {
  s->opts = (sh_channel_opts){
      .handlers = {&sh_http_codec},
      .nhandlers = 1,
      .max_stack_inflight = s->cfg.max_inflight,
      .stack_barrier = no_barrier,
      .head_of_line = true,
      .max_pending_stacks = SH_HTTP_MAX_PENDING,
      /* The channel's defaults, spelled out: the codec reads them. */
      .write_high = 64u << 10,
      .write_low = 16u << 10,
      .write_limit = 4u << 20,
      .fallback_reply = fallback,
  };
  int n = snprintf(s->server_line, sizeof(s->server_line), "Server: %s\r\nDate: ",
                   s->cfg.server_name);
  s->server_line_len = (uint32_t)n;
  atomic_init(&s->refs, 1);
}

/* The server, its actors' counters and its routes' lengths in one block,
 * aligned for the counters' cache lines. */
static sh_http_server *server_new(const sh_http_config *c, uint32_t nactors) {
  size_t head = (sizeof(sh_http_server) + SH_HTTP_LINE - 1) / SH_HTTP_LINE * SH_HTTP_LINE;
  size_t counters = sizeof(sh_http_counters) * nactors;
  size_t size = head + counters + sizeof(uint32_t) * c->nroutes;
  size = (size + SH_HTTP_LINE - 1) / SH_HTTP_LINE * SH_HTTP_LINE;
  sh_http_server *s = aligned_alloc(SH_HTTP_LINE, size);
  if (s == NULL) return NULL;
  memset(s, 0, size);
  s->cfg = *c;
  s->max_actors = nactors;
  s->counters = (sh_http_counters *)(void *)((char *)s + head);
  s->plen = (uint32_t *)(void *)((char *)s->counters + counters);
  for (uint32_t i = 0; i < c->nroutes; i++) s->plen[i] = (uint32_t)strlen(c->routes[i].path);
  setup(s);
  return s;
}

int sh_http_serve(sh_system *sys, const sh_netaddr *at, const sh_http_config *cfg,
                  sh_http_server **out) {
  if (sys == NULL || at == NULL || cfg == NULL) return -EINVAL;
  sh_http_config c = with_defaults(cfg);
  int rc = validate(&c);
  if (rc != 0) return rc;
  uint32_t nactors = c.instances == SH_SPAWN_PER_WORKER ? sh_system_workers(sys) : c.instances;
  sh_http_server *s = server_new(&c, nactors);
  if (s == NULL) return -ENOMEM;
  rc = sh_tcp_serve(sys, at, class_for(c.locals_size), s, c.instances, &s->opts, &s->tcp);
  if (rc == 0 && out != NULL) *out = s;
  /* Its actors hold it from here (or, when the spawn failed, let it go). */
  server_release(s);
  return rc;
}

int sh_http_server_addr(const sh_http_server *s, sh_netaddr *out) {
  if (s == NULL || out == NULL) return -EINVAL;
  return sh_tcp_server_addr(s->tcp, out);
}

static uint64_t get(const atomic_uint_fast64_t *c) {
  return atomic_load_explicit(c, memory_order_relaxed);
}

int sh_http_server_stats(const sh_http_server *s, sh_http_stats *out) {
  if (s == NULL || out == NULL) return -EINVAL;
  *out = (sh_http_stats){.open = atomic_load_explicit(&s->open, memory_order_relaxed)};
  for (uint32_t i = 0; i < s->max_actors; i++) {
    const sh_http_counters *n = &s->counters[i];
    out->connections += get(&n->connections);
    out->refused += get(&n->refused);
    out->requests += get(&n->requests);
    out->bad += get(&n->bad);
    out->timeouts += get(&n->timeouts);
  }
  return 0;
}
