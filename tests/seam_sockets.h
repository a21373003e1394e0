/*
 * Sockets of the socket seam (core/netplat.h) in one call each, as the
 * runtime opens them less the options it sets (core/net/sockopt.c): for
 * the seam's tests on both backends (test_net_epoll, simnet_harness.h).
 */
#ifndef TESTS_SEAM_SOCKETS_H
#define TESTS_SEAM_SOCKETS_H

#include "netplat.h"

/* A TCP socket whose connect to `to` started. */
static inline int tcp_to(const sh_netaddr *to, sh_sock *c) {
  int rc = sh_net_socket(SH_NET_TCP, c);
  return rc != 0 ? rc : sh_net_connect(*c, to);
}

/* A UDP socket bound at `at`. */
static inline int udp_at(const sh_netaddr *at, sh_sock *u) {
  int rc = sh_net_socket(SH_NET_UDP, u);
  return rc != 0 ? rc : sh_net_bind(*u, at);
}

/* A TCP socket listening at `at`. */
static inline int tcp_listen(const sh_netaddr *at, sh_sock *l) {
  int rc = sh_net_socket(SH_NET_TCP, l);
  if (rc == 0) rc = sh_net_bind(*l, at);
  return rc != 0 ? rc : sh_net_listen(*l, 16);
}

#endif
