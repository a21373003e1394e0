/*
 * Tests of the simulator's fake network (backend-sim/net.c, nettcp.c,
 * netudp.c) through the socket seam (core/netplat.h), on a simulated
 * platform driven directly: each worker runs a body that does its IO,
 * polls its readiness and parks; the virtual clock jumps to the arrivals.
 *   - connect, accept and echo across two workers; refused connects, and
 *     connects to an address with no host, which never end; the
 *     end of stream after shutdown and close; the window (a partial write,
 *     -EAGAIN, SH_IO_OUT once the reader made room); UDP datagrams;
 *   - each network fault point does what net.c says;
 *   - the same seed gives the same byte timeline and trace hash, another
 *     seed another timeline; nothing is reported after a close; the trace
 *     file draws the arrivals.
 * Bodies run on fibers, where cmocka cannot fail: they note the first
 * failed check, which the test asserts on after the join.
 */
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
  assert_int_equal(sh_net_listen(&at, 16, &L.s), 0);
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

static void run1(uint64_t seed, body_fn b) {
  configure(seed, NULL, NULL);
  run(1, b, NULL);
}

/* ---- helpers on a worker ------------------------------------------------------- */

/* Parks until t reported one of `want`; those events (0 after 1,000
 * virtual seconds). */
static uint32_t await(uint32_t w, tsock *t, uint32_t want) {
  for (int i = 0; i < 1000; i++) {
    sh_net_poll(P, w, 64);
    uint32_t e = t->ev & want;
    t->ev &= ~want;
    if (e != 0) return e;
    sh_plat_park(P, w, sh_plat_now_ns() + SEC);
  }
  return 0;
}

static void nap(uint32_t w, uint64_t ns) {
  uint64_t until = sh_plat_now_ns() + ns;
  while (sh_plat_now_ns() < until) sh_plat_park(P, w, until); /* bounded by the clock */
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
  CHECK(sh_net_connect(&laddr, &C.s) == 0);
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

/* ---- connect, echo, refuse, shutdown, window --------------------------------------- */

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
  CHECK(sh_net_connect(&laddr, &C.s) == 0);
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

static void test_echo(void **state) {
  (void)state;
  configure(1, NULL, NULL);
  fill(ECHO_BYTES, 1);
  run(2, echo_server, echo_client);
  sh_sim_report r;
  sh_sim_report_get(&r);
  assert_true(r.jumps > 0);
  assert_true(r.vtime_ns >= 100 * US);
}

static void refused_body(uint32_t w) {
  sh_netaddr closed = {IP(10, 0, 0, 1), 7}; /* the listener's host, another port */
  CHECK(sh_net_connect(&closed, &C.s) == 0);
  CHECK(sh_net_watch(P, w, C.s, &C) == 0);
  CHECK(await(w, &C, SH_IO_OUT | SH_IO_ERR) == (SH_IO_OUT | SH_IO_ERR));
  CHECK(sh_net_error(C.s) == -ECONNREFUSED);
  CHECK(sh_net_error(C.s) == 0);
  unsigned char b[4];
  CHECK(sh_net_read(C.s, b, sizeof(b)) == -ENOTCONN);
  sh_net_close(C.s);
  C = (tsock){.s = -1};
  /* No host at all: no answer, ever. */
  sh_netaddr nobody = {IP(192, 0, 2, 1), 9};
  CHECK(sh_net_connect(&nobody, &C.s) == 0);
  CHECK(sh_net_watch(P, w, C.s, &C) == 0);
  nap(w, 10 * SEC);
  sh_net_poll(P, w, 64);
  CHECK(C.reports == 0 && sh_net_error(C.s) == 0);
  CHECK(write_str(&C, "x") == -EAGAIN);
  close_all();
}

static void test_refused(void **state) {
  (void)state;
  run1(2, refused_body);
}

static void eof_body(uint32_t w) {
  connect_pair(w);
  CHECK(write_str(&C, "abc") == 3);
  CHECK(sh_net_shutdown(C.s) == 0);
  CHECK(write_str(&C, "d") == -EPIPE);
  unsigned char b[8];
  CHECK(read_n(w, &A, b, sizeof(b)) == 3 && memcmp(b, "abc", 3) == 0);
  CHECK(A.all == (SH_IO_OUT | SH_IO_IN | SH_IO_HUP));
  CHECK(sh_net_read(A.s, b, sizeof(b)) == 0);
  CHECK(write_str(&A, "back") == 4); /* the other direction is still open */
  CHECK(read_n(w, &C, b, 4) == 4);
  sh_net_close(C.s);
  A.ev = 0;
  CHECK(await(w, &A, SH_IO_HUP) != 0); /* the close arrived */
  CHECK(write_str(&A, "x") == -EPIPE);
  close_all();
}

static void test_eof(void **state) {
  (void)state;
  run1(3, eof_body);
}

static void window_body(uint32_t w) {
  connect_pair(w);
  struct iovec iov[2] = {{big, 60000}, {big + 60000, 40000}};
  CHECK(sh_net_writev(C.s, iov, 2) == 64 * 1024);
  CHECK(sh_net_writev(C.s, iov, 2) == -EAGAIN);
  C.ev = 0;
  CHECK(await(w, &A, SH_IO_IN) != 0);
  sh_net_poll(P, w, 64);
  CHECK((C.ev & SH_IO_OUT) == 0); /* nobody read yet */
  int64_t r = sh_net_read(A.s, back, 10000);
  CHECK(r > 0);
  CHECK(await(w, &C, SH_IO_OUT) != 0);
  int64_t again = sh_net_writev(C.s, iov, 2);
  CHECK(again > 0 && again <= r);
  CHECK(read_n(w, &A, back + r, 64 * 1024 + (size_t)again - (size_t)r) ==
        64 * 1024 + (size_t)again - (size_t)r);
  CHECK(memcmp(back, big, 64 * 1024) == 0);
  close_all();
}

static void test_window(void **state) {
  (void)state;
  configure(4, NULL, NULL);
  fill(sizeof(big), 4);
  run(1, window_body, NULL);
}

/* ---- UDP ----------------------------------------------------------------------------- */

static void udp_pair(uint32_t w) {
  sh_netaddr a = {IP(10, 0, 0, 1), 0}, b = {IP(10, 0, 0, 2), 5000};
  CHECK(sh_net_udp_open(&a, &U1.s) == 0);
  CHECK(sh_net_udp_open(&b, &U2.s) == 0);
  CHECK(sh_net_udp_open(&b, &U1.s) == -EADDRINUSE);
  CHECK(sh_net_watch(P, w, U2.s, &U2) == 0);
}

static int64_t send_to_u2(const char *s) {
  sh_netaddr b = {IP(10, 0, 0, 2), 5000};
  return sh_net_sendto(U1.s, s, strlen(s), &b);
}

/* The next datagram on U2 (waiting for it), or -EAGAIN after `within`. */
static int64_t recv_u2(uint32_t w, char *buf, size_t len, uint64_t within) {
  uint64_t until = sh_plat_now_ns() + within;
  for (;;) { /* bounded by the clock */
    int64_t r = sh_net_recvfrom(U2.s, buf, len, NULL);
    if (r != -EAGAIN || sh_plat_now_ns() >= until) return r;
    sh_net_poll(P, w, 64);
    sh_plat_park(P, w, until);
  }
}

static void udp_body(uint32_t w) {
  udp_pair(w);
  static char buf[70000];
  CHECK(send_to_u2("x") == 1);
  CHECK(send_to_u2("hello") == 5);
  CHECK(send_to_u2("a longer datagram") == 17);
  CHECK(await(w, &U2, SH_IO_IN) != 0);
  sh_netaddr from, a;
  CHECK(sh_net_local(U1.s, &a) == 0);
  CHECK(recv_u2(w, buf, sizeof(buf), MS) == 1);
  CHECK(recv_u2(w, buf, sizeof(buf), MS) == 5 && memcmp(buf, "hello", 5) == 0);
  CHECK(recv_u2(w, buf, 8, MS) == 8 && memcmp(buf, "a longer", 8) == 0); /* truncated */
  CHECK(recv_u2(w, buf, sizeof(buf), MS) == -EAGAIN);
  sh_netaddr b = {IP(10, 0, 0, 2), 5000};
  CHECK(sh_net_sendto(U1.s, big, SH_NET_MAX_DATAGRAM + 1, &b) == -EMSGSIZE);
  CHECK(sh_net_sendto(U1.s, big, SH_NET_MAX_DATAGRAM, &b) == SH_NET_MAX_DATAGRAM);
  CHECK(recv_u2(w, buf, sizeof(buf), MS) == SH_NET_MAX_DATAGRAM);
  CHECK(sh_net_recvfrom(U2.s, buf, 4, &from) == -EAGAIN);
  CHECK(send_to_u2("from") == 4);
  CHECK(recv_u2(w, buf, sizeof(buf), MS) == 4);
  CHECK(sh_net_sendto(U2.s, "r", 1, &a) == 1);
  nap(w, MS);
  CHECK(sh_net_recvfrom(U1.s, buf, 4, &from) == 1);
  CHECK(from.ip == b.ip && from.port == b.port);
  close_all();
}

static void test_udp(void **state) {
  (void)state;
  run1(5, udp_body);
}

/* ---- faults ------------------------------------------------------------------------------ */

static const char *fault_now; /* the point the body checks */

static void fault_tcp_body(uint32_t w) {
  unsigned char b[1000];
  uint64_t t0 = sh_plat_now_ns();
  if (strcmp(fault_now, "sh/net/connect") == 0 || strcmp(fault_now, "sh/net/accept") == 0) {
    CHECK(sh_net_connect(&laddr, &C.s) == 0);
    CHECK(sh_net_watch(P, w, C.s, &C) == 0);
    CHECK(await(w, &C, SH_IO_OUT) != 0);
    bool refused = strcmp(fault_now, "sh/net/connect") == 0;
    CHECK(sh_net_error(C.s) == (refused ? -ECONNREFUSED : 0));
    if (!refused) {
      CHECK(sh_net_accept(L.s, &A.s, NULL) == -EMFILE);
      sh_sim_faults_disable();
      CHECK(sh_net_accept(L.s, &A.s, NULL) == 0); /* it stayed queued */
    }
    close_all();
    return;
  }
  connect_pair(w);
  uint64_t took = sh_plat_now_ns() - t0;
  if (strcmp(fault_now, "sh/net/delay") == 0) CHECK(took >= MS);
  if (strcmp(fault_now, "sh/net/partition") == 0) CHECK(took >= 50 * MS);
  if (strcmp(fault_now, "sh/net/reset") == 0) {
    CHECK(write_str(&C, "x") == -ECONNRESET);
    CHECK(await(w, &A, SH_IO_HUP | SH_IO_ERR) == (SH_IO_HUP | SH_IO_ERR));
    CHECK(sh_net_read(A.s, b, 1) == -ECONNRESET);
    CHECK(write_str(&A, "y") == -ECONNRESET);
    CHECK(sh_net_error(A.s) == -ECONNRESET);
  } else if (strcmp(fault_now, "sh/net/write") == 0) {
    int64_t r = sh_net_writev(C.s, &(struct iovec){big, sizeof(b)}, 1);
    CHECK(r >= 1 && r < (int64_t)sizeof(b));
    CHECK(await(w, &C, SH_IO_OUT) != 0); /* room is there: an edge */
  } else if (strcmp(fault_now, "sh/net/read") == 0) {
    CHECK(sh_net_writev(C.s, &(struct iovec){big, sizeof(b)}, 1) == (int64_t)sizeof(b));
    nap(w, MS);
    int64_t r = sh_net_read(A.s, b, sizeof(b));
    CHECK(r >= 1 && r < (int64_t)sizeof(b));
  }
  close_all();
}

static void fault_udp_body(uint32_t w) {
  udp_pair(w);
  char buf[16] = {0};
  CHECK(send_to_u2("A") == 1);
  CHECK(send_to_u2("B") == 1);
  if (strcmp(fault_now, "sh/net/drop") == 0) {
    CHECK(recv_u2(w, buf, sizeof(buf), 10 * MS) == -EAGAIN);
  } else if (strcmp(fault_now, "sh/net/dup") == 0) {
    for (int i = 0; i < 4; i++) CHECK(recv_u2(w, buf + i, 1, MS) == 1);
    CHECK(memcmp(buf, "AABB", 4) == 0);
  } else { /* reorder: A waits for B; C waits alone, then goes */
    CHECK(recv_u2(w, buf, 1, MS) == 1 && recv_u2(w, buf + 1, 1, MS) == 1);
    CHECK(memcmp(buf, "BA", 2) == 0);
    CHECK(send_to_u2("C") == 1);
    CHECK(recv_u2(w, buf, 1, 10 * MS) == 1 && buf[0] == 'C');
  }
  close_all();
}

static void test_faults(void **state) {
  (void)state;
  static const char *const tcp[] = {"sh/net/reset", "sh/net/delay",   "sh/net/partition",
                                    "sh/net/write", "sh/net/read",    "sh/net/connect",
                                    "sh/net/accept"};
  static const char *const udp[] = {"sh/net/drop", "sh/net/dup", "sh/net/reorder"};
  char spec[64];
  fill(sizeof(big), 6);
  for (size_t i = 0; i < sizeof(tcp) / sizeof(tcp[0]) + sizeof(udp) / sizeof(udp[0]); i++) {
    bool is_tcp = i < sizeof(tcp) / sizeof(tcp[0]);
    fault_now = is_tcp ? tcp[i] : udp[i - sizeof(tcp) / sizeof(tcp[0])];
    snprintf(spec, sizeof(spec), "%s:1", fault_now);
    configure(6, spec, NULL);
    run(1, is_tcp ? fault_tcp_body : fault_udp_body, NULL);
    sh_sim_report r;
    sh_sim_report_get(&r);
    if (r.faults == 0) fail_msg("%s never fired", fault_now);
  }
}

/* Every point at once, at random: the runs end, whatever they meet. */
static void test_chaos(void **state) {
  (void)state;
  fill(ECHO_BYTES, 11);
  lenient = true;
  uint64_t fired = 0, failed = 0;
  for (uint64_t seed = 1; seed <= 40; seed++) {
    configure(seed, "sh/net/*:0.02", NULL);
    run(2, echo_server, echo_client);
    sh_sim_report r;
    sh_sim_report_get(&r);
    fired += r.faults;
    failed += failed_line != 0;
  }
  lenient = false;
  assert_true(fired > 0 && failed > 0 && failed < 40);
}

/* ---- determinism, close, trace ----------------------------------------------------------- */

/* Under every strategy: the same seed twice, then another. */
static void test_determinism(void **state) {
  (void)state;
  static const sh_sim_strategy all[] = {SH_SIM_RANDOM, SH_SIM_PCT, SH_SIM_NONE};
  static const uint64_t seeds[3] = {7, 7, 8};
  fill(ECHO_BYTES, 7);
  for (size_t s = 0; s < sizeof(all) / sizeof(all[0]); s++) {
    uint64_t line[3], hash[3];
    strategy = all[s];
    for (int i = 0; i < 3; i++) {
      configure(seeds[i], NULL, NULL);
      run(2, echo_server, echo_client);
      sh_sim_report r;
      sh_sim_report_get(&r);
      line[i] = timeline;
      hash[i] = r.hash;
    }
    assert_true(line[0] == line[1] && hash[0] == hash[1]);
    assert_true(line[0] != line[2] && hash[0] != hash[2]);
  }
  strategy = SH_SIM_RANDOM;
}

static void close_body(uint32_t w) {
  connect_pair(w);
  A.reports = 0;
  CHECK(write_str(&C, "pending") == 7);
  sh_plat_park(P, w, sh_plat_now_ns() + SEC); /* woken by the arrival */
  CHECK(sh_plat_now_ns() < MS);
  uint64_t t = sh_plat_now_ns();
  sh_plat_park(P, w, t + SEC); /* readiness not polled yet: back at once */
  CHECK(sh_plat_now_ns() < t + MS);
  sh_net_close(A.s);
  CHECK(sh_net_poll(P, w, 64) == 0 || A.reports == 0);
  CHECK(A.reports == 0);
  CHECK(write_str(&C, "lost") == 4); /* arrives at a closed socket */
  nap(w, MS);
  sh_net_poll(P, w, 64);
  CHECK(A.reports == 0);
  CHECK(write_str(&C, "z") == -EPIPE);
  close_all();
}

static void test_close(void **state) {
  (void)state;
  run1(9, close_body);
}

static void test_trace(void **state) {
  (void)state;
  char path[] = "/tmp/test_sim_net_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  configure(10, NULL, path);
  fill(ECHO_BYTES, 10);
  run(2, echo_server, echo_client);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  static char text[1 << 22];
  size_t n = fread(text, 1, sizeof(text) - 1, f);
  fclose(f);
  unlink(path);
  text[n] = '\0';
  assert_non_null(strstr(text, "\"name\":\"net\",\"cat\":\"flow\""));
  assert_non_null(strstr(text, "net arrival"));
  assert_non_null(strstr(text, "\"ph\":\"f\",\"pid\":1,\"tid\":0"));
  assert_non_null(strstr(text, "\"ph\":\"s\",\"pid\":1,\"tid\":1"));
  assert_non_null(strstr(text, "\n],\"displayTimeUnit\":\"ns\"}\n"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_echo),        cmocka_unit_test(test_refused),
      cmocka_unit_test(test_eof),         cmocka_unit_test(test_window),
      cmocka_unit_test(test_udp),         cmocka_unit_test(test_faults),
      cmocka_unit_test(test_chaos),       cmocka_unit_test(test_determinism),
      cmocka_unit_test(test_close),
      cmocka_unit_test(test_trace),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
