/*
 * End-to-end tests of the HTTP server on the production backend (epoll,
 * real loopback sockets), through the public headers only. The test
 * thread is the client, with plain blocking sockets, so that every byte
 * the server writes is seen as a client sees it:
 *   - exact responses (/plaintext, /json; Date by its shape and year,
 *     which checks sh_time_ms), keep-alive, HTTP/1.0, HEAD, Connection:
 *     close, a thousand pipelined requests answered in order, bodies sent
 *     with Content-Length and chunked followed by another request;
 *   - each bad input answered with its status and the close after it, and
 *     the 404 / 405 / 501 of routing that keep the connection;
 *   - the idle timeout against an idle and a slow sender, not against a
 *     slow handler; max_connections; the fallback statuses of handlers
 *     that time out (504), throw or return nothing (500);
 *   - clients on several threads; no pool malloc per request.
 *
 * Handlers never call cmocka: they CHECK(), and the test thread asserts
 * after shutdown (support/harness.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* alarm, MSG_NOSIGNAL, strcasestr, memmem */
#endif

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
static env start(sh_http_config cfg) {
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

static sh_http_stats stats(const env *e) {
  sh_http_stats s;
  assert_int_equal(sh_http_server_stats(e->srv, &s), 0);
  return s;
}

static void end(env *e) { th_end(e->sys); }

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

static client connect_to(const sh_netaddr *at) {
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

static void disconnect(client *c) {
  close(c->fd);
  free(c->buf);
}

/* Sends everything; false when the server closed first. */
static bool try_send(client *c, const void *p, size_t n) {
  const char *b = p;
  while (n > 0) {
    ssize_t k = send(c->fd, b, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    b += k;
    n -= (size_t)k;
  }
  return true;
}

static void send_str(client *c, const char *s) { assert_true(try_send(c, s, strlen(s))); }

/* One read more into the buffer: bytes read, 0 at the end, -1 on error. */
static ssize_t fill(client *c) {
  if (c->len == c->cap) {
    c->cap *= 2;
    c->buf = realloc(c->buf, c->cap);
    assert_non_null(c->buf);
  }
  ssize_t k = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
  if (k > 0) c->len += (size_t)k;
  return k;
}

static long content_length(const char *head) {
  const char *h = strcasestr(head, "\r\nContent-Length: ");
  return h != NULL ? strtol(h + 18, NULL, 10) : 0;
}

/* Reads one response (no body for a HEAD); false at an early end. */
static bool read_resp(client *c, resp *r, bool head_req) {
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

static resp *get_resp(client *c, bool head_req) {
  resp *r = calloc(1, sizeof(*r));
  assert_true(read_resp(c, r, head_req));
  return r;
}

static void resp_free(resp *r) {
  free(r->body);
  free(r);
}

static bool has_header(const resp *r, const char *line) { return strstr(r->head, line) != NULL; }

/* The server closes: the end of stream (or a reset), with nothing before it. */
static void expect_closed(client *c) {
  ssize_t k;
  while ((k = fill(c)) > 0) {
  }
  assert_int_equal(c->len, 0);
  assert_true(k == 0 || errno == ECONNRESET);
}

/* One request, its response's status, checked by the caller. */
static resp *roundtrip(client *c, const char *req) {
  send_str(c, req);
  return get_resp(c, strncmp(req, "HEAD ", 5) == 0);
}

static void expect_status(client *c, const char *req, int status) {
  resp *r = roundtrip(c, req);
  if (r->status != status) fprintf(stderr, "%s-> %s", req, r->head);
  assert_int_equal(r->status, status);
  resp_free(r);
}

/* ---- exact responses ----------------------------------------------------------------- */

/* "Www, DD Mon YYYY HH:MM:SS GMT" of this year. */
static void check_date(const char *d) {
  static const char *const days = "Sun Mon Tue Wed Thu Fri Sat ";
  static const char *const months = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec ";
  char day[4] = {d[0], d[1], d[2], 0}, mon[4] = {d[8], d[9], d[10], 0};
  assert_non_null(strstr(days, day));
  assert_non_null(strstr(months, mon));
  assert_memory_equal(d + 3, ", ", 2);
  int dd, yy, h, m, s;
  char tail[8];
  assert_int_equal(sscanf(d + 5, "%2d", &dd), 1);
  assert_int_equal(sscanf(d + 12, "%4d %2d:%2d:%2d %3s", &yy, &h, &m, &s, tail), 5);
  assert_string_equal(tail, "GMT");
  assert_true(dd >= 1 && dd <= 31 && h < 24 && m < 60 && s < 61);
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  assert_int_equal(yy, tm.tm_year + 1900);
}

/* A response with its Date replaced by a fixed one, to compare whole. */
static void expect_exact(client *c, const char *req, const char *want_head, const char *want_body) {
  resp *r = roundtrip(c, req);
  char *d = strstr(r->head, "\r\nDate: ");
  assert_non_null(d);
  check_date(d + 8);
  memcpy(d + 8, "Sun, 06 Nov 1994 08:49:37 GMT", 29);
  assert_string_equal(r->head, want_head);
  assert_string_equal(r->body, want_body);
  resp_free(r);
}

#define HEAD_OF(type, len)                                                                   \
  "HTTP/1.1 200 OK\r\nServer: stackhouse\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n" \
  "Content-Type: " type "\r\nContent-Length: " len "\r\n\r\n"

/* Catches a wrong byte anywhere in the TechEmpower responses, a Date not
 * of the wall clock, and a connection not kept alive between them. */
static void test_exact_responses_keep_alive(void **state) {
  (void)state;
  env e = start((sh_http_config){0});
  client c = connect_to(&e.at);
  for (int i = 0; i < 3; i++) {
    expect_exact(&c, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", HEAD_OF("text/plain", "13"),
                 "Hello, World!");
    expect_exact(&c, "GET /json HTTP/1.1\r\nHost: x\r\n\r\n", HEAD_OF("application/json", "27"),
                 "{\"message\":\"Hello, World!\"}");
  }
  assert_int_equal(stats(&e).requests, 6);
  assert_int_equal(stats(&e).connections, 1);
  disconnect(&c);
  end(&e);
}

/* ---- connections: close, HTTP/1.0, HEAD ------------------------------------------------ */

/* Catches a close not honoured (or not announced, or requests pipelined
 * after it still handled), a HTTP/1.0 client kept open without asking,
 * one that asked not kept, and a HEAD response with body bytes (the next
 * response would start inside them). */
static void test_close_http10_head(void **state) {
  (void)state;
  env e = start((sh_http_config){0});
  client c = connect_to(&e.at);
  resp *r = roundtrip(&c, "GET /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  assert_int_equal(r->status, 200);
  assert_true(has_header(r, "\r\nConnection: close\r\n"));
  resp_free(r);
  expect_closed(&c);
  disconnect(&c);

  /* A request pipelined after the closing one is not even handled. */
  c = connect_to(&e.at);
  uint64_t handled = stats(&e).requests;
  send_str(&c, "GET /q?1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
               "GET /q?2 HTTP/1.1\r\nHost: x\r\n\r\n");
  r = get_resp(&c, false);
  assert_string_equal(r->body, "1");
  resp_free(r);
  expect_closed(&c);
  disconnect(&c);
  assert_int_equal(stats(&e).requests, handled + 1);

  c = connect_to(&e.at);
  r = roundtrip(&c, "GET /plaintext HTTP/1.0\r\n\r\n");
  assert_true(has_header(r, "\r\nConnection: close\r\n"));
  assert_string_equal(r->body, "Hello, World!");
  resp_free(r);
  expect_closed(&c);
  disconnect(&c);

  c = connect_to(&e.at);
  for (int i = 0; i < 2; i++) {
    r = roundtrip(&c, "GET /plaintext HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_true(has_header(r, "\r\nConnection: keep-alive\r\n"));
    resp_free(r);
  }
  r = roundtrip(&c, "HEAD /q?abcdef HTTP/1.1\r\nHost: x\r\n\r\n");
  assert_int_equal(r->status, 200);
  assert_true(has_header(r, "\r\nContent-Length: 6\r\n"));
  resp_free(r);
  r = roundtrip(&c, "GET /q?xyz HTTP/1.1\r\nHost: x\r\n\r\n");
  assert_string_equal(r->body, "xyz");
  resp_free(r);
  r = roundtrip(&c, "GET /static/a/b?p HTTP/1.1\r\nHost: x\r\n\r\n");
  assert_string_equal(r->body, "p");
  resp_free(r);
  disconnect(&c);
  end(&e);
}

/* ---- pipelining -------------------------------------------------------------------------- */

#define PIPELINED 1000

/* A thousand requests in one write, answered in order: catches a cap on
 * pipelining, a lost request when the ring of outstanding requests fills
 * (decoding must resume from the buffered bytes), and reordering. */
static void test_pipelined_thousand(void **state) {
  (void)state;
  env e = start((sh_http_config){0});
  client c = connect_to(&e.at);
  size_t cap = PIPELINED * 48, n = 0;
  char *all = malloc(cap);
  for (int i = 0; i < PIPELINED; i++)
    n += (size_t)snprintf(all + n, cap - n, "GET /q?%d HTTP/1.1\r\nHost: x\r\n\r\n", i);
  assert_true(try_send(&c, all, n));
  free(all);
  for (int i = 0; i < PIPELINED; i++) {
    resp *r = get_resp(&c, false);
    assert_int_equal(r->status, 200);
    assert_int_equal(atoi(r->body), i);
    resp_free(r);
  }
  expect_status(&c, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", 200);
  disconnect(&c);
  end(&e);
}


/* Pipelined requests for large responses, read late: the server stops
 * taking requests while its write buffer is high, and answers every one
 * once the client reads. Catches a slow reader cut off (its responses
 * past the write limit) instead of pushed back. */
static void pipelined_large(const env *e, int n, int kibs) {
  uint64_t before = stats(e).requests;
  client c = connect_to(&e->at);
  char req[64];
  for (int i = 0; i < n; i++) {
    snprintf(req, sizeof(req), "GET /kib?%d HTTP/1.1\r\nHost: x\r\n\r\n", kibs);
    send_str(&c, req);
  }
  th_sleep_ms(200);
  /* Pushed back: not every request taken while none is read. */
  if (n > 100) assert_true(stats(e).requests - before < (uint64_t)n);
  for (int i = 0; i < n; i++) {
    resp *r = get_resp(&c, false);
    assert_int_equal(r->status, 200);
    assert_int_equal(r->body_len, (size_t)kibs << 10);
    resp_free(r);
  }
  expect_status(&c, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", 200);
  disconnect(&c);
}

static void test_pipelined_large_responses(void **state) {
  (void)state;
  env e = start((sh_http_config){0});
  pipelined_large(&e, 16, 512);  /* fewer than the requests handled at once */
  pipelined_large(&e, 300, 64);  /* more than the codec takes ahead */
  end(&e);
}

/* ---- bodies --------------------------------------------------------------------------------- */

/* Catches a body not consumed (the next request would parse inside it),
 * a chunked body decoded wrong, and a large body cut short. */
static void test_bodies_then_next(void **state) {
  (void)state;
  env e = start((sh_http_config){0});
  client c = connect_to(&e.at);
  resp *r = roundtrip(&c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world");
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "hello world");
  assert_true(has_header(r, "\r\nX-Chunked: no\r\n"));
  resp_free(r);
  expect_status(&c, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", 200);
  r = roundtrip(&c, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
  assert_string_equal(r->body, "hello world");
  assert_true(has_header(r, "\r\nX-Chunked: yes\r\n"));
  resp_free(r);
  expect_status(&c, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", 200);
  /* A body of many pages, sent in pieces. */
  size_t big = 200000;
  char *body = malloc(big);
  for (size_t i = 0; i < big; i++) body[i] = (char)('a' + i % 26);
  char head[128];
  snprintf(head, sizeof(head), "PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n", big);
  send_str(&c, head);
  assert_true(try_send(&c, body, big));
  r = get_resp(&c, false);
  assert_int_equal(r->body_len, big);
  assert_memory_equal(r->body, body, big);
  resp_free(r);
  free(body);
  expect_status(&c, "GET /json HTTP/1.1\r\nHost: x\r\n\r\n", 200);
  disconnect(&c);
  end(&e);
}

/* ---- bad input ----------------------------------------------------------------------------------- */

/* One bad request on a fresh connection: its status, then the close. */
static void expect_bad(const env *e, const char *req, size_t n, int status) {
  client c = connect_to(&e->at);
  assert_true(try_send(&c, req, n));
  resp *r = get_resp(&c, false);
  if (r->status != status) fprintf(stderr, "bad input: %.*s-> %s", (int)n, req, r->head);
  assert_int_equal(r->status, status);
  assert_true(has_header(r, "\r\nConnection: close\r\n"));
  resp_free(r);
  expect_closed(&c);
  disconnect(&c);
}
#define BAD(e, s, status) expect_bad((e), (s), sizeof(s) - 1, (status))

/* Catches a bad input accepted, answered with the wrong status, or left
 * open after its answer; and a good request pipelined before a bad one
 * losing its response (or getting it after the error's). */
static void test_bad_input(void **state) {
  (void)state;
  env e = start((sh_http_config){.max_body = 65536, .max_head = 4096});
  BAD(&e, "GARBAGE\r\n\r\n", 400);
  BAD(&e, "GET /plaintext HTTP/1.1\r\nHost x\r\n\r\n", 400);
  BAD(&e, "GET /plaintext HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n", 400);
  BAD(&e, "GET /plaintext HTTP/1.1\r\nHost: x\r\nX-A: a\r\n folded\r\n\r\n", 400);
  BAD(&e, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400);
  BAD(&e, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", 400);
  BAD(&e, "GET /plaintext HTTP/2.0\r\n\r\n", 505);
  BAD(&e, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501);
  /* 413 before the body is sent: the client never sends it. */
  BAD(&e, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n", 413);
  /* Too many headers, and a head longer than max_head. */
  char many[4096];
  size_t n = (size_t)snprintf(many, sizeof(many), "GET /plaintext HTTP/1.1\r\nHost: x\r\n");
  for (int i = 0; i < SH_HTTP_MAX_HEADERS + 1; i++)
    n += (size_t)snprintf(many + n, sizeof(many) - n, "X-%d: v\r\n", i);
  n += (size_t)snprintf(many + n, sizeof(many) - n, "\r\n");
  expect_bad(&e, many, n, 431);
  char *longhead = malloc(8192);
  n = (size_t)snprintf(longhead, 8192, "GET /plaintext HTTP/1.1\r\nHost: x\r\nX-Long: ");
  memset(longhead + n, 'a', 6000);
  memcpy(longhead + n + 6000, "\r\n\r\n", 4);
  expect_bad(&e, longhead, n + 6004, 431);
  free(longhead);
  /* Pipelined: a good request's answer first, then the error's, then the close. */
  client c = connect_to(&e.at);
  send_str(&c, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n"
               "GET /q?1 HTTP/1.1\r\nHost: x\r\n\r\n"
               "BAD\r\n\r\n"
               "GET /q?2 HTTP/1.1\r\nHost: x\r\n\r\n");
  resp *r = get_resp(&c, false);
  assert_int_equal(r->status, 200);
  resp_free(r);
  r = get_resp(&c, false);
  assert_string_equal(r->body, "1");
  resp_free(r);
  r = get_resp(&c, false);
  assert_int_equal(r->status, 400);
  resp_free(r);
  expect_closed(&c);
  disconnect(&c);
  assert_true(stats(&e).bad >= 12);
  end(&e);
}

/* An endless header stream: answered 431 and cut off, with the server's
 * memory bounded by max_head (the client's sends fail once it closed).
 * Catches a head buffered without limit. */
static void test_endless_headers(void **state) {
  (void)state;
  env e = start((sh_http_config){.max_head = 4096});
  client c = connect_to(&e.at);
  send_str(&c, "GET /plaintext HTTP/1.1\r\nHost: x\r\n");
  char line[64];
  bool open = true;
  long sent = 0;
  for (int i = 0; open && i < 1000000; i++) {
    int n = snprintf(line, sizeof(line), "X-Header-%d: value\r\n", i);
    open = try_send(&c, line, (size_t)n);
    sent += n;
  }
  assert_false(open);
  assert_true(sent < 64L << 20);
  resp *r = get_resp(&c, false);
  assert_int_equal(r->status, 431);
  resp_free(r);
  disconnect(&c);
  end(&e);
}

/* ---- routing ------------------------------------------------------------------------------------ */

/* Catches a miss that closes the connection, a 405 without its Allow, a
 * method no route knows answered 405, a prefix route matching wrongly, a
 * HEAD refused by a GET route (or answered with a body: the next response
 * would not parse). */
static void test_routing_misses_keep_connection(void **state) {
  (void)state;
  env e = start((sh_http_config){0});
  client c = connect_to(&e.at);
  expect_status(&c, "GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", 404);
  expect_status(&c, "GET /static HTTP/1.1\r\nHost: x\r\n\r\n", 404);
  resp *r = roundtrip(&c, "DELETE /plaintext HTTP/1.1\r\nHost: x\r\n\r\n");
  assert_int_equal(r->status, 405);
  assert_true(has_header(r, "\r\nAllow: GET, HEAD\r\n"));
  resp_free(r);
  /* A route that takes GET takes HEAD: its head, no body. */
  r = roundtrip(&c, "HEAD /plaintext HTTP/1.1\r\nHost: x\r\n\r\n");
  assert_int_equal(r->status, 200);
  assert_true(has_header(r, "\r\nContent-Length: 13\r\n"));
  resp_free(r);
  r = roundtrip(&c, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
  assert_int_equal(r->status, 405);
  assert_true(has_header(r, "\r\nAllow: POST, PUT\r\n"));
  resp_free(r);
  expect_status(&c, "BREW /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", 501);
  expect_status(&c, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", 200);
  disconnect(&c);
  end(&e);
}

/* ---- fallback statuses ------------------------------------------------------------------------------ */

/* Catches a handler's failure that closes the connection or leaves a
 * request unanswered (the responses after it would be shifted), and the
 * wrong status for a timeout (504) or another error (500). */
static void test_fallback_statuses(void **state) {
  (void)state;
  env e = start((sh_http_config){0});
  client c = connect_to(&e.at);
  expect_status(&c, "GET /ask HTTP/1.1\r\nHost: x\r\n\r\n", 504);
  expect_status(&c, "GET /throw HTTP/1.1\r\nHost: x\r\n\r\n", 500);
  expect_status(&c, "GET /null HTTP/1.1\r\nHost: x\r\n\r\n", 500);
  /* Pipelined around failures: order kept. */
  send_str(&c, "GET /throw HTTP/1.1\r\nHost: x\r\n\r\n"
               "GET /q?7 HTTP/1.1\r\nHost: x\r\n\r\n"
               "GET /null HTTP/1.1\r\nHost: x\r\n\r\n");
  int want[] = {500, 200, 500};
  for (int i = 0; i < 3; i++) {
    resp *r = get_resp(&c, false);
    assert_int_equal(r->status, want[i]);
    if (i == 1) assert_string_equal(r->body, "7");
    resp_free(r);
  }
  disconnect(&c);
  end(&e);
}

/* A slow request, then a body refused with 413 that the client keeps
 * sending, more than the lingering close drops: both are answered, in
 * order, since the bound counts from the last response written. Catches
 * the bytes after a closing request counted while responses are still
 * owed, and the connection cut before they are written. */
static void test_refused_body_while_answering(void **state) {
  (void)state;
  env e = start((sh_http_config){.max_body = 1024});
  client c = connect_to(&e.at);
  send_str(&c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
               "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n");
  /* Past the 413's request, while /slow still works. */
  size_t n = 256u << 10;
  char *body = calloc(1, n);
  assert_non_null(body);
  for (size_t i = 0; i < n; i += 4096) {
    (void)try_send(&c, body + i, 4096);
    th_sleep_ms(1);
  }
  free(body);
  resp *r = get_resp(&c, false);
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "slow");
  resp_free(r);
  r = get_resp(&c, false);
  assert_int_equal(r->status, 413);
  resp_free(r);
  disconnect(&c);
  end(&e);
}

/* A GET route takes HEAD only when no route names HEAD for the path:
 * catches the implicit HEAD of a GET route shadowing a HEAD route listed
 * after it. */
static void test_head_route_of_its_own(void **state) {
  (void)state;
  env e = start((sh_http_config){0});
  client c = connect_to(&e.at);
  expect_status(&c, "HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n", 204);
  expect_status(&c, "GET /h HTTP/1.1\r\nHost: x\r\n\r\n", 200);
  expect_status(&c, "HEAD /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", 200);
  disconnect(&c);
  end(&e);
}

/* ---- idle timeout -------------------------------------------------------------------------------------- */

#define IDLE_MS 200

/* Catches an idle connection never closed (before a request, and after
 * one), a slow sender never cut, and a slow handler cut while it works. */
static void test_idle_timeout(void **state) {
  (void)state;
  env e = start((sh_http_config){.idle_timeout_ms = IDLE_MS});
  client idle = connect_to(&e.at);
  client after = connect_to(&e.at);
  expect_status(&after, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", 200);
  client slowh = connect_to(&e.at);
  send_str(&slowh, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
  /* A slow sender: a byte every 20 ms never makes a whole request. */
  client loris = connect_to(&e.at);
  bool open = true;
  for (int i = 0; open && i < 500; i++) {
    open = try_send(&loris, i == 0 ? "G" : "x", 1);
    th_sleep_ms(20);
    if (open) {
      char b;
      ssize_t k = recv(loris.fd, &b, 1, MSG_DONTWAIT);
      open = k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
  }
  assert_false(open);
  resp *r = get_resp(&slowh, false);
  assert_int_equal(r->status, 200);
  assert_string_equal(r->body, "slow");
  resp_free(r);
  expect_closed(&idle);
  expect_closed(&after);
  assert_true(stats(&e).timeouts >= 3);
  disconnect(&idle);
  disconnect(&after);
  disconnect(&slowh);
  disconnect(&loris);
  end(&e);
}

/* A client asks for a large response with Connection: close and reads
 * nothing, so the response never goes out: the idle timeout closes the
 * connection all the same, as after any response. Catches a closing
 * response that leaves its connection waiting, with no timeout, for a
 * flush that never comes. */
static void test_idle_timeout_after_closing_response(void **state) {
  (void)state;
  env e = start((sh_http_config){.idle_timeout_ms = IDLE_MS});
  client c = {.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  assert_true(c.fd >= 0);
  int small = 4096;
  setsockopt(c.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(e.at.port)};
  sa.sin_addr.s_addr = htonl(e.at.ip);
  assert_int_equal(connect(c.fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  /* More than the socket buffers take. */
  send_str(&c, "GET /kib?16384 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  for (int i = 0; i < 5000 && stats(&e).requests == 0; i++) th_sleep_ms(1);
  for (int i = 0; i < 5000 && stats(&e).open > 0; i++) th_sleep_ms(1);
  assert_int_equal(stats(&e).open, 0);
  assert_int_equal(stats(&e).timeouts, 1);
  close(c.fd);
  end(&e);
}

/* A keep-alive client reads a large response slowly, then the rest at
 * once, then sends its next request 0.4 timeout later: the server's
 * unwritten bytes fell (to none) less than a timeout before, so the
 * connection is not idle and the request is answered. Several clients,
 * each finishing at another moment of the sweep's period. Catches a
 * connection whose unwritten bytes fell to none closed by the next sweep,
 * as if it had been idle since it was armed. */
#define DRAINERS 8
#define DRAIN_IDLE_MS 1000

typedef struct drainer {
  client c;
  size_t got;      /* bytes of the response read, head included */
  size_t head_len; /* 0 until the head's end was read */
  long finish_at;  /* ms: when to read the rest at once */
  long done_at;    /* ms: when the response was read; 0: not yet */
  bool asked;
} drainer;

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define DRAIN_BODY ((size_t)16384 << 10)

/* Reads up to max bytes of the response (all of it: SIZE_MAX); false at
 * the server's close. */
static bool drain_some(drainer *d, size_t max, int flags) {
  static char scratch[1 << 16];
  while (max > 0 && (d->head_len == 0 || d->got < d->head_len + DRAIN_BODY)) {
    size_t want = d->head_len == 0 ? 1 : sizeof(scratch);
    if (d->head_len != 0 && want > d->head_len + DRAIN_BODY - d->got)
      want = d->head_len + DRAIN_BODY - d->got;
    if (want > max) want = max;
    ssize_t k = recv(d->c.fd, scratch, want, flags);
    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return false;
    if (k < 0) return true;
    /* The head a byte at a time: its end is seen exactly. */
    if (d->head_len == 0) {
      assert_true(d->got < d->c.cap);
      d->c.buf[d->got] = scratch[0];
      if (d->got >= 3 && memcmp(d->c.buf + d->got - 3, "\r\n\r\n", 4) == 0) d->head_len = d->got + 1;
    }
    d->got += (size_t)k;
    max -= (size_t)k;
  }
  return true;
}

static void test_idle_timeout_after_draining(void **state) {
  (void)state;
  env e = start((sh_http_config){.idle_timeout_ms = DRAIN_IDLE_MS});
  drainer d[DRAINERS];
  long t0 = now_ms();
  for (int i = 0; i < DRAINERS; i++) {
    d[i] = (drainer){.c = connect_to(&e.at), .finish_at = t0 + 1500 + i * DRAIN_IDLE_MS / DRAINERS};
    /* Bounded: the network must not take the whole response early. */
    int rcv = 256 << 10;
    setsockopt(d[i].c.fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
    send_str(&d[i].c, "GET /kib?16384 HTTP/1.1\r\nHost: x\r\n\r\n");
  }
  for (int left = DRAINERS; left > 0;) {
    long now = now_ms();
    for (int i = 0; i < DRAINERS; i++) {
      drainer *x = &d[i];
      if (x->asked) continue;
      bool open = true;
      if (now < x->finish_at) {
        open = drain_some(x, 64u << 10, MSG_DONTWAIT); /* slowly: pending falls, never empties */
      } else if (x->done_at == 0) {
        open = drain_some(x, SIZE_MAX, 0);
        x->done_at = now_ms();
      } else if (now >= x->done_at + DRAIN_IDLE_MS * 2 / 5) {
        /* Too late to tell (another's drain took long, a slow build):
         * the connection may have been idle for the timeout by now. */
        if (now < x->done_at + DRAIN_IDLE_MS * 3 / 5) {
          x->c.len = 0;
          resp *r = roundtrip(&x->c, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n");
          assert_int_equal(r->status, 200);
          resp_free(r);
        }
        x->asked = true;
        left--;
      }
      if (!open) {
        /* Closed while it read slowly: the server's bytes may not have
         * fallen for a timeout (the socket's buffers draining, another's
         * drain, a slow machine). Not what this tells. */
        x->asked = true;
        left--;
      }
    }
    th_sleep_ms(20);
  }
  for (int i = 0; i < DRAINERS; i++) disconnect(&d[i].c);
  end(&e);
}

/* ---- max_connections ------------------------------------------------------------------------------------ */

/* Catches a connection past the limit served (or left hanging), and the
 * others refused with it. */
static void test_max_connections(void **state) {
  (void)state;
  env e = start((sh_http_config){.max_connections = 2});
  client a = connect_to(&e.at), b = connect_to(&e.at);
  expect_status(&a, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", 200);
  expect_status(&b, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", 200);
  client x = connect_to(&e.at);
  resp *r = get_resp(&x, false);
  assert_int_equal(r->status, 503);
  assert_true(has_header(r, "\r\nConnection: close\r\n"));
  resp_free(r);
  expect_closed(&x);
  disconnect(&x);
  expect_status(&a, "GET /json HTTP/1.1\r\nHost: x\r\n\r\n", 200);
  expect_status(&b, "GET /json HTTP/1.1\r\nHost: x\r\n\r\n", 200);
  assert_int_equal(stats(&e).refused, 1);
  /* Room again once one closed. */
  disconnect(&a);
  for (int i = 0; i < 5000 && stats(&e).open > 1; i++) th_sleep_ms(1);
  client d = connect_to(&e.at);
  expect_status(&d, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", 200);
  disconnect(&d);
  disconnect(&b);
  end(&e);
}

/* A refused client that keeps its end open after the 503 (the server's
 * close lingers until the client closes or the idle timeout): it is no
 * connection served, and takes no room from the next ones. Catches a
 * lingering refused connection counted against the limit. */
static void test_refused_lingering_takes_no_room(void **state) {
  (void)state;
  env e = start((sh_http_config){.max_connections = 1});
  client a = connect_to(&e.at);
  expect_status(&a, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", 200);
  client x = connect_to(&e.at);
  resp *r = get_resp(&x, false);
  assert_int_equal(r->status, 503);
  resp_free(r);
  disconnect(&a);
  /* x is still open: only a's close is waited for. */
  for (int i = 0; i < 5000 && stats(&e).open > 1; i++) th_sleep_ms(1);
  client d = connect_to(&e.at);
  expect_status(&d, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", 200);
  disconnect(&d);
  disconnect(&x);
  end(&e);
}

/* ---- several client threads ------------------------------------------------------------------------------ */

#define THREADS 4
static sh_netaddr g_at;
static atomic_int g_ok;

static void *client_thread(void *arg) {
  long id = (long)(intptr_t)arg;
  client c = connect_to(&g_at);
  int n = TH_UNDER_TSAN ? 50 : 300;
  char req[64], want[32];
  for (int i = 0; i < n; i++) {
    snprintf(req, sizeof(req), "GET /q?%ld-%d HTTP/1.1\r\nHost: x\r\n\r\n", id, i);
    snprintf(want, sizeof(want), "%ld-%d", id, i);
    if (!try_send(&c, req, strlen(req))) break;
    resp r;
    if (!read_resp(&c, &r, false)) break;
    bool good = r.status == 200 && strcmp(r.body, want) == 0;
    free(r.body);
    if (!good) break;
    if (i == n - 1) atomic_fetch_add(&g_ok, 1);
  }
  disconnect(&c);
  return NULL;
}

/* Catches a race between connections of different workers (run under
 * TSan too), and a response that reaches the wrong connection. */
static void test_client_threads(void **state) {
  (void)state;
  env e = start((sh_http_config){0});
  g_at = e.at;
  atomic_store(&g_ok, 0);
  pthread_t t[THREADS];
  for (long i = 0; i < THREADS; i++)
    assert_int_equal(pthread_create(&t[i], NULL, client_thread, (void *)(intptr_t)i), 0);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  assert_int_equal(atomic_load(&g_ok), THREADS);
  assert_true(stats(&e).connections >= THREADS);
  end(&e);
}

/* ---- steady state ------------------------------------------------------------------------------------------ */

static uint64_t pool_mallocs(const sh_system *sys) {
  sh_stats st;
  sh_system_stats(sys, &st);
  return st.pool_mallocs;
}

static void requests(client *c, int n) {
  for (int i = 0; i < n; i++) expect_status(c, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", 200);
}

/* After a warm-up, a thousand more requests take nothing from malloc
 * through the pools: requests, responses, stacks and pages are reused.
 * Catches a per-request allocation that is not given back. */
static void test_steady_state_no_pool_malloc(void **state) {
  (void)state;
  env e = start((sh_http_config){0});
  client c = connect_to(&e.at);
  requests(&c, 300);
  th_sleep_ms(10);
  uint64_t before = pool_mallocs(e.sys);
  requests(&c, 1000);
  th_sleep_ms(10);
  uint64_t after = pool_mallocs(e.sys);
  disconnect(&c);
  end(&e);
  if (after != before) fprintf(stderr, "pool_mallocs grew by %llu\n", (unsigned long long)(after - before));
  assert_int_equal(after, before);
}


/* ---- the actors stopping ------------------------------------------------------------------------------------ */

/* The connection actors stop one after the other (one is held by a
 * handler that blocks its worker): in between, the stats still read, as
 * a stop hook of another actor may at shutdown. Catches counters read
 * from the memory of an actor that went with its stop. */
static void test_stats_while_actors_stop(void **state) {
  (void)state;
  env e = start((sh_http_config){0});
  atomic_store(&g_unblock, 0);
  /* Two connections, accepted before any worker is held: one per actor. */
  client a = connect_to(&e.at), b = connect_to(&e.at);
  expect_status(&a, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", 200);
  expect_status(&b, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", 200);
  send_str(&a, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n");
  th_sleep_ms(100);
  send_str(&b, "GET /stop HTTP/1.1\r\nHost: x\r\n\r\n");
  th_sleep_ms(200);
  /* The actor of b stopped; the one of a waits for its handler. */
  sh_http_stats s = stats(&e);
  /* The last actor stops, and the server goes with it. */
  atomic_store(&g_unblock, 1);
  assert_int_equal(s.connections, 2);
  assert_true(s.requests >= 3);
  disconnect(&a);
  disconnect(&b);
  end(&e);
}

/* ---- configuration ------------------------------------------------------------------------------------------ */

/* Catches a bad configuration accepted. */
static void test_bad_config(void **state) {
  (void)state;
  sh_system *sys = th_env(1, 0);
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  static const sh_http_route bad_path[] = {{GET, "nope", plaintext}};
  static const sh_http_route no_handler[] = {{GET, "/x", NULL}};
  const sh_http_config bad[] = {
      {.routes = NULL, .nroutes = 1},
      {.routes = bad_path, .nroutes = 1},
      {.routes = no_handler, .nroutes = 1},
      {.routes = routes, .nroutes = 1, .max_head = 100},
      {.routes = routes, .nroutes = 1, .max_head = 70000},
      {.routes = routes, .nroutes = 1, .idle_timeout_ms = -5},
      {.routes = routes, .nroutes = 1, .server_name = "a\r\nb"},
  };
  sh_http_server *srv = NULL;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(sh_http_serve(sys, &any, &bad[i], &srv), -EINVAL);
  /* More routes than a request can name (its route index is 16 bits):
   * the last would be dispatched to the one before the first. */
  uint32_t n = 1u << 16;
  sh_http_route *many = malloc(n * sizeof(*many));
  assert_non_null(many);
  for (uint32_t i = 0; i < n; i++) many[i] = (sh_http_route){GET, i + 1 < n ? "/no" : "/yes", plaintext};
  assert_int_equal(sh_http_serve(sys, &any, &(sh_http_config){.routes = many, .nroutes = n}, &srv),
                   -EINVAL);
  assert_null(srv);
  th_end(sys);
  free(many);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exact_responses_keep_alive),
      cmocka_unit_test(test_close_http10_head),
      cmocka_unit_test(test_pipelined_thousand),
      cmocka_unit_test(test_pipelined_large_responses),
      cmocka_unit_test(test_bodies_then_next),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_endless_headers),
      cmocka_unit_test(test_routing_misses_keep_connection),
      cmocka_unit_test(test_fallback_statuses),
      cmocka_unit_test(test_head_route_of_its_own),
      cmocka_unit_test(test_refused_body_while_answering),
      cmocka_unit_test(test_idle_timeout),
      cmocka_unit_test(test_idle_timeout_after_closing_response),
      cmocka_unit_test(test_idle_timeout_after_draining),
      cmocka_unit_test(test_max_connections),
      cmocka_unit_test(test_refused_lingering_takes_no_room),
      cmocka_unit_test(test_client_threads),
      cmocka_unit_test(test_steady_state_no_pool_malloc),
      cmocka_unit_test(test_stats_while_actors_stop),
      cmocka_unit_test(test_bad_config),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
