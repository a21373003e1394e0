/*
 * What the HTTP request parser's tests (test_http_parser.c,
 * test_http_parser_errors.c) share: a parser and its input buffer, parsing
 * an input whole (a request, "more", or its error status), checking a list
 * of inputs against their statuses, and comparing fields and bodies. Each
 * test runs with a pool of its own as the thread's (pool_fixture.h) and
 * fails when a request or a page was not given back.
 */
#ifndef TESTS_HTTP_PARSER_FIXTURE_H
#define TESTS_HTTP_PARSER_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

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

#define POOLED(t) cmocka_unit_test_setup_teardown(t, pool_fixture_setup, pool_fixture_teardown)

#endif
