/*
 * Tests for core/net/buffer.c and core/net/netaddr.c: appends, peeks, consumes,
 * moves, spans and finds across page boundaries; moves that relink whole
 * pages and split one; zero lengths; out of memory (the sh/pool/alloc fault
 * point) leaving every buffer as it was; random operations against a flat
 * model; the byte messages; address text. Each test runs with a pool of its
 * own as the thread's, and fails when a page was not given back.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fiu-control.h>
#include <fiu.h>
#include <stdlib.h>
#include <string.h>

#include "net/buffer.h"
#include "pool_fixture.h"
#include "support/harness.h"

#define PAGE ((size_t)SH_PAGE_DATA)

/* The byte at position i of every test's data. */
static uint8_t pattern(size_t i) { return (uint8_t)(i * 7 + i / 251); }

static uint8_t *make_data(size_t n, size_t from) {
  uint8_t *d = malloc(n ? n : 1);
  assert_non_null(d);
  for (size_t i = 0; i < n; i++) d[i] = pattern(from + i);
  return d;
}

/* Appends the pattern's bytes [from, from + n) in chunks of `chunk`. */
static void append_pattern(sh_buf *b, size_t from, size_t n, size_t chunk) {
  uint8_t *d = make_data(n, from);
  for (size_t at = 0; at < n; at += chunk)
    assert_int_equal(sh_buf_append(b, d + at, n - at < chunk ? n - at : chunk), 0);
  free(d);
}

/* b holds exactly the pattern's bytes [from, from + n). */
static void assert_pattern(const sh_buf *b, size_t from, size_t n) {
  assert_int_equal(sh_buf_len(b), n);
  uint8_t *got = malloc(n + 1);
  assert_non_null(got);
  assert_int_equal(sh_buf_peek(b, 0, got, n + 1), n);
  for (size_t i = 0; i < n; i++)
    if (got[i] != pattern(from + i)) fail_msg("byte %zu: %u, not %u", i, got[i], pattern(from + i));
  free(got);
}

static size_t pages_for(size_t n) { return (n + PAGE - 1) / PAGE; }

static void test_append_peek_across_pages(void **state) {
  (void)state;
  sh_buf b = SH_BUF_INIT;
  size_t n = 3 * PAGE + 17;
  append_pattern(&b, 0, n, 1000);
  assert_int_equal(sh_buf_pages(&b), 4);
  assert_pattern(&b, 0, n);
  /* Peeks that start and end at every kind of place. */
  size_t offs[] = {0, 1, PAGE - 1, PAGE, PAGE + 1, 2 * PAGE - 3, 3 * PAGE, n - 1, n, n + 5};
  uint8_t out[2 * SH_PAGE_DATA + 10];
  for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
    size_t want = offs[i] < n ? n - offs[i] : 0;
    if (want > sizeof out) want = sizeof out;
    assert_int_equal(sh_buf_peek(&b, offs[i], out, sizeof out), want);
    for (size_t k = 0; k < want; k++) assert_int_equal(out[k], pattern(offs[i] + k));
  }
  assert_int_equal(sh_buf_len(&b), n); /* peeks leave it as it was */
  sh_buf_clear(&b);
  assert_int_equal(sh_buf_pages(&b), 0);
  assert_int_equal(pool_fixture_outstanding(), 0);
}

static void test_consume_gives_pages_back(void **state) {
  (void)state;
  sh_buf b = SH_BUF_INIT;
  size_t n = 4 * PAGE;
  append_pattern(&b, 0, n, PAGE);
  size_t gone = 0;
  size_t steps[] = {1, PAGE - 2, 1, 1, 3 * PAGE - 10, 5};
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    sh_buf_consume(&b, steps[i]);
    gone += steps[i];
    assert_pattern(&b, gone, n - gone);
    /* The pages still held are those with a byte left. */
    assert_int_equal(sh_buf_pages(&b), pages_for(n) - gone / PAGE);
    assert_int_equal(pool_fixture_outstanding(), sh_buf_pages(&b));
  }
  sh_buf_consume(&b, n); /* more than it holds: everything */
  assert_int_equal(sh_buf_len(&b), 0);
  assert_int_equal(sh_buf_pages(&b), 0);
  assert_int_equal(pool_fixture_outstanding(), 0);
}

static void test_move_whole_pages_without_copy(void **state) {
  (void)state;
  sh_buf src = SH_BUF_INIT, dst = SH_BUF_INIT;
  append_pattern(&src, 0, 3 * PAGE, PAGE);
  const uint8_t *first, *second;
  sh_buf_span(&src, 0, &first);
  sh_buf_span(&src, PAGE, &second);
  uint64_t allocs = pool_fixture_allocs();
  assert_int_equal(sh_buf_move(&dst, &src, 2 * PAGE), 0);
  assert_int_equal(pool_fixture_allocs(), allocs); /* nothing allocated, nothing copied */
  const uint8_t *p;
  assert_int_equal(sh_buf_span(&dst, 0, &p), PAGE);
  assert_ptr_equal(p, first);
  assert_int_equal(sh_buf_span(&dst, PAGE, &p), PAGE);
  assert_ptr_equal(p, second);
  assert_pattern(&dst, 0, 2 * PAGE);
  assert_pattern(&src, 2 * PAGE, PAGE);
  assert_int_equal(sh_buf_pages(&dst), 2);
  assert_int_equal(sh_buf_pages(&src), 1);
  /* Moving after bytes already there appends. */
  assert_int_equal(sh_buf_move(&dst, &src, 10 * PAGE), 0);
  assert_pattern(&dst, 0, 3 * PAGE);
  assert_int_equal(sh_buf_len(&src), 0);
  assert_null(src.head);
  sh_buf_clear(&dst);
  assert_int_equal(pool_fixture_outstanding(), 0);
}

static void test_move_splits_one_page(void **state) {
  (void)state;
  sh_buf src = SH_BUF_INIT, dst = SH_BUF_INIT;
  append_pattern(&src, 0, 3 * PAGE, PAGE);
  /* One whole page relinked, 100 bytes of the next copied into a new page. */
  uint64_t allocs = pool_fixture_allocs();
  assert_int_equal(sh_buf_move(&dst, &src, PAGE + 100), 0);
  assert_int_equal(pool_fixture_allocs(), allocs + 1);
  assert_pattern(&dst, 0, PAGE + 100);
  assert_pattern(&src, PAGE + 100, 2 * PAGE - 100);
  assert_int_equal(sh_buf_pages(&dst), 2);
  assert_int_equal(sh_buf_pages(&src), 2);
  /* Into the room of dst's tail: no page needed. */
  allocs = pool_fixture_allocs();
  assert_int_equal(sh_buf_move(&dst, &src, 50), 0);
  assert_int_equal(pool_fixture_allocs(), allocs);
  assert_pattern(&dst, 0, PAGE + 150);
  /* A split whose bytes do not fit the tail's room: a page for the rest. */
  sh_buf other = SH_BUF_INIT;
  append_pattern(&other, 0, PAGE - 10, PAGE);
  assert_int_equal(sh_buf_move(&other, &src, 30), 0);
  assert_int_equal(sh_buf_pages(&other), 2);
  assert_int_equal(sh_buf_len(&other), PAGE + 20);
  uint8_t tail[30];
  assert_int_equal(sh_buf_peek(&other, PAGE - 10, tail, sizeof tail), 30);
  for (size_t i = 0; i < 30; i++) assert_int_equal(tail[i], pattern(PAGE + 150 + i));
  assert_pattern(&src, PAGE + 180, 2 * PAGE - 180);
  sh_buf_clear(&src);
  sh_buf_clear(&dst);
  sh_buf_clear(&other);
  assert_int_equal(pool_fixture_outstanding(), 0);
}

static void test_span_and_find(void **state) {
  (void)state;
  sh_buf b = SH_BUF_INIT;
  uint8_t *d = make_data(2 * PAGE + 5, 0);
  memset(d, 'a', 2 * PAGE + 5);
  d[PAGE - 1] = '\n';
  d[PAGE] = '\r';
  d[2 * PAGE + 4] = '!';
  assert_int_equal(sh_buf_append(&b, d, 2 * PAGE + 5), 0);
  sh_buf_consume(&b, 3); /* the head page starts past its first byte */
  const uint8_t *p;
  assert_int_equal(sh_buf_span(&b, 0, &p), PAGE - 3);
  assert_int_equal(sh_buf_span(&b, PAGE - 4, &p), 1);
  assert_int_equal(*p, '\n');
  assert_int_equal(sh_buf_span(&b, PAGE - 3, &p), PAGE);
  assert_int_equal(*p, '\r');
  assert_int_equal(sh_buf_span(&b, 2 * PAGE + 1, &p), 1);
  assert_int_equal(*p, '!');
  assert_int_equal(sh_buf_span(&b, 2 * PAGE + 2, &p), 0);
  assert_int_equal(sh_buf_find(&b, 0, '\n'), PAGE - 4);
  assert_int_equal(sh_buf_find(&b, PAGE - 4, '\n'), PAGE - 4);
  assert_int_equal(sh_buf_find(&b, PAGE - 3, '\n'), -1);
  assert_int_equal(sh_buf_find(&b, 0, '\r'), PAGE - 3);
  assert_int_equal(sh_buf_find(&b, 10, '!'), 2 * PAGE + 1);
  assert_int_equal(sh_buf_find(&b, 2 * PAGE + 2, 'a'), -1);
  assert_int_equal(sh_buf_find(&b, 0, 'z'), -1);
  free(d);
  sh_buf_clear(&b);
}

static void test_zero_lengths(void **state) {
  (void)state;
  sh_buf a = SH_BUF_INIT, b = SH_BUF_INIT;
  assert_int_equal(sh_buf_append(&a, NULL, 0), 0);
  assert_int_equal(sh_buf_pages(&a), 0);
  uint8_t x;
  const uint8_t *p = &x;
  assert_int_equal(sh_buf_peek(&a, 0, &x, 1), 0);
  assert_int_equal(sh_buf_span(&a, 0, &p), 0);
  assert_int_equal(sh_buf_find(&a, 0, 0), -1);
  sh_buf_consume(&a, 0);
  sh_buf_consume(&a, 10);
  assert_int_equal(sh_buf_move(&b, &a, 0), 0);
  assert_int_equal(sh_buf_move(&b, &a, 5), 0);
  assert_int_equal(sh_buf_len(&b), 0);
  assert_int_equal(sh_buf_pages(&b), 0);
  /* Nothing of a full buffer: nothing moves or goes. */
  append_pattern(&a, 0, 10, 10);
  assert_int_equal(sh_buf_move(&b, &a, 0), 0);
  sh_buf_consume(&a, 0);
  assert_pattern(&a, 0, 10);
  assert_int_equal(sh_buf_peek(&a, 3, &x, 0), 0);
  sh_buf_clear(&a);
  sh_buf_clear(&a); /* twice is fine */
  assert_int_equal(pool_fixture_outstanding(), 0);
}

static void test_large_buffer(void **state) {
  (void)state;
  sh_buf b = SH_BUF_INIT;
  size_t n = (1u << 20) + 333;
  append_pattern(&b, 0, n, 4099);
  assert_int_equal(sh_buf_pages(&b), pages_for(n));
  /* Walking the spans sees every byte in order. */
  size_t off = 0;
  const uint8_t *p;
  for (size_t k; (k = sh_buf_span(&b, off, &p)) > 0; off += k)
    for (size_t i = 0; i < k; i++)
      if (p[i] != pattern(off + i)) fail_msg("byte %zu", off + i);
  assert_int_equal(off, n);
  /* Consumed in odd steps, the rest always intact at its sample points. */
  size_t gone = 0;
  while (gone < n) {
    size_t step = 12345 < n - gone ? 12345 : n - gone;
    sh_buf_consume(&b, step);
    gone += step;
    uint8_t c;
    if (gone < n) {
      assert_int_equal(sh_buf_peek(&b, 0, &c, 1), 1);
      assert_int_equal(c, pattern(gone));
    }
    assert_int_equal(pool_fixture_outstanding(), gone < n ? pages_for(n) - gone / PAGE : 0);
  }
  assert_int_equal(sh_buf_pages(&b), 0);
}

static void test_iov(void **state) {
  (void)state;
  sh_buf b = SH_BUF_INIT, dst = SH_BUF_INIT;
  append_pattern(&dst, 0, PAGE, PAGE);
  append_pattern(&b, PAGE, 2 * PAGE + 1, PAGE);
  assert_int_equal(sh_buf_move(&dst, &b, 2 * PAGE + 1), 0);
  assert_pattern(&dst, 0, 3 * PAGE + 1);
  assert_int_equal(sh_buf_pages(&dst), 4);
  /* iovecs: bounded by count and by bytes; the first starts mid-page. */
  sh_buf_consume(&dst, 10);
  struct iovec iov[8];
  assert_int_equal(sh_buf_iov(&dst, iov, 8, SIZE_MAX), 4);
  assert_int_equal(iov[0].iov_len, PAGE - 10);
  assert_int_equal(((uint8_t *)iov[0].iov_base)[0], pattern(10));
  assert_int_equal(iov[3].iov_len, 1);
  assert_int_equal(sh_buf_iov(&dst, iov, 2, SIZE_MAX), 2);
  assert_int_equal(sh_buf_iov(&dst, iov, 8, PAGE), 2);
  assert_int_equal(iov[1].iov_len, 10);
  assert_int_equal(sh_buf_iov(&dst, iov, 8, 0), 0);
  sh_buf_clear(&b);
  sh_buf_clear(&dst);
  assert_int_equal(pool_fixture_outstanding(), 0);
}

/* The fault point fails every allocation after the next `allow_left`. */
static int allow_left;
static int fail_after(const char *name, int *failnum, void **failinfo, unsigned int *flags) {
  (void)name, (void)failnum, (void)failinfo, (void)flags;
  return allow_left-- <= 0;
}

static void fail_allocations_after(int n) {
  allow_left = n;
  assert_int_equal(fiu_enable_external("sh/pool/alloc", 1, NULL, 0, fail_after), 0);
}

static void test_out_of_memory_changes_nothing(void **state) {
  (void)state;
  sh_buf a = SH_BUF_INIT, b = SH_BUF_INIT;
  append_pattern(&a, 0, PAGE + 10, PAGE);
  uint8_t *d = make_data(3 * PAGE, 0);
  for (int k = 0; k < 3; k++) {
    fail_allocations_after(k); /* the k+1-th of the 3 pages fails */
    assert_int_equal(sh_buf_append(&a, d, 3 * PAGE), -ENOMEM);
    fiu_disable("sh/pool/alloc");
    assert_pattern(&a, 0, PAGE + 10);
    assert_int_equal(pool_fixture_outstanding(), 2);
  }
  /* A split that needs a page moves nothing without one. */
  append_pattern(&b, 0, PAGE - 1, PAGE);
  fail_allocations_after(0);
  assert_int_equal(sh_buf_move(&b, &a, PAGE + 5), -ENOMEM);
  assert_pattern(&a, 0, PAGE + 10);
  assert_pattern(&b, 0, PAGE - 1);
  /* ... but whole pages, or bytes that fit the room, need none. */
  assert_int_equal(sh_buf_move(&b, &a, 1), 0);
  sh_buf_clear(&b);
  assert_int_equal(sh_buf_move(&b, &a, PAGE - 1), 0);
  assert_int_equal(sh_buf_len(&a), 10);
  assert_null(sh_bytes_new("x", 1));
  fiu_disable("sh/pool/alloc");
  /* The message, but not its page. */
  fail_allocations_after(1);
  assert_null(sh_bytes_new("x", 1));
  fiu_disable("sh/pool/alloc");
  fail_allocations_after(1);
  assert_null(sh_datagram_new(&(sh_netaddr){0}, "x", 1));
  fiu_disable("sh/pool/alloc");
  free(d);
  sh_buf_clear(&a);
  sh_buf_clear(&b);
  assert_int_equal(pool_fixture_outstanding(), 0);
}

/* Random appends, consumes, moves both ways and peeks on two buffers,
 * checked against two flat arrays. */
static void test_random_against_model(void **state) {
  (void)state;
  enum { CAP = 6 * SH_PAGE_DATA };
  static uint8_t model[2][CAP], scratch[CAP];
  size_t len[2] = {0, 0};
  sh_buf b[2] = {SH_BUF_INIT, SH_BUF_INIT};
  uint64_t rng = 42;
  uint8_t next = 0;
  for (int step = 0; step < 4000; step++) {
    uint64_t r = th_xorshift(&rng);
    int i = (int)(r & 1), j = 1 - i;
    size_t n = (size_t)(th_xorshift(&rng) % (r & 2 ? 3 * PAGE : 64));
    switch ((r >> 2) % 4) {
    case 0: /* append */
      if (len[i] + n > CAP) n = CAP - len[i];
      for (size_t k = 0; k < n; k++) model[i][len[i] + k] = next++;
      assert_int_equal(sh_buf_append(&b[i], model[i] + len[i], n), 0);
      len[i] += n;
      break;
    case 1: /* consume */
      if (n > len[i]) n = len[i];
      sh_buf_consume(&b[i], n);
      memmove(model[i], model[i] + n, len[i] - n);
      len[i] -= n;
      break;
    case 2: /* move i -> j */
      if (n > len[i]) n = len[i];
      if (len[j] + n > CAP) n = CAP - len[j];
      assert_int_equal(sh_buf_move(&b[j], &b[i], n), 0);
      memcpy(model[j] + len[j], model[i], n);
      memmove(model[i], model[i] + n, len[i] - n);
      len[j] += n;
      len[i] -= n;
      break;
    default: { /* peek somewhere */
      size_t off = len[i] ? (size_t)(r >> 8) % len[i] : 0;
      size_t got = sh_buf_peek(&b[i], off, scratch, n);
      assert_int_equal(got, n < len[i] - off ? n : len[i] - off);
      assert_memory_equal(scratch, model[i] + off, got);
    }
    }
    for (int k = 0; k < 2; k++) {
      assert_int_equal(sh_buf_len(&b[k]), len[k]);
      assert_true(sh_buf_pages(&b[k]) <= len[k] + 1); /* no empty page but the tail */
    }
  }
  for (int k = 0; k < 2; k++) {
    assert_int_equal(sh_buf_peek(&b[k], 0, scratch, CAP), len[k]);
    assert_memory_equal(scratch, model[k], len[k]);
    sh_buf_clear(&b[k]);
  }
  assert_int_equal(pool_fixture_outstanding(), 0);
}

static void test_byte_messages(void **state) {
  (void)state;
  uint8_t *d = make_data(PAGE + 1, 0);
  sh_bytes *m = sh_bytes_new(d, PAGE + 1);
  assert_non_null(m);
  assert_ptr_equal(sh_msg_type_of(&m->hdr), &sh_bytes_type);
  assert_int_equal(sh_bytes_type.kind, SH_NOTICE);
  assert_pattern(&m->buf, 0, PAGE + 1);
  sh_msg_free(&m->hdr); /* its drop gives the pages back */
  sh_netaddr to = {0x7f000001, 9};
  sh_datagram *g = sh_datagram_new(&to, d, 10);
  assert_non_null(g);
  assert_int_equal(g->peer.ip, to.ip);
  assert_int_equal(g->peer.port, 9);
  assert_int_equal(sh_datagram_type.kind, SH_NOTICE);
  assert_pattern(&g->buf, 0, 10);
  sh_msg_free(&g->hdr);
  sh_bytes *empty = sh_bytes_new(NULL, 0);
  assert_non_null(empty);
  assert_int_equal(sh_buf_len(&empty->buf), 0);
  sh_msg_free(&empty->hdr);
  free(d);
  assert_int_equal(pool_fixture_outstanding(), 0);
}

static void test_netaddr_parse(void **state) {
  (void)state;
  sh_netaddr a;
  assert_int_equal(sh_netaddr_parse("127.0.0.1:8080", &a), 0);
  assert_int_equal(a.ip, 0x7f000001);
  assert_int_equal(a.port, 8080);
  assert_int_equal(sh_netaddr_parse("0.0.0.0:0", &a), 0);
  assert_int_equal(a.ip, 0);
  assert_int_equal(a.port, 0);
  assert_int_equal(sh_netaddr_parse("255.255.255.255:65535", &a), 0);
  assert_int_equal(a.ip, 0xffffffffu);
  assert_int_equal(a.port, 65535);
  assert_int_equal(sh_netaddr_parse("10.20.30.40:5", &a), 0);
  assert_int_equal(a.ip, 0x0a141e28);
  const char *bad[] = {
      "",  "1.2.3.4",     "1.2.3:4",       "1.2.3.4.5:6",    "256.1.1.1:1",    "1.2.3.4:65536",
      "01.2.3.4:5",     "1.2.3.4:05",    "1.2.3.4:",       ":80",            "a.b.c.d:1",
      " 1.2.3.4:5",     "1.2.3.4:5 ",    "1.2.3.4:5x",     "1..3.4:5",       "1.2.3.4::5",
      "-1.2.3.4:5",     "+1.2.3.4:5",    "1.2.3.4:+5",     "0x1.2.3.4:5",    "1.2.3.4:999999",
      "1.2.3.1000:5",   "localhost:80",  "1.2.3.4:5:6",    "1.2.3.4:0000005",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    a = (sh_netaddr){7, 7};
    if (sh_netaddr_parse(bad[i], &a) != -EINVAL) fail_msg("accepted \"%s\"", bad[i]);
    assert_int_equal(a.ip, 7); /* untouched */
  }
  assert_int_equal(sh_netaddr_parse(NULL, &a), -EINVAL);
  assert_int_equal(sh_netaddr_parse("1.2.3.4:5", NULL), -EINVAL);
}

static void test_netaddr_format(void **state) {
  (void)state;
  char buf[22];
  sh_netaddr a = {0xffffffffu, 65535};
  assert_int_equal(sh_netaddr_format(&a, buf, sizeof buf), 0);
  assert_string_equal(buf, "255.255.255.255:65535");
  assert_int_equal(sh_netaddr_format(&a, buf, 21), -ENOSPC);
  a = (sh_netaddr){0x0a000001, 0};
  assert_int_equal(sh_netaddr_format(&a, buf, 11), 0);
  assert_string_equal(buf, "10.0.0.1:0");
  assert_int_equal(sh_netaddr_format(&a, buf, 10), -ENOSPC);
  assert_int_equal(sh_netaddr_format(&a, NULL, 0), -ENOSPC);
  /* Round trip. */
  sh_netaddr back;
  a = (sh_netaddr){0xc0a80102, 443};
  assert_int_equal(sh_netaddr_format(&a, buf, sizeof buf), 0);
  assert_int_equal(sh_netaddr_parse(buf, &back), 0);
  assert_int_equal(back.ip, a.ip);
  assert_int_equal(back.port, a.port);
}

#define POOLED(t) cmocka_unit_test_setup_teardown(t, pool_fixture_setup, pool_fixture_teardown)

int main(void) {
  fiu_init(0);
  const struct CMUnitTest tests[] = {
      POOLED(test_append_peek_across_pages),
      POOLED(test_consume_gives_pages_back),
      POOLED(test_move_whole_pages_without_copy),
      POOLED(test_move_splits_one_page),
      POOLED(test_span_and_find),
      POOLED(test_zero_lengths),
      POOLED(test_large_buffer),
      POOLED(test_iov),
      POOLED(test_out_of_memory_changes_nothing),
      POOLED(test_random_against_model),
      POOLED(test_byte_messages),
      cmocka_unit_test(test_netaddr_parse),
      cmocka_unit_test(test_netaddr_format),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
