/*
 * The sockets of channels, opened with their options: the user's
 * (sh_channel_opts.sockopts) over the runtime's defaults (TCP_NODELAY on
 * connections, SO_REUSEADDR on listeners), set through the socket seam's
 * one option call (core/netplat.h) before the socket is bound or
 * connected. The transports (tcp.c, tcpserver.c, udp.c) open their
 * sockets here; sh_channel_setopt and sh_channel_getopt are here too.
 */
#ifndef SH_SOCKOPT_H
#define SH_SOCKOPT_H

#include <stackhouse/net.h>

#include "netplat.h"

/* What a socket is for: its defaults, and which of the user's options it
 * takes, differ. */
typedef enum sh_sockuse {
  SH_USE_LISTENER = 1, /* a TCP server's listening socket: every option */
  SH_USE_ACCEPTED,     /* a connection it accepted: all but the binding ones */
  SH_USE_CONNECT,      /* a connection the runtime makes: every option */
  SH_USE_UDP,          /* every option */
} sh_sockuse;

/* Sets on s the options of a socket for `use`: the defaults o (NULL: none)
 * does not set, then o's; the first error. */
int sh_sockopt_apply(sh_sock s, sh_sockuse use, const sh_channel_opts *o);
/* A TCP socket listening at `at`, or -errno (nothing left open, *out
 * untouched). */
int sh_sockopt_listen(const sh_netaddr *at, int backlog, const sh_channel_opts *o, sh_sock *out);
/* A TCP socket whose connect to `to` started, or -errno (as above). */
int sh_sockopt_connect(const sh_netaddr *to, const sh_channel_opts *o, sh_sock *out);
/* A UDP socket bound at `at`, or -errno (as above). */
int sh_sockopt_udp(const sh_netaddr *at, const sh_channel_opts *o, sh_sock *out);

#endif
