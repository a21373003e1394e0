/*
 * Nodes on the simulator's fake network (backend-sim/netnode.c), through
 * the socket seam (core/netplat.h): a node's actor polls its sockets from
 * a 1 ms timer, the simulation's own outside thread polls its own between
 * idles. Checked:
 *
 *   - a node's socket binds its node's address (0.0.0.0 means it; another
 *     node's is -EADDRNOTAVAIL), and a connection from the simulation's
 *     own system to a node comes from 127.0.0.1;
 *   - a crash is silent: the peer of a crashed node's connection reads
 *     neither an end of stream nor a reset, its writes are taken and lost;
 *     once the node is up again the next segment it sends is answered
 *     with a reset; a connect to a node that is down is never answered;
 *   - a one-way cut holds one direction only (the other flows), and its
 *     heal hands over what it held, in order;
 *   - a datagram across a cut is lost.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <cmocka.h>

#include <stackhouse/cluster.h>
#include <stackhouse/sim.h>
#include <stackhouse/stackhouse.h>

#include "netplat.h"

#define MS UINT64_C(1000000)
#define IP SH_IPV4

#define PORT 7000

/* The node's side, by node (1 or 2). */
static struct {
  sh_sock l, c; /* listener, accepted connection (-1: none) */
  sh_sock u;    /* a UDP socket at PORT + 1 */
  int datagrams;
  char got[64];
  size_t ngot;
  int bind_other; /* binding the other node's address gave */
  sh_netaddr peer; /* the accepted connection's peer */
  bool beat;       /* write "h" every tick */
  int accepted;
} n[3];

static void poll_node(int i) {
  char d[8];
  while (sh_net_recvfrom(n[i].u, d, sizeof(d), NULL) > 0) n[i].datagrams++;
  if (n[i].c < 0) {
    sh_netaddr peer;
    sh_sock c;
    if (sh_net_accept(n[i].l, &c, &peer) == 0) {
      n[i].c = c;
      n[i].peer = peer;
      n[i].accepted++;
    }
    return;
  }
  char buf[16];
  int64_t r = sh_net_read(n[i].c, buf, sizeof(buf));
  for (int64_t k = 0; k < r && n[i].ngot < sizeof(n[i].got); k++) n[i].got[n[i].ngot++] = buf[k];
  if (r > 0) {
    struct iovec v = {buf, (size_t)r};
    (void)sh_net_writev(n[i].c, &v, 1); /* the echo */
  }
  if (n[i].beat) {
    struct iovec v = {"h", 1};
    (void)sh_net_writev(n[i].c, &v, 1);
  }
}

typedef struct node_actor {
  sh_actor base;
  int i;
} node_actor;

static sh_yield node_notice(sh_actor *self, sh_stack *st) {
  const sh_msg *m = sh_stack_msg(st);
  if (!sh_msg_is(m, &sh_args_type)) return sh_return(st, NULL);
  node_actor *a = (node_actor *)self;
  a->i = atoi(((const sh_args *)m)->argv[1]);
  int i = a->i;
  n[i].c = -1;
  assert_int_equal(sh_net_socket(SH_NET_TCP, &n[i].l), 0);
  sh_sock o;
  assert_int_equal(sh_net_socket(SH_NET_TCP, &o), 0);
  n[i].bind_other = sh_net_bind(o, &(sh_netaddr){IP(10, 0, 0, 3 - i), PORT});
  sh_net_close(o);
  assert_int_equal(sh_net_bind(n[i].l, &(sh_netaddr){0, PORT}), 0);
  assert_int_equal(sh_net_listen(n[i].l, 16), 0);
  assert_int_equal(sh_net_socket(SH_NET_UDP, &n[i].u), 0);
  assert_int_equal(sh_net_bind(n[i].u, &(sh_netaddr){0, PORT + 1}), 0);
  (void)sh_timer_start(self, 1, 1, NULL, NULL);
  return sh_return(st, NULL);
}

static void node_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)id;
  (void)arg;
  poll_node(((node_actor *)self)->i);
}

static void node_stop(sh_actor *self) {
  int i = ((node_actor *)self)->i;
  if (n[i].c >= 0) sh_net_close(n[i].c);
  sh_net_close(n[i].l);
  sh_net_close(n[i].u);
}

static const sh_actor_class node_class = {.name = "netnode", .size = sizeof(node_actor),
                                          .notice = node_notice, .timeout = node_timeout,
                                          .stop = node_stop};

static char a0[] = "netnode", a1[] = "1", a2[] = "2";
static char *argv1[] = {a0, a1, NULL}, *argv2[] = {a0, a2, NULL};

static void idle(uint64_t ms) { assert_int_equal(sh_sim_idle(ms * MS), 0); }

/* Reads what main's connection has now (-EAGAIN: nothing), into buf. */
static int64_t main_read(sh_sock c, char *buf, size_t cap) { return sh_net_read(c, buf, cap); }

static void main_write(sh_sock c, const char *what) {
  struct iovec v = {(void *)what, strlen(what)};
  assert_int_equal(sh_net_writev(c, &v, 1), (int64_t)strlen(what));
}

static sh_sock main_connect(void) {
  sh_sock c;
  assert_int_equal(sh_net_socket(SH_NET_TCP, &c), 0);
  assert_int_equal(sh_net_connect(c, &(sh_netaddr){IP(10, 0, 0, 1), PORT}), 0);
  idle(5);
  assert_int_equal(sh_net_error(c), 0);
  return c;
}

static sh_system *up(void) {
  memset(n, 0, sizeof(n));
  sh_sim_options o;
  sh_sim_options_default(&o);
  o.seed = 3;
  sh_sim_configure(&o);
  sh_system *sys = NULL;
  assert_int_equal(sh_system_new(NULL, &sys), 0);
  assert_int_equal(sh_system_start(sys), 0);
  sh_node_spec a = {.name = "n1", .ip = IP(10, 0, 0, 1), .entry = &node_class, .argc = 2,
                    .argv = argv1};
  sh_node_spec b = {.name = "n2", .ip = IP(10, 0, 0, 2), .entry = &node_class, .argc = 2,
                    .argv = argv2};
  assert_int_equal(sh_node_add(&a), 0);
  assert_int_equal(sh_node_add(&b), 0);
  idle(2);
  return sys;
}

static void down(sh_system *sys) {
  assert_int_equal(sh_node_stop("n1"), 0);
  (void)sh_node_stop("n2");
  sh_system_exit(sys, 0);
  assert_int_equal(sh_system_wait(sys), 0);
  sh_system_shutdown(sys);
  sh_system_free(sys);
}

static void test_addresses(void **state) {
  (void)state;
  sh_system *sys = up();
  assert_int_equal(n[1].bind_other, -EADDRNOTAVAIL);
  sh_sock c = main_connect();
  sh_netaddr local;
  assert_int_equal(sh_net_local(c, &local), 0);
  assert_int_equal(local.ip, IP(127, 0, 0, 1));
  idle(3);
  assert_int_equal(n[1].accepted, 1);
  assert_int_equal(n[1].peer.ip, IP(127, 0, 0, 1));
  sh_net_close(c);
  down(sys);
}

static void test_crash_is_silent(void **state) {
  (void)state;
  sh_system *sys = up();
  sh_sock c = main_connect();
  char buf[64];
  main_write(c, "a");
  idle(5);
  assert_int_equal(main_read(c, buf, sizeof(buf)), 1); /* the echo */
  int rc = sh_node_crash("n1");
  if (rc == -ENOTSUP) { /* not linked to free a node's memory */
    sh_net_close(c);
    down(sys);
    skip();
  }
  assert_int_equal(rc, 0);
  main_write(c, "b"); /* taken: nothing says the peer is gone */
  idle(50);
  assert_int_equal(main_read(c, buf, sizeof(buf)), -EAGAIN); /* no FIN, no RST */
  assert_int_equal(sh_node_restart("n1", 10, 0), 0);
  idle(20);
  main_write(c, "c");
  idle(5);
  assert_int_equal(main_read(c, buf, sizeof(buf)), -ECONNRESET); /* the reboot answers */
  sh_net_close(c);
  /* A connect to a node that is down is never answered. */
  assert_int_equal(sh_node_crash("n2"), 0);
  sh_sock d;
  assert_int_equal(sh_net_socket(SH_NET_TCP, &d), 0);
  assert_int_equal(sh_net_connect(d, &(sh_netaddr){IP(10, 0, 0, 2), PORT}), 0);
  idle(100);
  assert_int_equal(sh_net_writev(d, &(struct iovec){"x", 1}, 1), -EAGAIN); /* still connecting */
  sh_net_close(d);
  /* The rebooted n1 serves again. */
  c = main_connect();
  main_write(c, "e");
  idle(5);
  assert_int_equal(main_read(c, buf, sizeof(buf)), 1);
  sh_net_close(c);
  down(sys);
}

static void test_one_way_cut(void **state) {
  (void)state;
  sh_system *sys = up();
  sh_sock c = main_connect();
  char buf[64];
  idle(3);
  n[1].beat = true;
  assert_int_equal(sh_node_cut("main", "n1"), 0);
  main_write(c, "d");
  idle(20);
  assert_int_equal(n[1].ngot, 0);             /* held */
  assert_true(main_read(c, buf, sizeof(buf)) > 0); /* heartbeats flow the other way */
  main_write(c, "f");
  assert_int_equal(sh_node_heal("main", "n1"), 0);
  idle(5);
  assert_true(n[1].ngot >= 2);
  assert_int_equal(memcmp(n[1].got, "df", 2), 0); /* in order */
  /* The other way round. */
  assert_int_equal(sh_node_cut("n1", "main"), 0);
  idle(5);
  while (main_read(c, buf, sizeof(buf)) > 0) {
  }
  idle(20);
  assert_int_equal(main_read(c, buf, sizeof(buf)), -EAGAIN); /* beats held */
  main_write(c, "g");
  idle(5);
  assert_int_equal(n[1].got[n[1].ngot - 1], 'g'); /* main -> n1 flows */
  assert_int_equal(sh_node_heal("n1", "main"), 0);
  idle(5);
  assert_true(main_read(c, buf, sizeof(buf)) > 0); /* what it held */
  n[1].beat = false;
  sh_net_close(c);
  down(sys);
}

static void test_udp_across_cut(void **state) {
  (void)state;
  sh_system *sys = up();
  sh_sock u;
  assert_int_equal(sh_net_socket(SH_NET_UDP, &u), 0);
  assert_int_equal(sh_net_bind(u, &(sh_netaddr){0, 0}), 0);
  sh_netaddr to = {IP(10, 0, 0, 1), PORT + 1};
  assert_int_equal(sh_net_sendto(u, "x", 1, &to), 1);
  idle(5);
  assert_int_equal(n[1].datagrams, 1);
  assert_int_equal(sh_node_cut("main", "n1"), 0);
  assert_int_equal(sh_net_sendto(u, "y", 1, &to), 1);
  idle(5);
  assert_int_equal(sh_node_heal("main", "n1"), 0);
  idle(5);
  assert_int_equal(n[1].datagrams, 1); /* lost, not held */
  assert_int_equal(sh_net_sendto(u, "z", 1, &to), 1);
  idle(5);
  assert_int_equal(n[1].datagrams, 2);
  sh_net_close(u);
  down(sys);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_addresses),
      cmocka_unit_test(test_crash_is_silent),
      cmocka_unit_test(test_one_way_cut),
      cmocka_unit_test(test_udp_across_cut),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
