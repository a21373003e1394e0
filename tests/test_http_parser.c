/*
 * Tests for the HTTP/1.1 request parser (http/parser.h): well-formed
 * requests and their fields, methods, absolute-form targets, keep-alive,
 * bodies (Content-Length, chunked), pipelining, requests cut at every
 * byte, a head that does not fit inline, running out of memory, a reset
 * mid-body, and the seed inputs of the fuzz target (tests/fuzz/http/)
 * through its whole-versus-split oracle. The rules of the grammar that
 * answer an error status and the bounds on memory are
 * test_http_parser_errors.c's. Each test runs with a pool of its own as the
 * thread's and fails when a request or a page was not given back
 * (http_parser_fixture.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fiu-control.h>
#include <fiu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/http_oracle.h"
#include "http_parser_fixture.h"

static void test_get(void **state) {
  (void)state;
  sh_http_request *r;
  assert_int_equal(parse_str("GET /hello/x?a=1&b HTTP/1.1\r\nHost: example\r\nUser-Agent:  t  \r\n\r\n", &r), 0);
  assert_int_equal(r->method, SH_HTTP_GET);
  assert_str(r->method_name, "GET");
  assert_str(r->target, "/hello/x?a=1&b");
  assert_str(r->path, "/hello/x");
  assert_str(r->query, "a=1&b");
  assert_int_equal(r->version, 11);
  assert_true(r->keep_alive);
  assert_false(r->chunked);
  assert_int_equal(r->content_length, -1);
  assert_int_equal(sh_buf_len(&r->body), 0);
  assert_int_equal(r->nheaders, 2);
  sh_http_str n, v;
  assert_int_equal(sh_http_header_at(r, 1, &n, &v), 0);
  assert_str(n, "User-Agent");
  assert_str(v, "t");
  assert_int_equal(sh_http_header_at(r, 2, &n, &v), -EINVAL);
  assert_null(r->priv_.big);
  sh_msg_free(&r->hdr);
}

static void test_methods(void **state) {
  (void)state;
  static const struct {
    const char *name;
    sh_http_method m;
  } cases[] = {{"GET", SH_HTTP_GET},         {"HEAD", SH_HTTP_HEAD},       {"POST", SH_HTTP_POST},
               {"PUT", SH_HTTP_PUT},         {"DELETE", SH_HTTP_DELETE},   {"CONNECT", SH_HTTP_CONNECT},
               {"OPTIONS", SH_HTTP_OPTIONS}, {"TRACE", SH_HTTP_TRACE},     {"PATCH", SH_HTTP_PATCH},
               {"get", SH_HTTP_OTHER},       {"PURGE", SH_HTTP_OTHER},     {"M-SEARCH", SH_HTTP_OTHER},
               {"GETX", SH_HTTP_OTHER},      {"!#$%&'*+-.^_`|~", SH_HTTP_OTHER}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s /" H11 "\r\n", cases[i].name);
    sh_http_request *r;
    assert_int_equal(parse_str(buf, &r), 0);
    assert_int_equal(r->method, cases[i].m);
    assert_str(r->method_name, cases[i].name);
    sh_msg_free(&r->hdr);
  }
  static const status_case bad[] = {
      {"G(T /" H11 "\r\n", 400},
      {"G@T /" H11 "\r\n", 400},
      {" GET /" H11 "\r\n", 400},
      {"GET  /" H11 "\r\n", 400},
      {"GET\t/" H11 "\r\n", 400},
      {"GET /  HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"GET /\r\nHost: h\r\n\r\n", 400},
      {"GET\r\nHost: h\r\n\r\n", 400},
  };
  check_statuses(bad);
}

static void test_post_content_length(void **state) {
  (void)state;
  conn c;
  conn_init(&c, &LIM);
  sh_http_request *r;
  const char *head = "POST /form HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello";
  assert_int_equal(feed(&c, head, strlen(head), &r), SH_HTTP_MORE);
  assert_null(r);
  assert_true(sh_http_parser_busy(&c.p));
  assert_int_equal(sh_buf_len(&c.in), 0); /* the body so far moved into the request */
  assert_int_equal(feed(&c, " world", 6, &r), SH_HTTP_DONE);
  assert_false(sh_http_parser_busy(&c.p));
  assert_int_equal(r->method, SH_HTTP_POST);
  assert_int_equal(r->content_length, 11);
  assert_body(r, "hello world");
  sh_msg_free(&r->hdr);
  conn_done(&c);
  /* Content-Length: 0 */
  assert_int_equal(parse_str("POST /" H11 "Content-Length: 0\r\n\r\n", &r), 0);
  assert_int_equal(r->content_length, 0);
  sh_msg_free(&r->hdr);
}

/* A body of several pages moves into the request with its pages. */
static void test_large_body(void **state) {
  (void)state;
  size_t n = 5 * SH_PAGE_DATA + 17;
  char head[128];
  int hl = snprintf(head, sizeof head, "PUT /up" H11 "Content-Length: %zu\r\n\r\n", n);
  char *body = malloc(n);
  for (size_t i = 0; i < n; i++) body[i] = (char)('a' + i % 26);
  conn c;
  conn_init(&c, &LIM);
  sh_http_request *r;
  assert_int_equal(feed(&c, head, (size_t)hl, &r), SH_HTTP_MORE);
  assert_int_equal(feed(&c, body, n, &r), SH_HTTP_DONE);
  assert_int_equal(sh_buf_len(&r->body), n);
  char *got = malloc(n);
  sh_buf_peek(&r->body, 0, got, n);
  assert_memory_equal(got, body, n);
  free(got);
  free(body);
  sh_msg_free(&r->hdr);
  conn_done(&c);
}

static const char CHUNKED[] = "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:  Chunked \r\n\r\n"
                              "5;name=value\r\nhello\r\n"
                              "A ; x\r\n0123456789\r\n"
                              "1\nZ\n"
                              "0\r\nX-Trailer: 1\r\nX-Other: two words\r\n\r\n";

static void test_chunked(void **state) {
  (void)state;
  sh_http_request *r;
  assert_int_equal(parse_str(CHUNKED, &r), 0);
  assert_true(r->chunked);
  assert_int_equal(r->content_length, -1);
  assert_body(r, "hello0123456789Z");
  assert_int_equal(r->nheaders, 2);
  sh_msg_free(&r->hdr);
  /* Every prefix of it asks for more. */
  for (size_t k = 0; k < sizeof CHUNKED - 1; k++)
    assert_int_equal(parse_lim(CHUNKED, k, &LIM, NULL), 1);
}

/* n requests in one buffer come out one per call, in order. */
static void pipelined(size_t n) {
  http_log all = {0};
  for (size_t i = 0; i < n; i++) {
    http_log_printf(&all, "GET /r%zu HTTP/1.1\r\nHost: h\r\n\r\n", i);
    if (i % 3 == 1) http_log_printf(&all, "POST /p%zu HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nok", i);
  }
  conn c;
  conn_init(&c, &LIM);
  assert_int_equal(sh_buf_append(&c.in, all.p, all.len), 0);
  for (size_t i = 0; i < n; i++) {
    for (int post = 0; post <= (i % 3 == 1); post++) {
      sh_http_request *r;
      assert_int_equal(sh_http_parse(&c.p, &c.in, &r), SH_HTTP_DONE);
      char want[32];
      snprintf(want, sizeof want, post ? "/p%zu" : "/r%zu", i);
      assert_str(r->path, want);
      if (post) assert_body(r, "ok");
      sh_msg_free(&r->hdr);
    }
  }
  sh_http_request *r;
  assert_int_equal(sh_http_parse(&c.p, &c.in, &r), SH_HTTP_MORE);
  assert_int_equal(sh_buf_len(&c.in), 0);
  assert_false(sh_http_parser_busy(&c.p));
  conn_done(&c);
  free(all.p);
}

static void test_pipelined(void **state) {
  (void)state;
  pipelined(3);
  pipelined(1000);
}

/* A stream of requests: cut once at every offset it parses as whole. */
static void test_split_every_offset(void **state) {
  (void)state;
  http_log s = {0};
  http_log_printf(&s, "\r\n\nGET /a?b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  http_log_printf(&s, "%s", CHUNKED);
  http_log_printf(&s, "POST /p HTTP/1.0\nContent-Length: 3\n\nabc");
  http_log_printf(&s, "GET / HTTP/1.1\r\nHost: h\r\nX: \x01\r\n\r\n");
  http_log whole = {0};
  assert_true(http_feed((const uint8_t *)s.p, s.len, &LIM, 0, 0, &whole));
  assert_non_null(strstr(whole.p, "ERROR 400")); /* the last one is bad */
  assert_int_equal(strstr(whole.p, "DONE") - whole.p, 0);
  for (size_t k = 1; k < s.len; k++) {
    http_log split = {0};
    assert_true(http_feed((const uint8_t *)s.p, s.len, &LIM, k, 0, &split));
    assert_string_equal(split.p, whole.p);
    free(split.p);
  }
  free(whole.p);
  free(s.p);
}

static void test_absolute_form(void **state) {
  (void)state;
  sh_http_request *r;
  assert_int_equal(parse_str("GET http://example.com:8080/a/b?q=1" H11 "\r\n", &r), 0);
  assert_str(r->target, "http://example.com:8080/a/b?q=1");
  assert_str(r->path, "/a/b");
  assert_str(r->query, "q=1");
  sh_msg_free(&r->hdr);
  assert_int_equal(parse_str("GET HTTP://example.com" H11 "\r\n", &r), 0);
  assert_str(r->path, "/");
  assert_int_equal(r->query.len, 0);
  sh_msg_free(&r->hdr);
  assert_int_equal(parse_str("GET http://h?x=y" H11 "\r\n", &r), 0);
  assert_str(r->path, "/");
  assert_str(r->query, "x=y");
  sh_msg_free(&r->hdr);
}

static bool keep_alive_of(const char *version, const char *conn_headers) {
  char buf[256];
  snprintf(buf, sizeof buf, "GET / HTTP/%s\r\nHost: h\r\n%s\r\n", version, conn_headers);
  sh_http_request *r;
  assert_int_equal(parse_str(buf, &r), 0);
  bool ka = r->keep_alive;
  sh_msg_free(&r->hdr);
  return ka;
}

static void test_keep_alive(void **state) {
  (void)state;
  assert_true(keep_alive_of("1.1", ""));
  assert_false(keep_alive_of("1.1", "Connection: close\r\n"));
  assert_false(keep_alive_of("1.1", "Connection: Keep-Alive, CLOSE\r\n"));
  assert_false(keep_alive_of("1.1", "Connection: upgrade\r\nconnection:  close \r\n"));
  assert_true(keep_alive_of("1.1", "Connection: upgrade, closed\r\n"));
  assert_false(keep_alive_of("1.0", ""));
  assert_true(keep_alive_of("1.0", "Connection: keep-alive\r\n"));
  assert_true(keep_alive_of("1.0", "Connection: x,KEEP-ALIVE\r\n"));
  assert_false(keep_alive_of("1.0", "Connection: keep-alive, close\r\n"));
}

/* A head longer than SH_HTTP_INLINE_HEAD lives in priv_.big; the drop frees it. */
static void test_big_head(void **state) {
  (void)state;
  http_log s = {0};
  http_log_printf(&s, "GET /big HTTP/1.1\r\nHost: h\r\nX-Big: ");
  for (int i = 0; i < SH_HTTP_INLINE_HEAD; i++) http_log_put(&s, "y", 1);
  http_log_printf(&s, "\r\nX-After: z\r\n\r\n");
  sh_http_request *r;
  assert_int_equal(parse_lim(s.p, s.len, &LIM, &r), 0);
  assert_non_null(r->priv_.big);
  assert_str(r->path, "/big");
  sh_http_str v;
  assert_true(sh_http_header(r, "X-BIG", &v));
  assert_int_equal(v.len, SH_HTTP_INLINE_HEAD);
  assert_true(sh_http_header(r, "x-after", &v));
  assert_str(v, "z");
  assert_false(sh_http_header(r, "x-none", &v));
  sh_msg_free(&r->hdr);
  free(s.p);
}

/* Out of memory: nothing of the request taken; a later call parses it. */
static void test_out_of_memory(void **state) {
  (void)state;
  conn c;
  conn_init(&c, &LIM);
  sh_http_request *r;
  const char *req = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc";
  assert_int_equal(sh_buf_append(&c.in, req, strlen(req)), 0);
  assert_int_equal(fiu_enable("sh/pool/alloc", 1, NULL, 0), 0);
  int rc = sh_http_parse(&c.p, &c.in, &r);
  fiu_disable("sh/pool/alloc");
  assert_int_equal(rc, -ENOMEM);
  assert_int_equal(sh_buf_len(&c.in), strlen(req));
  assert_int_equal(sh_http_parse(&c.p, &c.in, &r), SH_HTTP_DONE);
  assert_body(r, "abc");
  sh_msg_free(&r->hdr);
  conn_done(&c);
}

/* Reset frees a request whose body is still coming. */
static void test_reset_mid_body(void **state) {
  (void)state;
  conn c;
  conn_init(&c, &LIM);
  sh_http_request *r;
  const char *req = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab";
  assert_int_equal(feed(&c, req, strlen(req), &r), SH_HTTP_MORE);
  assert_true(sh_http_parser_busy(&c.p));
  conn_done(&c);
}

/* Every seed (and kept crash) of the fuzz target through its oracle. The
 * seeds are in fuzz/http/ next to this file (__FILE__ names it as the
 * compiler was given it: from the repository's root, where tests run). */
static void test_fuzz_seeds(void **state) {
  (void)state;
  char dir[512];
  const char *slash = strrchr(__FILE__, '/');
  int dl = slash ? (int)(slash - __FILE__ + 1) : 0;
  snprintf(dir, sizeof dir, "%.*sfuzz/http", dl, __FILE__);
  DIR *d = opendir(dir);
  assert_non_null(d);
  int files = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (!http_oracle_check(buf, n, n * 0x9e3779b97f4a7c15ull)) fail_msg("seed %s", e->d_name);
    files++;
  }
  closedir(d);
  assert_true(files >= 10);
}

int main(void) {
  fiu_init(0);
  const struct CMUnitTest tests[] = {
      POOLED(test_get),
      POOLED(test_methods),
      POOLED(test_post_content_length),
      POOLED(test_large_body),
      POOLED(test_chunked),
      POOLED(test_pipelined),
      POOLED(test_split_every_offset),
      POOLED(test_absolute_form),
      POOLED(test_keep_alive),
      POOLED(test_big_head),
      POOLED(test_out_of_memory),
      POOLED(test_reset_mid_body),
      POOLED(test_fuzz_seeds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
