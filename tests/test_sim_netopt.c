/*
 * Socket options in the simulator's fake network (backend-sim/netbind.c,
 * nettcp.c, netudp.c) through the socket seam (core/netplat.h), on a
 * simulated platform driven directly (simnet_harness.h):
 *   - options read back as set, with the defaults (a window each for the
 *     buffers, the flags off), and an accepted socket starts with its
 *     listener's;
 *   - SO_SNDBUF of the writer and SO_RCVBUF of the reader bound a
 *     stream's window, and a window that grows wakes a waiting writer;
 *     a stream through a small window is whole; a UDP socket's SO_RCVBUF
 *     loses what would pass it;
 *   - binding: no second socket on a listener's port but with
 *     SO_REUSEPORT on both (connections spread over them); SO_REUSEADDR
 *     binds a port that an accepted connection, or one in TIME_WAIT,
 *     holds, and nothing else does until TIME_WAIT is over.
 */

#include "simnet_harness.h"

static int opt(const tsock *t, sh_sockopt o) {
  int v = -1;
  return sh_net_getopt(t->s, o, &v) == 0 ? v : -1;
}

/* ---- options, buffers ------------------------------------------------------------------- */

static void buffers_body(uint32_t w) {
  CHECK(sh_net_setopt(L.s, SH_SO_RCVBUF, 2000) == 0); /* the accepted one's */
  connect_pair(w);
  CHECK(opt(&C, SH_SO_SNDBUF) == 65536 && opt(&C, SH_SO_RCVBUF) == 65536);
  CHECK(opt(&C, SH_TCP_NODELAY) == 0 && opt(&C, SH_SO_REUSEADDR) == 0);
  CHECK(opt(&A, SH_SO_RCVBUF) == 2000);
  CHECK(sh_net_setopt(C.s, SH_SO_KEEPALIVE, 1) == 0 && opt(&C, SH_SO_KEEPALIVE) == 1);
  CHECK(sh_net_setopt(C.s, SH_SO_SNDBUF, 0) == -EINVAL);
  CHECK(sh_net_setopt(C.s, (sh_sockopt)8, 1) == -EINVAL);
  struct iovec iov = {big, 100000};
  CHECK(sh_net_writev(C.s, &iov, 1) == 2000); /* the reader's buffer */
  CHECK(sh_net_writev(C.s, &iov, 1) == -EAGAIN);
  CHECK(read_n(w, &A, back, 2000) == 2000);
  CHECK(sh_net_setopt(C.s, SH_SO_SNDBUF, 700) == 0);
  CHECK(await(w, &C, SH_IO_OUT) != 0);
  CHECK(sh_net_writev(C.s, &iov, 1) == 700); /* now the writer's */
  CHECK(sh_net_writev(C.s, &iov, 1) == -EAGAIN);
  C.ev = 0;
  CHECK(sh_net_setopt(A.s, SH_SO_RCVBUF, 900) == 0); /* the smaller is still 700 */
  sh_plat_wait(P, w, SH_PLAT_POLL, 64);
  CHECK((C.ev & SH_IO_OUT) == 0);
  CHECK(sh_net_setopt(C.s, SH_SO_SNDBUF, 4000) == 0); /* 900 now: room for 200 */
  CHECK(await(w, &C, SH_IO_OUT) != 0);
  CHECK(sh_net_writev(C.s, &iov, 1) == 200);
  CHECK(read_n(w, &A, back, 900) == 900);
  close_all();
}

static void test_buffers(void **state) {
  (void)state;
  configure(21, NULL, NULL);
  fill(sizeof(big), 21);
  run(1, buffers_body, NULL);
}

/* A stream through a window of 1000 bytes (the server's SO_RCVBUF, which
 * its listener passes on) still echoes every byte in order. */
static void small_server(uint32_t w) {
  CHECK(sh_net_setopt(L.s, SH_SO_RCVBUF, 1000) == 0);
  echo_server(w);
}

static void late_client(uint32_t w) {
  nap(w, MS); /* the server set its option meanwhile: it ran while this slept */
  echo_client(w);
}

static void test_echo_small_window(void **state) {
  (void)state;
  configure(25, NULL, NULL);
  fill(ECHO_BYTES, 25);
  run(2, small_server, late_client);
}

#define D60 "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmn"

static void udp_rcvbuf_body(uint32_t w) {
  udp_pair(w);
  char buf[64];
  CHECK(sh_net_setopt(U2.s, SH_SO_RCVBUF, 100) == 0);
  CHECK(send_to_u2(D60) == 60);
  CHECK(send_to_u2(D60) == 60); /* 120 would pass 100: lost */
  nap(w, MS);
  CHECK(sh_net_recvfrom(U2.s, buf, sizeof(buf), NULL) == 60);
  CHECK(sh_net_recvfrom(U2.s, buf, sizeof(buf), NULL) == -EAGAIN);
  CHECK(send_to_u2(D60) == 60); /* room again */
  CHECK(recv_u2(w, buf, sizeof(buf), MS) == 60);
  close_all();
}

static void test_udp_rcvbuf(void **state) {
  (void)state;
  configure(22, NULL, NULL);
  run(1, udp_rcvbuf_body, NULL);
}

/* ---- binding ------------------------------------------------------------------------------ */

/* A TCP socket with option o (0: none) bound at a; the bind's result. */
static int bind_with(sh_sockopt o, const sh_netaddr *a, sh_sock *s) {
  CHECK(sh_net_socket(SH_NET_TCP, s) == 0);
  if (o != 0) CHECK(sh_net_setopt(*s, o, 1) == 0);
  return sh_net_bind(*s, a);
}

/* Two listeners of one port by SO_REUSEPORT; 16 connects reach both. */
static void reuseport_body(uint32_t w) {
  sh_sock s;
  CHECK(bind_with(SH_SO_REUSEADDR, &laddr, &s) == -EADDRINUSE); /* L listens there */
  sh_net_close(s);
  sh_netaddr at = {IP(10, 0, 0, 2), 7000};
  static tsock x[2];
  for (int i = 0; i < 2; i++) {
    x[i] = (tsock){.s = -1};
    CHECK(bind_with(SH_SO_REUSEPORT, &at, &x[i].s) == 0 && sh_net_listen(x[i].s, 16) == 0);
    CHECK(sh_net_watch(P, w, x[i].s, &x[i]) == 0);
  }
  CHECK(bind_with(0, &at, &s) == -EADDRINUSE);
  sh_net_close(s);
  sh_sock c[16];
  for (int i = 0; i < 16; i++) CHECK(tcp_to(&at, &c[i]) == 0);
  nap(w, MS);
  CHECK(x[0].reports > 0 && x[1].reports > 0);
  for (int i = 0; i < 16; i++) sh_net_close(c[i]);
  sh_net_close(x[0].s);
  sh_net_close(x[1].s);
  close_all();
}

static void test_reuseport(void **state) {
  (void)state;
  configure(23, NULL, NULL);
  run(1, reuseport_body, NULL);
}

/* A listener at `at` with SO_REUSEADDR, a connection accepted (into A),
 * the listener closed again. */
static void accepted_then_closed(uint32_t w, const sh_netaddr *at) {
  sh_sock l;
  CHECK(bind_with(SH_SO_REUSEADDR, at, &l) == 0 && sh_net_listen(l, 16) == 0);
  CHECK(tcp_to(at, &C.s) == 0);
  nap(w, MS);
  CHECK(sh_net_accept(l, &A.s, NULL) == 0);
  sh_net_close(l);
}

static void time_wait_body(uint32_t w) {
  sh_netaddr at = {IP(10, 0, 0, 3), 7000};
  sh_sock s;
  accepted_then_closed(w, &at);
  CHECK(write_str(&C, "x") == 1);
  CHECK(bind_with(0, &at, &s) == -EADDRINUSE); /* the accepted connection holds it */
  sh_net_close(s);
  CHECK(bind_with(SH_SO_REUSEADDR, &at, &s) == 0);
  sh_net_close(s);
  sh_net_close(A.s); /* closed first: TIME_WAIT */
  nap(w, MS);
  CHECK(sh_net_read(C.s, back, 10) == 0);
  sh_net_close(C.s);
  CHECK(bind_with(0, &at, &s) == -EADDRINUSE);
  sh_net_close(s);
  CHECK(bind_with(SH_SO_REUSEADDR, &at, &s) == 0);
  sh_net_close(s);
  nap(w, 61 * SEC);
  CHECK(bind_with(0, &at, &s) == 0); /* TIME_WAIT is over */
  sh_net_close(s);
  /* The peer closed first: no TIME_WAIT here. */
  A = C = (tsock){.s = -1};
  accepted_then_closed(w, &at);
  sh_net_close(C.s);
  nap(w, MS);
  sh_net_close(A.s);
  CHECK(bind_with(0, &at, &s) == 0);
  sh_net_close(s);
  close_all();
}

static void test_time_wait(void **state) {
  (void)state;
  configure(24, NULL, NULL);
  run(1, time_wait_body, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_buffers),
      cmocka_unit_test(test_echo_small_window),
      cmocka_unit_test(test_udp_rcvbuf),
      cmocka_unit_test(test_reuseport),
      cmocka_unit_test(test_time_wait),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
