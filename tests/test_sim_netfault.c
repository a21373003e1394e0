/*
 * Tests of the fake network's fault points (backend-sim/net.c, "Faults"),
 * each enabled alone through the simulator's faults spec: each does what
 * net.c says; and runs with every point at once, at random, end cleanly.
 */

#include "simnet_harness.h"

/* ---- faults ------------------------------------------------------------------------------ */

static const char *fault_now; /* the point the body checks */

static void fault_tcp_body(uint32_t w) {
  unsigned char b[1000];
  uint64_t t0 = sh_plat_now_ns();
  if (strcmp(fault_now, "sh/net/connect") == 0 || strcmp(fault_now, "sh/net/accept") == 0) {
    CHECK(tcp_to(&laddr, &C.s) == 0);
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
    sh_netaddr u1;
    CHECK(sh_net_local(U1.s, &u1) == 0);
    /* Each copy is the original's, sender included. */
    for (int i = 0; i < 4; i++)
      CHECK(recv_u2(w, buf + i, 1, MS) == 1 && u2_from.ip == u1.ip && u2_from.port == u1.port);
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_faults),
      cmocka_unit_test(test_chaos),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
