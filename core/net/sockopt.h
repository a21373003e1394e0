/*
 * The sockets of channels, opened with their options: the runtime's
 * defaults (TCP_NODELAY on connections, SO_REUSEADDR on listeners) set
 * through the socket seam's one option call (core/netplat.h), before the
 * socket is bound or connected. The transports (tcp.c, tcpserver.c,
 * udp.c) open their sockets here.
 */
#ifndef SH_SOCKOPT_H
#define SH_SOCKOPT_H

#include "netplat.h"

/* What a socket is for: its defaults differ. */
typedef enum sh_sockuse {
  SH_USE_LISTENER = 1, /* a TCP server's listening socket */
  SH_USE_ACCEPTED,     /* a connection it accepted */
  SH_USE_CONNECT,      /* a connection the runtime makes */
  SH_USE_UDP,
} sh_sockuse;

/* Sets on s the options of a socket for `use`; the first error. */
int sh_sockopt_apply(sh_sock s, sh_sockuse use);
/* A TCP socket listening at `at`, or -errno (nothing left open). */
int sh_sockopt_listen(const sh_netaddr *at, int backlog, sh_sock *out);
/* A TCP socket whose connect to `to` started, or -errno (nothing left open). */
int sh_sockopt_connect(const sh_netaddr *to, sh_sock *out);
/* A UDP socket bound at `at`, or -errno (nothing left open). */
int sh_sockopt_udp(const sh_netaddr *at, sh_sock *out);

#endif
