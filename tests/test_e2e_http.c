/*
 * End-to-end tests of the HTTP server on the production backend (epoll,
 * real loopback sockets), through the public headers only (handlers,
 * server and client: http_fixture.h):
 *   - exact responses (/plaintext, /json; Date by its shape and year,
 *     which checks sh_time_ms), keep-alive, HTTP/1.0, HEAD, Connection:
 *     close;
 *   - the 404 / 405 / 501 of routing that keep the connection, a HEAD
 *     route of its own; the fallback statuses of handlers that time out
 *     (504), throw or return nothing (500);
 *   - clients on several threads; no pool malloc per request; the stats
 *     while the connection actors stop; bad configurations.
 * Pipelining and bodies are test_e2e_http_pipeline.c's; bad input, the
 * idle timeout and max_connections test_e2e_http_limits.c's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* alarm, MSG_NOSIGNAL, strcasestr, memmem */
#endif

#include "http_fixture.h"

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
      cmocka_unit_test(test_routing_misses_keep_connection),
      cmocka_unit_test(test_fallback_statuses),
      cmocka_unit_test(test_head_route_of_its_own),
      cmocka_unit_test(test_client_threads),
      cmocka_unit_test(test_steady_state_no_pool_malloc),
      cmocka_unit_test(test_stats_while_actors_stop),
      cmocka_unit_test(test_bad_config),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
