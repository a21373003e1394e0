/*
 * Tests for the HTTP/1.1 request parser (http/parser.h): well-formed
 * requests and their fields, bodies (Content-Length, chunked), pipelining,
 * requests cut at every byte, each rule of the grammar that answers an
 * error status, the bounds on memory (an endless head, a long body), and
 * the seed inputs of the fuzz target (tests/fuzz/http/) through its
 * whole-versus-split oracle. Each test runs with a pool of its own as the
 * thread's and fails when a request or a page was not given back.
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
#include "pool_fixture.h"

static const sh_http_limits LIM = {8192, 1u << 20};

/* A parser and its input. */
typedef struct conn {
  sh_http_parser p;
  sh_buf in;
} conn;

static void conn_init(conn *c, const sh_http_limits *lim) {
  sh_http_parser_init(&c->p, lim);
  c->in = (sh_buf)SH_BUF_INIT;
}

static void conn_done(conn *c) {
  sh_http_parser_reset(&c->p);
  sh_buf_clear(&c->in);
}

static int feed(conn *c, const void *d, size_t n, sh_http_request **out) {
  assert_int_equal(sh_buf_append(&c->in, d, n), 0);
  return sh_http_parse(&c->p, &c->in, out);
}

/* Parses n bytes whole under lim: 0 and *out for a request (the caller's),
 * 1 for "more", else the error status. */
static int parse_lim(const void *d, size_t n, const sh_http_limits *lim, sh_http_request **out) {
  conn c;
  conn_init(&c, lim);
  sh_http_request *r = NULL;
  int rc = feed(&c, d, n, &r);
  int st = rc == SH_HTTP_DONE ? 0 : rc == SH_HTTP_MORE ? 1 : rc == SH_HTTP_ERROR ? c.p.error : rc;
  if (rc == SH_HTTP_ERROR) assert_int_equal(sh_buf_len(&c.in), 0);
  conn_done(&c);
  if (out) {
    *out = r;
  } else if (r) {
    sh_msg_free(&r->hdr);
  }
  return st;
}

static int parse_str(const char *s, sh_http_request **out) {
  return parse_lim(s, strlen(s), &LIM, out);
}

/* The status of a whole input: 0 (a request), 1 (more) or an error. */
static int status_of(const char *s) { return parse_str(s, NULL); }

typedef struct status_case {
  const char *in;
  int status;
} status_case;

#define check_statuses(cases) check_statuses_(cases, sizeof cases / sizeof cases[0])
static void check_statuses_(const status_case *c, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int st = status_of(c[i].in);
    if (st != c[i].status) fail_msg("case %zu: status %d, want %d: %s", i, st, c[i].status, c[i].in);
  }
}

static void assert_str(sh_http_str s, const char *want) {
  assert_int_equal(s.len, strlen(want));
  assert_memory_equal(s.p, want, s.len);
}

static void assert_body(const sh_http_request *r, const char *want) {
  size_t n = strlen(want);
  assert_int_equal(sh_buf_len(&r->body), n);
  char *got = malloc(n + 1);
  assert_int_equal(sh_buf_peek(&r->body, 0, got, n), n);
  assert_memory_equal(got, want, n);
  free(got);
}

#define H11 " HTTP/1.1\r\nHost: h\r\n"

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

static void test_bad_targets(void **state) {
  (void)state;
  static const status_case cases[] = {
      {"GET foo" H11 "\r\n", 400},
      {"GET *" H11 "\r\n", 400},
      {"GET /a\x7f" H11 "\r\n", 400},
      {"GET /a\x80" H11 "\r\n", 400},
      {"GET /a\tb" H11 "\r\n", 400},
      {"GET http:///x" H11 "\r\n", 400},
      {"GET http://" H11 "\r\n", 400},
      {"GET https://h/x" H11 "\r\n", 400},
      {"GET ?x" H11 "\r\n", 400},
  };
  check_statuses(cases);
  sh_http_request *r;
  assert_int_equal(parse_str("OPTIONS *" H11 "\r\n", &r), 0);
  assert_str(r->path, "*");
  assert_int_equal(r->query.len, 0);
  sh_msg_free(&r->hdr);
  assert_int_equal(parse_str("GET /a?" H11 "\r\n", &r), 0);
  assert_str(r->path, "/a");
  assert_int_equal(r->query.len, 0);
  sh_msg_free(&r->hdr);
  assert_int_equal(parse_str("GET /%41%20?q=%7e" H11 "\r\n", &r), 0); /* no decoding */
  assert_str(r->path, "/%41%20");
  assert_str(r->query, "q=%7e");
  sh_msg_free(&r->hdr);
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

static void test_versions(void **state) {
  (void)state;
  sh_http_request *r;
  assert_int_equal(parse_str("GET / HTTP/1.0\r\n\r\n", &r), 0);
  assert_int_equal(r->version, 10);
  assert_false(r->keep_alive);
  sh_msg_free(&r->hdr);
  static const status_case cases[] = {
      {"GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505},
      {"GET / HTTP/1.2\r\nHost: h\r\n\r\n", 505},
      {"GET / HTTP/0.9\r\nHost: h\r\n\r\n", 505},
      {"GET / HTTP/1.1x\r\nHost: h\r\n\r\n", 400},
      {"GET / HTTP/1.1 \r\nHost: h\r\n\r\n", 400},
      {"GET / http/1.1\r\nHost: h\r\n\r\n", 400},
      {"GET / HTTP/1\r\nHost: h\r\n\r\n", 400},
      {"GET / HTTP/11.1\r\nHost: h\r\n\r\n", 400},
      {"GET / HTTP/a.b\r\nHost: h\r\n\r\n", 400},
      {"GET / garbage\r\nHost: h\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\r\nHost: h\r\n\r\n", 400},
  };
  check_statuses(cases);
}

static void test_line_ends(void **state) {
  (void)state;
  sh_http_request *r;
  assert_int_equal(parse_str("\r\n\n\r\nGET / HTTP/1.1\nHost: h\n\n", &r), 0);
  assert_int_equal(r->nheaders, 1);
  sh_msg_free(&r->hdr);
  static const status_case cases[] = {
      {"\rGET / HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: h\r\n\r\r\n\r\n", 400},
      {"\r\n\r\n", 1},
      {"\r", 1},
  };
  check_statuses(cases);
  /* Only empty lines: consumed, the parser is not busy. */
  conn c;
  conn_init(&c, &LIM);
  sh_http_request *none;
  assert_int_equal(feed(&c, "\r\n\n\r\n", 5, &none), SH_HTTP_MORE);
  assert_int_equal(sh_buf_len(&c.in), 0);
  assert_false(sh_http_parser_busy(&c.p));
  assert_int_equal(feed(&c, "G", 1, &none), SH_HTTP_MORE);
  assert_true(sh_http_parser_busy(&c.p));
  conn_done(&c);
}

static void test_header_syntax(void **state) {
  (void)state;
  static const status_case cases[] = {
      {"GET /" H11 "NoColon\r\n\r\n", 400},
      {"GET /" H11 "Name : v\r\n\r\n", 400},
      {"GET /" H11 "Na me: v\r\n\r\n", 400},
      {"GET /" H11 ": v\r\n\r\n", 400},
      {"GET /" H11 "X: a\r\n b\r\n\r\n", 400},
      {"GET /" H11 "X: a\r\n\tb\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\n Host: h\r\n\r\n", 400},
      {"GET /" H11 "X: a\x01z\r\n\r\n", 400},
      {"GET /" H11 "X: a\x7fz\r\n\r\n", 400},
  };
  check_statuses(cases);
  sh_http_request *r;
  assert_int_equal(parse_str("GET /" H11 "X: \x80\xff \t ok\t\r\nEmpty:\r\nE2: \t \r\n\r\n", &r), 0);
  sh_http_str v;
  assert_true(sh_http_header(r, "x", &v));
  assert_str(v, "\x80\xff \t ok");
  assert_true(sh_http_header(r, "EMPTY", &v));
  assert_int_equal(v.len, 0);
  assert_true(sh_http_header(r, "e2", &v));
  assert_int_equal(v.len, 0);
  sh_msg_free(&r->hdr);
}

/* a, then n bytes of f, then b, into buf: the length. */
static size_t compose(char *buf, const char *a, const char *f, size_t n, const char *b) {
  size_t al = strlen(a), bl = strlen(b);
  memcpy(buf, a, al);
  memcpy(buf + al, f, n);
  memcpy(buf + al + n, b, bl);
  return al + n + bl;
}

/* Long values and targets are checked a word at a time: a bad byte at
 * any offset of one is found, a good one anywhere is kept. */
static void test_long_fields(void **state) {
  (void)state;
  static const uint8_t bad_value[] = {0x00, 0x01, 0x0d, 0x1f, 0x7f};
  static const uint8_t good_value[] = {'\t', ' ', 0x80, 0xff, '~', '!'};
  static const uint8_t bad_target[] = {0x00, '\t', ' ', 0x7f, 0x80, 0xff};
  char field[41], buf[256];
  for (size_t at = 0; at < 40; at++) {
    for (size_t k = 0; k < sizeof bad_value; k++) {
      memset(field, 'a', 40);
      field[at] = (char)bad_value[k];
      size_t n = compose(buf, "GET /" H11 "X: ", field, 40, "\r\n\r\n\r\n");
      assert_int_equal(parse_lim(buf, n, &LIM, NULL), 400);
    }
    for (size_t k = 0; k < sizeof good_value; k++) {
      memset(field, 'a', 40);
      field[at] = (char)good_value[k];
      field[40] = 0;
      snprintf(buf, sizeof buf, "GET /" H11 "X: %s\r\n\r\n", field);
      sh_http_request *r;
      assert_int_equal(parse_str(buf, &r), 0);
      sh_http_str v;
      assert_true(sh_http_header(r, "x", &v));
      size_t from = 0, to = 40; /* OWS at either end is trimmed */
      while (field[from] == ' ' || field[from] == '\t') from++;
      while (field[to - 1] == ' ' || field[to - 1] == '\t') to--;
      assert_int_equal(v.len, to - from);
      assert_memory_equal(v.p, field + from, to - from);
      sh_msg_free(&r->hdr);
    }
    for (size_t k = 0; k < sizeof bad_target; k++) {
      memset(field, 'a', 40);
      field[0] = '/';
      field[at] = (char)bad_target[k];
      size_t n = compose(buf, "GET ", field, 40, H11 "\r\n");
      assert_int_equal(parse_lim(buf, n, &LIM, NULL), 400);
    }
  }
}

/* A NUL at any position of a head makes it a 400 (with an empty line
 * added, in case the NUL took the place of the head's end). */
static void test_nul_everywhere(void **state) {
  (void)state;
  static const char head[] = "GET /p?q HTTP/1.1\r\nHost: h\r\nX-A: b c\r\n\r\n";
  size_t n = sizeof head - 1;
  char buf[sizeof head + 4];
  for (size_t i = 0; i < n; i++) {
    memcpy(buf, head, n);
    memcpy(buf + n, "\r\n\r\n", 4);
    buf[i] = 0;
    assert_int_equal(parse_lim(buf, n + 4, &LIM, NULL), 400);
  }
}

static void test_head_too_long(void **state) {
  (void)state;
  sh_http_limits lim = {512, 1000};
  char buf[1024];
  /* Exactly max_head bytes: fine; one more: 431. */
  for (int extra = 0; extra <= 1; extra++) {
    size_t fill = 512 - strlen("GET / HTTP/1.1\r\nHost: h\r\nX: \r\n\r\n") + (size_t)extra;
    int n = snprintf(buf, sizeof buf, "GET / HTTP/1.1\r\nHost: h\r\nX: %.*s\r\n\r\n", (int)fill,
                     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    assert_int_equal(n, 512 + extra);
    assert_int_equal(parse_lim(buf, (size_t)n, &lim, NULL), extra ? 431 : 0);
  }
  /* An endless head in small pieces: cut off at max_head, memory flat. */
  conn c;
  conn_init(&c, &lim);
  sh_http_request *r;
  assert_int_equal(feed(&c, "GET / HTTP/1.1\r\nX: ", 19, &r), SH_HTTP_MORE);
  int rc = SH_HTTP_MORE;
  size_t sent = 19;
  while (rc == SH_HTTP_MORE && sent < 100000) {
    rc = feed(&c, "abcdefg", 7, &r);
    sent += 7;
    assert_true(sh_buf_len(&c.in) < 512);
  }
  assert_int_equal(rc, SH_HTTP_ERROR);
  assert_int_equal(c.p.error, 431);
  assert_true(sent < 512 + 7);
  for (int i = 0; i < 100; i++) {
    assert_int_equal(feed(&c, "abcdefg", 7, &r), SH_HTTP_MORE);
    assert_int_equal(sh_buf_len(&c.in), 0);
  }
  assert_int_equal(c.p.error, 431);
  conn_done(&c);
}

static void test_too_many_headers(void **state) {
  (void)state;
  for (int n = SH_HTTP_MAX_HEADERS; n <= SH_HTTP_MAX_HEADERS + 1; n++) {
    http_log s = {0};
    http_log_printf(&s, "GET / HTTP/1.1\r\nHost: h\r\n");
    for (int i = 1; i < n; i++) http_log_printf(&s, "X-%d: %d\r\n", i, i);
    http_log_printf(&s, "\r\n");
    sh_http_request *r;
    int st = parse_lim(s.p, s.len, &LIM, &r);
    if (n == SH_HTTP_MAX_HEADERS) {
      assert_int_equal(st, 0);
      assert_int_equal(r->nheaders, SH_HTTP_MAX_HEADERS);
      sh_http_str v;
      assert_true(sh_http_header(r, "x-63", &v));
      assert_str(v, "63");
      sh_msg_free(&r->hdr);
    } else {
      assert_int_equal(st, 431);
    }
    free(s.p);
  }
}

static void test_content_length_rules(void **state) {
  (void)state;
  sh_http_request *r;
  assert_int_equal(parse_str("POST /" H11 "Content-Length: 3\r\ncontent-length: 3\r\n\r\nabc", &r), 0);
  assert_body(r, "abc");
  sh_msg_free(&r->hdr);
  assert_int_equal(parse_str("POST /" H11 "Content-Length: 3 , 3,3\r\n\r\nabc", &r), 0);
  assert_int_equal(r->content_length, 3);
  sh_msg_free(&r->hdr);
  static const status_case cases[] = {
      {"POST /" H11 "Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400},
      {"POST /" H11 "Content-Length: 3, 4\r\n\r\nabcd", 400},
      {"POST /" H11 "Content-Length: +3\r\n\r\nabc", 400},
      {"POST /" H11 "Content-Length: -3\r\n\r\nabc", 400},
      {"POST /" H11 "Content-Length: 3 3\r\n\r\nabc", 400},
      {"POST /" H11 "Content-Length: 0x3\r\n\r\nabc", 400},
      {"POST /" H11 "Content-Length:\r\n\r\n", 400},
      {"POST /" H11 "Content-Length: 3,\r\n\r\n", 400},
      {"POST /" H11 "Content-Length: 99999999999999999999\r\n\r\n", 400},
      {"POST /" H11 "Content-Length: 9223372036854775808\r\n\r\n", 400},
      {"POST /" H11 "Content-Length: 9223372036854775807\r\n\r\n", 413},
  };
  check_statuses(cases);
}

static void test_transfer_encoding_rules(void **state) {
  (void)state;
  static const status_case cases[] = {
      {"POST /" H11 "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400},
      {"POST /" H11 "Content-Length: 3\r\nTransfer-Encoding: gzip\r\n\r\n", 400},
      {"POST /" H11 "Transfer-Encoding: gzip\r\n\r\n", 501},
      {"POST /" H11 "Transfer-Encoding: gzip, chunked\r\n\r\n", 501},
      {"POST /" H11 "Transfer-Encoding: identity\r\n\r\n", 501},
      {"POST /" H11 "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
      {"POST /" H11 "Transfer-Encoding: CHUNKED\t\r\n\r\n0\r\n\r\n", 0},
  };
  check_statuses(cases);
}

static void test_bad_chunks(void **state) {
  (void)state;
  static const char *bad[] = {
      "g\r\n",        "\r\n",     " 5\r\nhello\r\n",  "5 \r\nhello\r\n", "-5\r\n",
      "5\r\nhelloX",  "5\r\nhello\rX", "5\r\nhello\r\r\n", "5;\x01\r\nhello\r\n",
      "11111111111111111\r\n", "00000000000000001\r\n", "5\r\r\n", "5;a\rb\r\n",
      "0\r\nX: \x01\r\n\r\n", "0\r\n\r\r\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char buf[256];
    snprintf(buf, sizeof buf, "POST /" H11 "Transfer-Encoding: chunked\r\n\r\n%s0\r\n\r\n", bad[i]);
    assert_int_equal(status_of(buf), 400);
  }
  /* 16 digits are fine (and then over max_body). */
  assert_int_equal(status_of("POST /" H11 "Transfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n"), 413);
  assert_int_equal(status_of("POST /" H11 "Transfer-Encoding: chunked\r\n\r\n0000000000000005\r\nhello\r\n0\r\n\r\n"), 0);
  /* A chunk-size line of 4096 bytes is fine, longer is not. */
  for (size_t len = 4096; len <= 4097; len++) {
    http_log s = {0};
    http_log_printf(&s, "POST /" H11 "Transfer-Encoding: chunked\r\n\r\n1;");
    for (size_t i = 0; i < len - 4; i++) http_log_put(&s, "e", 1);
    http_log_printf(&s, "\r\nx\r\n0\r\n\r\n");
    assert_int_equal(parse_lim(s.p, s.len, &LIM, NULL), len == 4096 ? 0 : 400);
    free(s.p);
  }
}

static void test_body_limits(void **state) {
  (void)state;
  sh_http_limits lim = {8192, 10};
  /* 413 on the head alone, before any byte of the body. */
  const char *h = "POST /" H11 "Content-Length: 11\r\n\r\n";
  assert_int_equal(parse_lim(h, strlen(h), &lim, NULL), 413);
  h = "POST /" H11 "Content-Length: 10\r\n\r\n0123456789";
  assert_int_equal(parse_lim(h, strlen(h), &lim, NULL), 0);
  h = "POST /" H11 "Transfer-Encoding: chunked\r\n\r\n5\r\n01234\r\n5\r\n56789\r\n0\r\n\r\n";
  assert_int_equal(parse_lim(h, strlen(h), &lim, NULL), 0);
  h = "POST /" H11 "Transfer-Encoding: chunked\r\n\r\n5\r\n01234\r\n6\r\n";
  assert_int_equal(parse_lim(h, strlen(h), &lim, NULL), 413);
  /* Trailers are bounded by max_head. */
  sh_http_limits small = {100, 10};
  h = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"
      "X: 123456789012345678901234567890123456789012345678901234567890\r\n"
      "Y: 123456789012345678901234567890123456789012345678901234567890\r\n\r\n";
  assert_int_equal(parse_lim(h, strlen(h), &small, NULL), 431);
}

static void test_host_rules(void **state) {
  (void)state;
  static const status_case cases[] = {
      {"GET / HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: a\r\nHOST: b\r\n\r\n", 400},
      {"GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nhost:\r\n\r\n", 0},
      {"GET / HTTP/1.0\r\n\r\n", 0},
  };
  check_statuses(cases);
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

static void test_dead_after_error(void **state) {
  (void)state;
  conn c;
  conn_init(&c, &LIM);
  sh_http_request *r;
  const char *bad = "GET / HTTP/1.1\r\nBad Header: x\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
  assert_int_equal(feed(&c, bad, strlen(bad), &r), SH_HTTP_ERROR);
  assert_int_equal(c.p.error, 400);
  assert_false(sh_http_parser_busy(&c.p));
  const char *good = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
  for (int i = 0; i < 3; i++) {
    assert_int_equal(feed(&c, good, strlen(good), &r), SH_HTTP_MORE);
    assert_null(r);
    assert_int_equal(sh_buf_len(&c.in), 0);
    assert_int_equal(c.p.error, 400);
  }
  conn_done(&c);
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

#define POOLED(t) cmocka_unit_test_setup_teardown(t, pool_fixture_setup, pool_fixture_teardown)

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
      POOLED(test_bad_targets),
      POOLED(test_absolute_form),
      POOLED(test_versions),
      POOLED(test_line_ends),
      POOLED(test_header_syntax),
      POOLED(test_long_fields),
      POOLED(test_nul_everywhere),
      POOLED(test_head_too_long),
      POOLED(test_too_many_headers),
      POOLED(test_content_length_rules),
      POOLED(test_transfer_encoding_rules),
      POOLED(test_bad_chunks),
      POOLED(test_body_limits),
      POOLED(test_host_rules),
      POOLED(test_keep_alive),
      POOLED(test_big_head),
      POOLED(test_dead_after_error),
      POOLED(test_out_of_memory),
      POOLED(test_reset_mid_body),
      POOLED(test_fuzz_seeds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
