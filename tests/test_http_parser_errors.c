/*
 * Tests for the HTTP/1.1 request parser (http/parser.h): each rule of the
 * grammar that answers an error status (targets, versions, line ends,
 * header syntax, a bad byte at any offset of a long field, a NUL anywhere,
 * Content-Length, Transfer-Encoding, chunks, Host), the bounds on memory
 * (an endless head, too many headers, a long body, trailers), and a parser
 * that stays dead after an error. Each test runs with a pool of its own as
 * the thread's and fails when a request or a page was not given back
 * (http_parser_fixture.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "http_parser_fixture.h"

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
      "11111111111111111\r\n", "10000000000000000\r\n", "5\r\r\n", "5;a\rb\r\n",
      "0\r\nX: \x01\r\n\r\n", "0\r\n\r\r\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char buf[256];
    snprintf(buf, sizeof buf, "POST /" H11 "Transfer-Encoding: chunked\r\n\r\n%s0\r\n\r\n", bad[i]);
    assert_int_equal(status_of(buf), 400);
  }
  /* 16 significant digits are fine (and then over max_body). */
  assert_int_equal(status_of("POST /" H11 "Transfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n"), 413);
  assert_int_equal(status_of("POST /" H11 "Transfer-Encoding: chunked\r\n\r\n0000000000000005\r\nhello\r\n0\r\n\r\n"), 0);
  /* Leading zeros count for nothing: 17 or 40 digits of a small size are
   * fine (RFC 9112 7.1); only a value past 64 bits is refused (above). */
  assert_int_equal(status_of("POST /" H11 "Transfer-Encoding: chunked\r\n\r\n00000000000000005\r\nhello\r\n0\r\n\r\n"), 0);
  assert_int_equal(status_of("POST /" H11 "Transfer-Encoding: chunked\r\n\r\n"
                             "0000000000000000000000000000000000000005\r\nhello\r\n"
                             "0000000000000000000000000\r\n\r\n"), 0);
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

int main(void) {
  const struct CMUnitTest tests[] = {
      POOLED(test_bad_targets),
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
      POOLED(test_dead_after_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
