/*
 * The socket seam: the network half of the platform (core/plat.h is the
 * rest), as small as an event loop's poller API. backend-epoll/net.c
 * implements it with non-blocking sockets on each worker's epoll set;
 * backend-sim/net.c with a deterministic fake network of simulated
 * addresses. The core never calls a socket function itself.
 *
 * Sockets. A sh_sock is a non-negative handle (a descriptor on epoll, a
 * fake socket's number in the simulator), made by sh_net_socket and given
 * its options before it is bound or connected, as with BSD sockets. Every
 * call is non-blocking and returns a negative errno on failure; -EAGAIN
 * means "not now: wait for the readiness event". Addresses are IPv4, in
 * host byte order.
 *
 * Readiness is edge-triggered: once a socket is watched by a worker, that
 * worker's readiness function (sh_net_set_ready) is called with the
 * socket's token when its state changes: bytes (or a connection, or a
 * datagram) arrived, room to write came back, a connect finished, the peer
 * closed or reset. Between two reports the core must itself remember that
 * more may remain (it stopped reading before -EAGAIN). Reports reach the
 * readiness function only on the watching worker, and only from inside
 * sh_plat_wait (core/plat.h), the worker's one call that both sleeps and
 * polls; never after sh_net_close of the socket returned. A sleeping
 * worker is woken by readiness of its sockets, and the same call reports
 * it before it returns: nothing is kept for later.
 */
#ifndef SH_NETPLAT_H
#define SH_NETPLAT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h> /* struct iovec: a layout, no system call */

#include <stackhouse/net.h>

#include "plat.h"

typedef int32_t sh_sock;

/* The largest datagram sh_net_sendto takes and sh_net_recvfrom returns
 * (IPv4's limit for UDP). */
#define SH_NET_MAX_DATAGRAM 65507u

/* Readiness bits reported to the readiness function. */
enum {
  SH_IO_IN = 1u,  /* readable; a listener: a connection to accept */
  SH_IO_OUT = 2u, /* writable again; a connecting socket: the connect ended (sh_net_error) */
  SH_IO_HUP = 4u, /* the peer closed its side or reset: reads will say so */
  SH_IO_ERR = 8u, /* an error is pending (sh_net_error) */
};

/* Called on the watching worker with the token given to sh_net_watch. It
 * must not close sockets or call sh_plat_wait: it only notes the event. */
typedef void (*sh_net_ready_fn)(void *token, uint32_t events);

/* The core's readiness function, for every worker of p; once, before
 * sh_plat_start. */
void sh_net_set_ready(sh_plat *p, sh_net_ready_fn fn);

/* Worker `worker` watches s from now on (read, write and hang-up, edge
 * triggered), reporting `token`. Any thread. A socket is watched by one
 * worker at most, once. */
int sh_net_watch(sh_plat *p, uint32_t worker, sh_sock s, void *token);

/* A new socket of `type`, neither bound nor connected: its options are
 * set (sh_net_setopt) before it is bound, made to listen or connected.
 * No option is set by the backend itself. */
typedef enum sh_net_type {
  SH_NET_TCP = 1,
  SH_NET_UDP = 2,
} sh_net_type;
int sh_net_socket(sh_net_type type, sh_sock *out);

/* Options (sh_sockopt, <stackhouse/net.h>): 0, -EINVAL for an unknown
 * option or a bad value (a flag is 0 or 1, a size at least 1),
 * -ENOPROTOOPT for a TCP option (SH_SO_KEEPALIVE, SH_TCP_NODELAY) on a
 * UDP socket, or the transport's error. getopt says what the transport
 * uses: on Linux a buffer size is twice the one set (the kernel's
 * bookkeeping), within the system's limits; a flag is 0 or 1. */
int sh_net_setopt(sh_sock s, sh_sockopt opt, int value);
int sh_net_getopt(sh_sock s, sh_sockopt opt, int *value);

/* Binds s to `at` (port 0: a free port, sh_net_local says which).
 * -EADDRINUSE when another socket holds the address and the two may not
 * share it (SH_SO_REUSEADDR, SH_SO_REUSEPORT). */
int sh_net_bind(sh_sock s, const sh_netaddr *at);

/* TCP. A bound socket listens. */
int sh_net_listen(sh_sock s, int backlog);
/* A connection waiting on listener l, or -EAGAIN; -EMFILE / -ENFILE when
 * out of descriptors (the connection stays queued). Whether options of l
 * carry over to the new socket is the transport's business (Linux copies
 * most): the caller sets the connection's own. */
int sh_net_accept(sh_sock l, sh_sock *out, sh_netaddr *peer);
/* Starts the connect of an unconnected socket: 0 (connected, or in
 * progress: SH_IO_OUT reports its end, and sh_net_error its outcome), or
 * an error (the socket stays the caller's to close). */
int sh_net_connect(sh_sock s, const sh_netaddr *to);
/* The socket's pending error (0 when none), cleared by the call. */
int sh_net_error(sh_sock s);
/* The address s is bound to. */
int sh_net_local(sh_sock s, sh_netaddr *out);

/* Bytes read (> 0), 0 at the end of the stream, -EAGAIN, or an error
 * (-ECONNRESET, ...). A read that returns fewer bytes than asked for
 * leaves nothing to read now, or reports SH_IO_IN again (as a stream
 * socket on Linux does): the caller need not read again to see -EAGAIN. */
int64_t sh_net_read(sh_sock s, void *buf, size_t len);
/* Bytes written (maybe fewer than offered), -EAGAIN, or an error (-EPIPE,
 * -ECONNRESET, ...). Never raises SIGPIPE. */
int64_t sh_net_writev(sh_sock s, const struct iovec *iov, int iovcnt);
/* Closes the write side: the peer reads the end of the stream once every
 * byte written before arrived. */
int sh_net_shutdown(sh_sock s);
/* Closes s and forgets its watch: no report for s after this returns. */
void sh_net_close(sh_sock s);

/* UDP (a bound socket). len bytes, or -EAGAIN, or an error (-EMSGSIZE
 * past SH_NET_MAX_DATAGRAM). */
int64_t sh_net_sendto(sh_sock s, const void *buf, size_t len, const sh_netaddr *to);
/* One datagram (bytes, truncated to len), or -EAGAIN. */
int64_t sh_net_recvfrom(sh_sock s, void *buf, size_t len, sh_netaddr *from);

#endif
