/*
 * What the end-to-end tests of the HTTP server (test_e2e_http.c,
 * test_e2e_http_pipeline.c, test_e2e_http_limits.c) share: the handlers
 * and their routes, an actor that never answers (for a handler's ask that
 * times out), a server on a fresh 2-worker system, and the client: the
 * test thread with plain blocking sockets, so that every byte the server
 * writes is seen as a client sees it. The server's and the client's
 * helpers are static inline: a test file need not use them all.
 *
 * Handlers never call cmocka: they CHECK(), and the test thread asserts
 * after shutdown (support/harness.h).
 */
#ifndef TESTS_HTTP_FIXTURE_H
#define TESTS_HTTP_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <stackhouse/http.h>
#include <stackhouse/stackhouse.h>

#include "support/harness.h"

#define WATCHDOG_S 120
/* How long a client waits for a byte before it calls the server stuck. */
#define RECV_TIMEOUT_S 10

/* How long /block may hold its worker. */
#define BLOCK_MS 5000

/* ---- the handlers ----------------------------------------------------------- */

static sh_yield plaintext(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_http_reply(st, 200, "text/plain", "Hello, World!", 13);
}

static sh_yield json(sh_actor *self, sh_stack *st) {
  (void)self;
  char body[64];
  int n = snprintf(body, sizeof(body), "{\"message\":\"%s\"}", "Hello, World!");
  return sh_http_reply(st, 200, "application/json", body, (size_t)n);
}

/* A route of its own for HEAD, after a GET route of the same path. */
static sh_yield head_only(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_http_reply(st, 204, NULL, NULL, 0);
}

/* The query string as the body: numbered requests say which they are. */
static sh_yield echo_query(sh_actor *self, sh_stack *st) {
  (void)self;
  const sh_http_request *r = sh_http_req(st);
  return sh_http_reply(st, 200, "text/plain", r->query.p, r->query.len);
}

/* The request's body back, its pages moved, with a header saying how it came. */
static sh_yield echo_body(sh_actor *self, sh_stack *st) {
  (void)self;
  sh_http_request *req = sh_http_req(st);
  sh_http_response *r = sh_http_response_new(200, "application/octet-stream", NULL, 0);
  if (r == NULL) return sh_throw(st, -ENOMEM);
  CHECK(sh_buf_move(&r->body, &req->body, sh_buf_len(&req->body)) == 0);
  CHECK(sh_http_response_header(r, "X-Chunked", req->chunked ? "yes" : "no") == 0);
  CHECK(sh_http_response_header(r, "Bad", "a\r\nb") == -EINVAL);
  return sh_return(st, &r->hdr);
}

typedef struct slow_locals { sh_future *f; } slow_locals;

/* Answers after SLOW_MS: longer than the idle timeout of the tests. */
#define SLOW_MS 600
static sh_yield slow(sh_actor *self, sh_stack *st) {
  (void)self;
  slow_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_sleep(st, SLOW_MS);
    return l->f != NULL ? sh_suspend(st, 1) : sh_throw(st, -ENOMEM);
  }
  return sh_http_reply(st, 200, "text/plain", "slow", 4);
}

/* Asks an actor that never answers, with a timeout: 504. */
static sh_yield ask_nobody(sh_actor *self, sh_stack *st) {
  (void)self;
  slow_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    const sh_addr *holder = sh_http_data(st);
    l->f = sh_ask(st, holder, th_new_ask(1), 100);
    return l->f != NULL ? sh_suspend(st, 1) : sh_throw(st, -ENOMEM);
  }
  CHECK(sh_future_error(l->f) == -ETIMEDOUT);
  return sh_throw(st, sh_future_error(l->f));
}

/* A body of as many KiB as the query says (at most 16 MiB). */
static sh_yield kib(sh_actor *self, sh_stack *st) {
  (void)self;
  const sh_http_request *req = sh_http_req(st);
  size_t n = (size_t)strtoul(req->query.p, NULL, 10);
  if (n > 16384) n = 16384;
  sh_http_response *r = sh_http_response_new(200, "application/octet-stream", NULL, 0);
  if (r == NULL) return sh_throw(st, -ENOMEM);
  char page[1024];
  memset(page, 'k', sizeof(page));
  for (size_t i = 0; i < n; i++)
    if (sh_buf_append(&r->body, page, sizeof(page)) != 0) {
      sh_msg_free(&r->hdr);
      return sh_throw(st, -ENOMEM);
    }
  return sh_return(st, &r->hdr);
}

/* Holds its worker (the stop of its actor waits for it) until the test
 * lets it go, BLOCK_MS at most. */
static atomic_int g_unblock;
static sh_yield block_worker(sh_actor *self, sh_stack *st) {
  (void)self;
  for (int i = 0; i < BLOCK_MS && !atomic_load(&g_unblock); i++) th_sleep_ms(1);
  return sh_http_reply(st, 200, "text/plain", "late", 4);
}

/* Stops the connection actors (every instance behind the address). */
static sh_yield stop_actor(sh_actor *self, sh_stack *st) {
  CHECK(sh_stop(sh_self(self)) == 0);
  return sh_http_reply(st, 200, "text/plain", "bye", 3);
}

static sh_yield thrower(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_throw(st, -EIO);
}

static sh_yield nothing(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, NULL);
}

#define GET SH_HTTP_M(SH_HTTP_GET)
static const sh_http_route routes[] = {
    {GET, "/plaintext", plaintext},
    {GET, "/json", json},
    {GET | SH_HTTP_M(SH_HTTP_HEAD), "/q", echo_query},
    {SH_HTTP_M(SH_HTTP_POST) | SH_HTTP_M(SH_HTTP_PUT), "/echo", echo_body},
    {GET, "/slow", slow},
    {GET, "/ask", ask_nobody},
    {GET, "/throw", thrower},
    {GET, "/null", nothing},
    {GET, "/static/*", echo_query},
    {GET, "/kib", kib},
    {GET, "/stop", stop_actor},
    {GET, "/block", block_worker},
    {GET, "/h", plaintext},
    {SH_HTTP_M(SH_HTTP_HEAD), "/h", head_only},
};

/* ---- the holder: an actor that never answers -------------------------------- */

typedef struct holder { sh_actor base; bool locked; } holder;
static atomic_int g_held;
static sh_yield holder_ask(sh_actor *self, sh_stack *st) {
  return th_hold(self, st, &((holder *)self)->locked, &g_held);
}
static bool holder_barrier(sh_actor *self, const sh_msg *m) {
  (void)m;
  return !((holder *)self)->locked;
}
static const sh_actor_class holder_class = {.name = "http_holder", .size = sizeof(holder),
                                            .locals_size = sizeof(th_hold_locals),
                                            .ask = holder_ask, .barrier = holder_barrier};

/* ---- a server ------------------------------------------------------------------ */

typedef struct env {
  sh_system *sys;
  sh_http_server *srv;
  sh_netaddr at;
} env;

/* A server on a fresh system of 2 workers; cfg's routes and data are set here. */
static inline env start(sh_http_config cfg) {
  alarm(WATCHDOG_S);
  env e = {.sys = th_env(2, 0)};
  atomic_store(&g_held, 0);
  const sh_addr *h = th_spawn_on(e.sys, &holder_class, NULL, 0);
  assert_int_equal(sh_system_start(e.sys), 0);
  cfg.routes = routes;
  cfg.nroutes = sizeof(routes) / sizeof(routes[0]);
  cfg.locals_size = sizeof(slow_locals);
  cfg.data = (void *)h;
  cfg.instances = 0;
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  assert_int_equal(sh_http_serve(e.sys, &any, &cfg, &e.srv), 0);
  assert_int_equal(sh_http_server_addr(e.srv, &e.at), 0);
  assert_int_not_equal(e.at.port, 0);
  return e;
}

static inline sh_http_stats stats(const env *e) {
  sh_http_stats s;
  assert_int_equal(sh_http_server_stats(e->srv, &s), 0);
  return s;
}

static inline void end(env *e) { th_end(e->sys); }

/* ---- the client ------------------------------------------------------------------ */

typedef struct client {
  int fd;
  char *buf;
  size_t len, cap;
} client;

typedef struct resp {
  int status;
  char head[4096];
  char *body;
  size_t body_len;
} resp;

static inline client connect_to(const sh_netaddr *at) {
  client c = {.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), .cap = 1 << 16};
  assert_true(c.fd >= 0);
  struct timeval tv = {.tv_sec = RECV_TIMEOUT_S};
  setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(c.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  int one = 1;
  setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(at->ip);
  sa.sin_port = htons(at->port);
  assert_int_equal(connect(c.fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  c.buf = malloc(c.cap);
  assert_non_null(c.buf);
  return c;
}

static inline void disconnect(client *c) {
  close(c->fd);
  free(c->buf);
}

/* Sends everything; false when the server closed first. */
static inline bool try_send(client *c, const void *p, size_t n) {
  const char *b = p;
  while (n > 0) {
    ssize_t k = send(c->fd, b, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    b += k;
    n -= (size_t)k;
  }
  return true;
}

static inline void send_str(client *c, const char *s) {
  assert_true(try_send(c, s, strlen(s)));
}

/* One read more into the buffer: bytes read, 0 at the end, -1 on error. */
static inline ssize_t fill(client *c) {
  if (c->len == c->cap) {
    c->cap *= 2;
    c->buf = realloc(c->buf, c->cap);
    assert_non_null(c->buf);
  }
  ssize_t k = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
  if (k > 0) c->len += (size_t)k;
  return k;
}

static inline long content_length(const char *head) {
  const char *h = strcasestr(head, "\r\nContent-Length: ");
  return h != NULL ? strtol(h + 18, NULL, 10) : 0;
}

/* Reads one response (no body for a HEAD); false at an early end. */
static inline bool read_resp(client *c, resp *r, bool head_req) {
  char *end;
  while ((end = memmem(c->buf, c->len, "\r\n\r\n", 4)) == NULL)
    if (fill(c) <= 0) return false;
  size_t hl = (size_t)(end - c->buf) + 4;
  assert_true(hl < sizeof(r->head));
  memcpy(r->head, c->buf, hl);
  r->head[hl] = '\0';
  assert_memory_equal(r->head, "HTTP/1.1 ", 9);
  r->status = atoi(r->head + 9);
  r->body_len = head_req ? 0 : (size_t)content_length(r->head);
  while (c->len < hl + r->body_len)
    if (fill(c) <= 0) return false;
  r->body = malloc(r->body_len + 1);
  memcpy(r->body, c->buf + hl, r->body_len);
  r->body[r->body_len] = '\0';
  memmove(c->buf, c->buf + hl + r->body_len, c->len - hl - r->body_len);
  c->len -= hl + r->body_len;
  return true;
}

static inline resp *get_resp(client *c, bool head_req) {
  resp *r = calloc(1, sizeof(*r));
  assert_true(read_resp(c, r, head_req));
  return r;
}

static inline void resp_free(resp *r) {
  free(r->body);
  free(r);
}

static inline bool has_header(const resp *r, const char *line) {
  return strstr(r->head, line) != NULL;
}

/* The server closes: the end of stream (or a reset), with nothing before it. */
static inline void expect_closed(client *c) {
  ssize_t k;
  while ((k = fill(c)) > 0) {
  }
  assert_int_equal(c->len, 0);
  assert_true(k == 0 || errno == ECONNRESET);
}

/* One request, its response's status, checked by the caller. */
static inline resp *roundtrip(client *c, const char *req) {
  send_str(c, req);
  return get_resp(c, strncmp(req, "HEAD ", 5) == 0);
}

static inline void expect_status(client *c, const char *req, int status) {
  resp *r = roundtrip(c, req);
  if (r->status != status) fprintf(stderr, "%s-> %s", req, r->head);
  assert_int_equal(r->status, status);
  resp_free(r);
}
#endif
