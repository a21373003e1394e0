/*
 * Tests of the simulator's fake network (backend-sim/net.c, nettcp.c,
 * netudp.c) through the socket seam (core/netplat.h), on a simulated
 * platform driven directly: each worker runs a body that does its IO and
 * waits for its readiness; the virtual clock jumps to the arrivals.
 *   - connect, accept and echo across two workers; refused connects, and
 *     connects to an address with no host, which never end; the
 *     end of stream after shutdown and close; the window (a partial write,
 *     -EAGAIN, SH_IO_OUT once the reader made room); UDP datagrams;
 *   - the same seed gives the same byte timeline and trace hash under
 *     every strategy, another seed another timeline; nothing is reported
 *     after a close; the trace file draws the arrivals.
 * The fault points are test_sim_netfault's; the harness is simnet_harness.h.
 */

#include "simnet_harness.h"

static void run1(uint64_t seed, body_fn b) {
  configure(seed, NULL, NULL);
  run(1, b, NULL);
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
  CHECK(tcp_to(&closed, &C.s) == 0);
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
  CHECK(tcp_to(&nobody, &C.s) == 0);
  CHECK(sh_net_watch(P, w, C.s, &C) == 0);
  nap(w, 10 * SEC);
  sh_plat_wait(P, w, SH_PLAT_POLL, 64);
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
  sh_plat_wait(P, w, SH_PLAT_POLL, 64);
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
  /* Woken by the arrival, and reported by the same call. */
  CHECK(sh_plat_wait(P, w, sh_plat_now_ns() + SEC, 64) >= 1 && A.reports == 1);
  CHECK(sh_plat_now_ns() < MS);
  A.reports = 0;
  CHECK(write_str(&C, "more") == 4);
  nap(w, MS); /* arrived (in up to 3 segments), and reported */
  CHECK(A.reports >= 1);
  A.reports = 0;
  CHECK(write_str(&C, "unread") == 6);
  uint64_t t = sh_plat_now_ns();
  /* Steps move the clock and deliver: arrived, listed, not yet reported. */
  while (sh_plat_now_ns() < t + MS) sh_plat_relax();
  sh_net_close(A.s);
  CHECK(sh_plat_wait(P, w, SH_PLAT_POLL, 64) == 0 || A.reports == 0);
  CHECK(A.reports == 0);
  CHECK(write_str(&C, "lost") == 4); /* arrives at a closed socket */
  nap(w, MS);
  sh_plat_wait(P, w, SH_PLAT_POLL, 64);
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
      cmocka_unit_test(test_udp),         cmocka_unit_test(test_determinism),
      cmocka_unit_test(test_close),       cmocka_unit_test(test_trace),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
