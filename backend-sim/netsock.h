/*
 * The fake network's insides, shared by net.c (sockets, arrivals,
 * readiness, the clock), netbind.c (addresses and socket options),
 * nettcp.c (streams) and netudp.c (datagrams). The model itself is
 * described at the top of net.c.
 */
#ifndef SH_SIM_NETSOCK_H
#define SH_SIM_NETSOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "netplat.h"

/* Bytes a direction may have in flight plus unread, unless SO_SNDBUF of
 * the writer or SO_RCVBUF of the reader is smaller: their default. */
#define SH_SIMNET_WINDOW (64u * 1024u)
/* A datagram's bytes, at most: IPv4's limit for UDP, unless the seam
 * says otherwise. */
#ifndef SH_NET_MAX_DATAGRAM
#define SH_NET_MAX_DATAGRAM 65507u
#endif
/* Datagrams a UDP socket keeps unread; more are lost, as in a full buffer. */
#define SH_SIMNET_UDP_QUEUE 1024u
/* No worker watches the socket. */
#define SH_SIMNET_NO_WORKER UINT32_MAX
/* Socket options are kept by their number (sh_sockopt, 1..6). */
#define SH_SIMNET_NOPTS 7

/* Bytes on their way or waiting to be read: a segment of a stream, or a
 * datagram (from, to). */
typedef struct sh_simnet_seg {
  struct sh_simnet_seg *next;
  sh_netaddr from, to;
  uint32_t len, off;
  unsigned char data[];
} sh_simnet_seg;

typedef enum sh_simnet_kind {
  SH_SIMNET_LISTENER = 1,
  SH_SIMNET_STREAM,
  SH_SIMNET_UDP,
} sh_simnet_kind;

typedef enum sh_simnet_state {
  SH_SIMNET_IDLE, /* a new stream socket: neither listening nor connected */
  SH_SIMNET_CONNECTING,
  SH_SIMNET_CONNECTED,
  SH_SIMNET_REFUSED,
} sh_simnet_state;

typedef struct sh_simnet_sock {
  sh_sock id;
  sh_simnet_kind kind;
  sh_simnet_state state;
  sh_netaddr local, peer;
  sh_sock peer_id;     /* a stream's other end, or -1 */
  int err;             /* pending error (positive errno), for sh_net_error */
  bool reset;          /* reads and writes say -ECONNRESET */
  bool rd_eof;         /* the peer's end of stream arrived (after its bytes) */
  bool wr_shut;        /* our write side is closed */
  bool peer_closed;    /* the peer closed: writes say -EPIPE */
  bool want_out;       /* a write was cut short: report SH_IO_OUT with room */
  bool bound;          /* holds its local address (netbind.c): a listener, a UDP
                        * socket, a connection bound or accepted */
  uint32_t inflight;   /* stream: bytes written, not yet read by the peer */
  uint64_t last_at;    /* the latest arrival sent from here: order is kept */
  sh_simnet_seg *rx, *rx_tail; /* arrived, unread */
  uint32_t rx_count;
  size_t rx_bytes;
  sh_sock *acceptq;    /* listener: connections not yet accepted */
  uint32_t nq, capq;
  sh_simnet_seg *held; /* UDP: a datagram held back to follow the next one */
  uint64_t held_ref;
  uint32_t watcher;    /* the watching worker's fiber, or SH_SIMNET_NO_WORKER */
  uint32_t node;       /* the node it belongs to (node.h) */
  void *token;
  uint32_t ready;      /* readiness not yet reported */
  bool listed;         /* in its watcher's ready list */
  int opts[SH_SIMNET_NOPTS]; /* its options by number (netbind.c) */
  uint32_t opts_set;   /* 1 << option: set by the program (or its listener) */
} sh_simnet_sock;

typedef enum sh_simnet_evkind {
  SH_SIMNET_EV_SEG = 1, /* stream bytes reach dst */
  SH_SIMNET_EV_FIN,     /* the end of src's stream reaches dst */
  SH_SIMNET_EV_CONNECT, /* src's connect reaches `to` */
  SH_SIMNET_EV_DGRAM,   /* a datagram reaches seg->to */
  SH_SIMNET_EV_RELEASE, /* src's held datagram goes now if still held (ref) */
} sh_simnet_evkind;

/* An arrival: the network changes a socket at time `at`. */
typedef struct sh_simnet_ev {
  uint64_t at, seq;
  sh_simnet_evkind kind;
  bool flag; /* FIN: the peer closed (not only shut down); CONNECT: refused */
  sh_sock src, dst;
  sh_netaddr to;
  uint64_t ref;
  sh_simnet_seg *seg; /* owned by the event until delivered */
  uint32_t from_node, to_node; /* its sender's node; its receiver's, once known (netnode.c) */
} sh_simnet_ev;

/* ---- net.c ---- */

/* Makes *a (of *cap elements of `size`) hold `need`; -ENOMEM. */
int sh_simnet_grow(void **a, uint32_t *cap, uint32_t need, size_t size);
/* The live socket numbered s (of `kind` if not 0), or NULL. */
sh_simnet_sock *sh_simnet_get(sh_sock s, sh_simnet_kind kind);
/* Sockets numbered so far (the next one's number). */
uint32_t sh_simnet_count(void);
/* A new socket, numbered next; -ENOMEM. */
int sh_simnet_sock_new(sh_simnet_kind kind, sh_simnet_sock **out);
/* Forgets k: its number, address, unread bytes and pending readiness. */
void sh_simnet_sock_free(sh_simnet_sock *k);
/* Uniform in [0, n), n > 0, from the network's stream; mixed into the hash. */
uint64_t sh_simnet_draw(uint64_t n);
/* When something sent now from k toward ip `to` arrives: one latency,
 * later for a delay fault or a partition, never before k's last arrival. */
uint64_t sh_simnet_arrival(sh_simnet_sock *k, uint32_t to);
/* The fault point sh/net/partition: the pair is cut for a while. */
void sh_simnet_maybe_partition(uint32_t a, uint32_t b);
/* Queues ev (a copy; the seq is set here); -ENOMEM (the caller keeps seg). */
int sh_simnet_send(sh_simnet_ev *ev);
/* A segment holding len bytes gathered from iov at byte `skip`; NULL. */
sh_simnet_seg *sh_simnet_seg_new(const struct iovec *iov, int iovcnt, size_t skip, size_t len);
/* Frees a chain of segments. */
void sh_simnet_seg_free(sh_simnet_seg *s);
/* Appends an arrived segment to k's unread ones. */
void sh_simnet_rx_push(sh_simnet_sock *k, sh_simnet_seg *s);
/* k's state changed: its watcher will be told (and woken if parked). */
void sh_simnet_notify(sh_simnet_sock *k, uint32_t events);
/* The readiness k has now, for a new watch. */
uint32_t sh_simnet_level(const sh_simnet_sock *k);

/* Hands ev to its socket now (an arrival due, or one a cut held). */
void sh_simnet_deliver_ev(sh_simnet_ev *ev, uint64_t now);

/* ---- netnode.c: nodes on the network ---- */

/* Whether a cut between nodes holds ev (true: taken, held or lost). */
bool sh_simnet_cut_holds(sh_simnet_ev *ev);
/* A segment or end of stream reached a socket that is gone: a crash's
 * socket whose node is up again answers with a reset. */
void sh_simnet_dead_end(const sh_simnet_ev *ev);
/* The address a connecting socket k starts from, toward ip `to`. */
uint32_t sh_simnet_source_ip(const sh_simnet_sock *k, uint32_t to);
/* The address k binds for `ip` (0.0.0.0 and loopback: its node's), or
 * -EADDRNOTAVAIL for another node's. */
int sh_simnet_bind_ip(const sh_simnet_sock *k, uint32_t ip, uint32_t *out);
/* The run is over: held arrivals are freed. */
void sh_simnet_node_end(void);

/* ---- nettcp.c ---- */

/* Both ends of k's connection are reset. */
void sh_simnet_tcp_reset(sh_simnet_sock *k);

/* ---- netbind.c ---- */

/* A new socket's options: the defaults (buffers of a window, flags off). */
void sh_simnet_opts_init(sh_simnet_sock *k);
/* Binds k to `at` (port 0: a free one); -EADDRINUSE when a socket holding
 * it may not share it with k (SO_REUSEADDR, SO_REUSEPORT). */
int sh_simnet_bind(sh_simnet_sock *k, const sh_netaddr *at);
/* k, a connection its listener accepted, holds the listener's address
 * `at` too (a later bind must share it); out of memory, it does not. */
void sh_simnet_hold(sh_simnet_sock *k, const sh_netaddr *at);
/* k (bound) gives its address back: it is closing. A TCP connection that
 * closes first keeps it in TIME_WAIT for a while. */
void sh_simnet_unbind(sh_simnet_sock *k);
/* The socket of `kind` bound to a (0.0.0.0 binds every address), or NULL;
 * among sockets sharing it by SO_REUSEPORT, the one `from` hashes to. */
sh_simnet_sock *sh_simnet_find(sh_simnet_kind kind, const sh_netaddr *a, const sh_netaddr *from);
/* Whether a host answers at ip: loopback, or an address some socket is
 * bound to (0.0.0.0: every address). */
bool sh_simnet_host(uint32_t ip);
/* A port for a connecting socket. */
uint16_t sh_simnet_port(void);
/* The run is over: the addresses are forgotten. */
void sh_simnet_bind_end(void);

/* ---- nettcp.c / netudp.c: an arrival reaches its socket; which one (for
 * the trace), or NULL when it was lost ---- */
sh_simnet_sock *sh_simnet_tcp_deliver(sh_simnet_ev *ev);
sh_simnet_sock *sh_simnet_udp_deliver(sh_simnet_ev *ev);
/* The readiness of a stream or listener (nettcp.c). */
uint32_t sh_simnet_tcp_level(const sh_simnet_sock *k);
/* A stream's buffers changed (SO_SNDBUF, SO_RCVBUF): a writer waiting for
 * room that the larger window gives is told (nettcp.c). */
void sh_simnet_tcp_window_changed(sh_simnet_sock *k);

#endif
