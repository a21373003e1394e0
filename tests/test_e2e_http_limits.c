/*
 * End-to-end tests of the HTTP server on the production backend (epoll,
 * real loopback sockets), through the public headers only (handlers,
 * server and client: http_fixture.h): each bad input answered with its
 * status and the close after it, an endless head cut off; the idle
 * timeout against an idle and a slow sender, not against a slow handler,
 * and after a closing or a draining response; max_connections.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* alarm, MSG_NOSIGNAL, strcasestr, memmem */
#endif

#include "http_fixture.h"

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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_endless_headers),
      cmocka_unit_test(test_idle_timeout),
      cmocka_unit_test(test_idle_timeout_after_closing_response),
      cmocka_unit_test(test_idle_timeout_after_draining),
      cmocka_unit_test(test_max_connections),
      cmocka_unit_test(test_refused_lingering_takes_no_room),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
