/*
 * The harness of the fake network's tests (test_sim_net, test_sim_netfault):
 * a simulated platform driven directly, its workers running bodies that do
 * their IO through the socket seam (core/netplat.h) and wait for their
 * readiness (sh_plat_wait) while the virtual clock jumps to the arrivals. Bodies run on
 * fibers, where cmocka cannot fail: they note the first failed check
 * (CHECK), which run() asserts on after the join.
 */
#ifndef TESTS_SIMNET_HARNESS_H
#define TESTS_SIMNET_HARNESS_H

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <stackhouse/sim.h>

#include "netplat.h"
#include "netsock.h" /* SH_NET_MAX_DATAGRAM until the seam has it */
#include "seam_sockets.h"

#define US UINT64_C(1000)
#define MS UINT64_C(1000000)
#define SEC UINT64_C(1000000000)
#define IP(a, b, c, d) (((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (d))

typedef struct tsock {
  sh_sock s;
  uint32_t ev;      /* events reported, not yet awaited */
  uint32_t reports; /* how many reports */
  uint32_t all;     /* every event reported */
} tsock;

typedef void (*body_fn)(uint32_t w);

static sh_plat *P;
static body_fn bodies[2];
static int failed_line;
static bool lenient; /* faults at random: a body's checks may fail */
static const char *failed_what;
static uint64_t timeline; /* (vtime, socket, bytes) of every read */
static tsock L, C, A, U1, U2;
static sh_netaddr laddr;
static unsigned char big[200 * 1024], back[200 * 1024];

#define CHECK(cond)                                 \
  do {                                              \
    if (!(cond) && failed_line == 0) {              \
      failed_line = __LINE__;                       \
      failed_what = #cond;                          \
    }                                               \
  } while (0)

static void on_ready(void *token, uint32_t events) {
  tsock *t = token;
  t->ev |= events;
  t->all |= events;
  t->reports++;
}

static void entry(void *ctx, uint32_t w) {
  (void)ctx;
  if (bodies[w] != NULL) bodies[w](w);
}

static sh_sim_strategy strategy = SH_SIM_RANDOM;

static void configure(uint64_t seed, const char *faults, const char *trace) {
  sh_sim_options o;
  sh_sim_options_default(&o);
  o.seed = seed;
  o.strategy = strategy;
  o.faults = faults;
  o.trace_path = trace;
  sh_sim_configure(&o);
}

/* A run: a listener on 10.0.0.1 watched by worker 0, then the bodies. */
static void run(uint32_t workers, body_fn b0, body_fn b1) {
  failed_line = 0;
  timeline = 0;
  tsock *all[] = {&L, &C, &A, &U1, &U2};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) *all[i] = (tsock){.s = -1};
  assert_int_equal(sh_plat_new(workers, &P), 0);
  sh_net_set_ready(P, on_ready);
  sh_netaddr at = {IP(10, 0, 0, 1), 0};
  assert_int_equal(tcp_listen(&at, &L.s), 0);
  assert_int_equal(sh_net_local(L.s, &laddr), 0);
  assert_true(laddr.port >= 49152);
  assert_int_equal(sh_net_watch(P, 0, L.s, &L), 0);
  bodies[0] = b0;
  bodies[1] = b1;
  assert_int_equal(sh_plat_start(P, entry, NULL), 0);
  sh_plat_join(P);
  sh_plat_free(P);
  P = NULL;
  if (failed_line != 0 && !lenient) fail_msg("line %d: %s", failed_line, failed_what);
}


/* ---- helpers on a worker ------------------------------------------------------- */

/* Waits until t reported one of `want`; those events (0 after 1,000
 * virtual seconds). */
static uint32_t await(uint32_t w, tsock *t, uint32_t want) {
  for (int i = 0; i < 1000; i++) {
    uint32_t e = t->ev & want;
    t->ev &= ~want;
    if (e != 0) return e;
    sh_plat_wait(P, w, sh_plat_now_ns() + SEC, 64);
  }
  return 0;
}

static void nap(uint32_t w, uint64_t ns) {
  uint64_t until = sh_plat_now_ns() + ns;
  while (sh_plat_now_ns() < until) sh_plat_wait(P, w, until, 64); /* bounded by the clock */
}

static void note_read(sh_sock s, const unsigned char *p, int64_t n) {
  uint64_t h = timeline ^ sh_plat_now_ns() ^ ((uint64_t)(uint32_t)s << 40);
  for (int64_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ull;
  timeline = h;
}

/* Reads n bytes (fewer at the end of stream or an error). */
static size_t read_n(uint32_t w, tsock *t, unsigned char *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    int64_t r = sh_net_read(t->s, buf + got, n - got);
    if (r > 0) note_read(t->s, buf + got, r);
    if (r > 0) got += (size_t)r;
    else if (r != -EAGAIN || await(w, t, SH_IO_IN | SH_IO_HUP | SH_IO_ERR) == 0) break;
  }
  return got;
}

static size_t write_n(uint32_t w, tsock *t, const unsigned char *buf, size_t n) {
  size_t put = 0;
  while (put < n) {
    struct iovec iov = {(void *)(uintptr_t)(buf + put), n - put};
    int64_t r = sh_net_writev(t->s, &iov, 1);
    if (r > 0) put += (size_t)r;
    else if (r != -EAGAIN || await(w, t, SH_IO_OUT | SH_IO_ERR) == 0) break;
  }
  return put;
}

static int64_t write_str(tsock *t, const char *s) {
  struct iovec iov = {(void *)(uintptr_t)s, strlen(s)};
  return sh_net_writev(t->s, &iov, 1);
}

/* C connects to the listener; A is the accepted end; both watched by w. */
static void connect_pair(uint32_t w) {
  CHECK(tcp_to(&laddr, &C.s) == 0);
  CHECK(sh_net_watch(P, w, C.s, &C) == 0);
  CHECK(await(w, &C, SH_IO_OUT) != 0);
  CHECK(sh_net_error(C.s) == 0);
  CHECK(await(w, &L, SH_IO_IN) != 0);
  sh_netaddr peer;
  CHECK(sh_net_accept(L.s, &A.s, &peer) == 0);
  sh_netaddr cl;
  CHECK(sh_net_local(C.s, &cl) == 0 && cl.ip == peer.ip && cl.port == peer.port);
  CHECK(sh_net_watch(P, w, A.s, &A) == 0);
  CHECK(sh_net_accept(L.s, &A.s, &peer) == -EAGAIN || true);
}

/* Closes every socket of the test (the closed ones again: a no-op). */
static void close_all(void) {
  sh_sock s[] = {A.s, C.s, L.s, U1.s, U2.s};
  for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) sh_net_close(s[i]);
}

static void fill(size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) big[i] = (unsigned char)((i * 131 + seed * 7) >> 3);
}

/* ---- an echo server and its client ------------------------------------------------- */

#define ECHO_BYTES 50000

static void echo_server(uint32_t w) {
  CHECK(await(w, &L, SH_IO_IN) != 0);
  CHECK(sh_net_accept(L.s, &A.s, NULL) == 0);
  CHECK(sh_net_watch(P, w, A.s, &A) == 0);
  static unsigned char buf[3000];
  for (int i = 0; i < 100000; i++) {
    size_t n = read_n(w, &A, buf, sizeof(buf));
    CHECK(write_n(w, &A, buf, n) == n);
    if (n < sizeof(buf)) break; /* the end of the stream */
  }
  CHECK(sh_net_read(A.s, buf, sizeof(buf)) == 0);
  sh_net_close(A.s);
  sh_net_close(L.s);
}

static void echo_client(uint32_t w) {
  uint64_t t0 = sh_plat_now_ns();
  CHECK(tcp_to(&laddr, &C.s) == 0);
  CHECK(sh_net_watch(P, w, C.s, &C) == 0);
  CHECK(await(w, &C, SH_IO_OUT) == SH_IO_OUT);
  CHECK(sh_plat_now_ns() - t0 >= 20 * US);
  CHECK(sh_net_error(C.s) == 0);
  CHECK(write_n(w, &C, big, ECHO_BYTES) == ECHO_BYTES);
  CHECK(sh_net_shutdown(C.s) == 0);
  CHECK(read_n(w, &C, back, ECHO_BYTES + 1) == ECHO_BYTES);
  CHECK(memcmp(big, back, ECHO_BYTES) == 0);
  sh_net_close(C.s);
}

/* ---- UDP ----------------------------------------------------------------------------- */

static void udp_pair(uint32_t w) {
  sh_netaddr a = {IP(10, 0, 0, 1), 0}, b = {IP(10, 0, 0, 2), 5000};
  CHECK(udp_at(&a, &U1.s) == 0);
  CHECK(udp_at(&b, &U2.s) == 0);
  sh_sock u3;
  CHECK(udp_at(&b, &u3) == -EADDRINUSE);
  sh_net_close(u3);
  CHECK(sh_net_watch(P, w, U2.s, &U2) == 0);
}

static int64_t send_to_u2(const char *s) {
  sh_netaddr b = {IP(10, 0, 0, 2), 5000};
  return sh_net_sendto(U1.s, s, strlen(s), &b);
}

/* The sender of the datagram recv_u2 returned last. */
static sh_netaddr u2_from;

/* The next datagram on U2 (waiting for it), or -EAGAIN after `within`. */
static int64_t recv_u2(uint32_t w, char *buf, size_t len, uint64_t within) {
  uint64_t until = sh_plat_now_ns() + within;
  for (;;) { /* bounded by the clock */
    int64_t r = sh_net_recvfrom(U2.s, buf, len, &u2_from);
    if (r != -EAGAIN || sh_plat_now_ns() >= until) return r;
    sh_plat_wait(P, w, until, 64);
  }
}


#endif
