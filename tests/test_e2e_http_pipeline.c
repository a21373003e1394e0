/*
 * End-to-end tests of the HTTP server on the production backend (epoll,
 * real loopback sockets), through the public headers only (handlers,
 * server and client: http_fixture.h): a thousand pipelined requests
 * answered in order, pipelined large responses read late (pushed back,
 * not cut off), bodies sent with Content-Length and chunked followed by
 * another request, and a body refused with 413 behind a slow request.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* alarm, MSG_NOSIGNAL, strcasestr, memmem */
#endif

#include "http_fixture.h"

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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pipelined_thousand),
      cmocka_unit_test(test_pipelined_large_responses),
      cmocka_unit_test(test_bodies_then_next),
      cmocka_unit_test(test_refused_body_while_answering),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
