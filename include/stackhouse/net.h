/*
 * stackhouse networking: channels, their handler pipelines, byte buffers,
 * and the IO actors that own them (TCP servers and clients, UDP).
 *
 * Model.
 *   - A channel is one socket (a TCP connection, a TCP listener's accepted
 *     connection, a UDP socket) owned by one IO actor (class kind
 *     SH_IO_ACTOR), which stays on its worker. Readiness of the socket
 *     arrives in that actor's house as an event; the worker loop knows
 *     nothing of channels. Everything a channel does runs on its actor, so
 *     none of the calls below is thread-safe: call them from the owning
 *     actor's handlers only.
 *   - Bytes read go through the channel's pipeline of handlers, head
 *     (network) to tail (actor): codecs next to the head turn bytes into
 *     messages; what reaches the tail is either a response to one of the
 *     actor's channel futures (a message of kind SH_REPLY) or a request to
 *     the actor (any other kind), which the actor handles in a channel
 *     stack (its class's `channel` handler). Outbound messages go the other
 *     way, tail to head, and end as bytes in the channel's write buffer.
 *   - Four queues per channel keep the order: pending and inflight futures
 *     (requests the actor sent, awaiting responses), pending and inflight
 *     stacks (requests the network sent, being handled). Barrier
 *     predicates and inflight limits decide how many run at once; with
 *     head-of-line ordering the results of channel stacks are written in
 *     the order their requests arrived.
 *   - Closing a channel (either side, an error, the actor's stop) fails
 *     every pending and inflight future and stack of it with the reason,
 *     exactly once, and then tells the actor (its `channel_event` hook).
 *   - A channel pointer stays valid while the actor's hook has not yet
 *     returned from SH_CHANNEL_CLOSED, until the handler invocations
 *     running at the close return (a call of theirs may have closed it: a
 *     write that found the connection reset, sh_channel_close), while a
 *     stack of the actor holds a future of the channel (an ask, a send,
 *     the connect's) or runs one of its requests; calls on a closed
 *     channel fail with -EPIPE. So a stack that keeps a channel in its
 *     locals uses it safely as long as it waits on that channel's futures;
 *     one that waits on something else learns of a close from the hook.
 *
 * Memory: buffers are chains of fixed-size pages from the worker's pools;
 * in steady state reading and writing allocate nothing. A writer is pushed
 * back by the channel's watermarks (sh_channel_send), so a slow reader
 * never makes a channel buffer without bound.
 */
#ifndef STACKHOUSE_NET_H
#define STACKHOUSE_NET_H

#include <stackhouse/stackhouse.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Addresses                                                           */
/* ------------------------------------------------------------------ */

/* An IPv4 address and port, in host byte order. */
typedef struct sh_netaddr {
  uint32_t ip;
  uint16_t port;
} sh_netaddr;

/* Parses "a.b.c.d:port" (port 0..65535). -EINVAL when malformed. */
SH_API int sh_netaddr_parse(const char *s, sh_netaddr *out);
/* Writes "a.b.c.d:port" (at most 22 bytes with the NUL) into buf; -ENOSPC
 * when it does not fit. */
SH_API int sh_netaddr_format(const sh_netaddr *a, char *buf, size_t size);

/* ------------------------------------------------------------------ */
/* Socket options                                                      */
/* ------------------------------------------------------------------ */

/*
 * Options of a channel's socket: in sh_channel_opts.sockopts (set before
 * the socket is bound or connected, which is when the binding options and
 * the buffer sizes count), or on a live channel with sh_channel_setopt. A
 * flag takes 0 or 1; a size is in bytes, at least 1. [The runtime's
 * defaults.] On epoll they are the kernel's own; the simulator honours
 * the ones it models and records the others (docs/net.md).
 */
typedef enum sh_sockopt {
  /* Flag. TCP: bind a port that connections of a closed listener (or
   * closed ones, in TIME_WAIT) still hold, if those had it too; never a
   * port another socket listens on. UDP: sockets that all set it share a
   * port. [TCP listeners: 1, else 0] */
  SH_SO_REUSEADDR = 1,
  /* Flag. Sockets that all set it (listeners, UDP sockets) share a port:
   * connections (datagrams) are spread over them. [0] */
  SH_SO_REUSEPORT = 2,
  /* Flag, TCP only: probe an idle connection; it fails when the peer is
   * gone. [0] */
  SH_SO_KEEPALIVE = 3,
  /* Size of the send buffer. [the system's] */
  SH_SO_SNDBUF = 4,
  /* Size of the receive buffer: what the peer may send before it must
   * wait for reads. [the system's] */
  SH_SO_RCVBUF = 5,
  /* Flag, TCP only: small writes go at once (no Nagle delay).
   * [connections: 1] */
  SH_TCP_NODELAY = 6,
} sh_sockopt;

/* One option and its value. */
typedef struct sh_sockopt_value {
  sh_sockopt opt; /* 0: an unused entry */
  int value;
} sh_sockopt_value;

#define SH_SOCKOPTS_MAX 8

/* ------------------------------------------------------------------ */
/* Byte buffers                                                        */
/* ------------------------------------------------------------------ */

/* Bytes of data one page holds. */
#define SH_PAGE_DATA 4064u

typedef struct sh_page sh_page;

/*
 * A byte queue: a chain of pages. Zero-initialised (or SH_BUF_INIT) it is
 * empty; sh_buf_clear gives its pages back. Its fields are the runtime's.
 */
typedef struct sh_buf {
  sh_page *head, *tail;
  size_t len;
} sh_buf;
#define SH_BUF_INIT {0}

static inline size_t sh_buf_len(const sh_buf *b) { return b->len; }
/* Frees every page; the buffer is empty after. */
SH_API void sh_buf_clear(sh_buf *b);
/* Appends n bytes: all of them, or none and -ENOMEM. */
SH_API int sh_buf_append(sh_buf *b, const void *p, size_t n);
/* Copies up to n bytes starting at offset off into dst, leaving the buffer
 * as it was; how many. */
SH_API size_t sh_buf_peek(const sh_buf *b, size_t off, void *dst, size_t n);
/* Removes the first n bytes (at most the length). */
SH_API void sh_buf_consume(sh_buf *b, size_t n);
/* Moves the first n bytes (at most src's length) of src to the end of dst:
 * whole pages move without a copy. -ENOMEM (nothing moved) when a page
 * split needed memory. */
SH_API int sh_buf_move(sh_buf *dst, sh_buf *src, size_t n);
/* The contiguous bytes at offset off: *p points at them, the return says
 * how many (0 at or past the end). For parsers that walk a buffer. */
SH_API size_t sh_buf_span(const sh_buf *b, size_t off, const uint8_t **p);
/* Offset of the first occurrence of `byte` at or after off, or -1. */
SH_API int64_t sh_buf_find(const sh_buf *b, size_t off, uint8_t byte);

/* Bytes as a message: what a pipeline without a codec carries. Kind
 * SH_NOTICE inbound (a request to the actor); its drop frees the pages. */
typedef struct sh_bytes {
  sh_msg hdr;
  sh_buf buf;
} sh_bytes;
SH_MSG_DECLARE(sh_bytes);
/* A new sh_bytes holding a copy of n bytes; NULL when out of memory. */
SH_API sh_bytes *sh_bytes_new(const void *p, size_t n);

/* A datagram, in (from: the sender) and out (to: the destination). */
typedef struct sh_datagram {
  sh_msg hdr;
  sh_netaddr peer;
  sh_buf buf;
} sh_datagram;
SH_MSG_DECLARE(sh_datagram);
/* A new datagram to `to` holding a copy of n bytes; NULL when out of memory. */
SH_API sh_datagram *sh_datagram_new(const sh_netaddr *to, const void *p, size_t n);

/* ------------------------------------------------------------------ */
/* Pipelines                                                           */
/* ------------------------------------------------------------------ */

/* A handler's place in one channel's pipeline. */
typedef struct sh_pctx sh_pctx;

/*
 * A pipeline handler, shared by every channel that lists it; its
 * per-channel state (state_size bytes, zeroed) is sh_pctx_state. Every
 * callback is optional: a missing one passes the event on unchanged. A
 * callback returning a negative errno closes the channel with that error.
 */
typedef struct sh_handler {
  const char *name;
  size_t state_size;
  /* Bytes arrived: `in` holds every byte not yet decoded. Decode what is
   * complete (consume it from `in`) and fire each message toward the tail;
   * leave a partial frame in place for the next call. Only the first
   * handler (next to the head) decodes; without a decoder there, bytes
   * reach the first handler's inbound as sh_bytes messages. */
  int (*decode)(sh_pctx *c, sh_buf *in);
  /* A message travelling toward the tail. */
  int (*inbound)(sh_pctx *c, sh_msg *m);
  /* A message travelling toward the head: pass it on (sh_pctx_write),
   * or encode it into sh_pctx_out and free it. */
  int (*outbound)(sh_pctx *c, sh_msg *m);
  /* The channel closed (error 0: an orderly close); last call for it. */
  void (*closed)(sh_pctx *c, int error);
} sh_handler;

/* Passes m (taken) to the next handler toward the tail. */
SH_API int sh_pctx_fire(sh_pctx *c, sh_msg *m);
/* Passes m (taken) to the next handler toward the head; a message that
 * reaches the head must be sh_bytes (or sh_datagram on UDP). */
SH_API int sh_pctx_write(sh_pctx *c, sh_msg *m);
/* The channel's write buffer, for encoders. */
SH_API sh_buf *sh_pctx_out(sh_pctx *c);
SH_API void *sh_pctx_state(sh_pctx *c);
SH_API sh_channel *sh_pctx_channel(sh_pctx *c);

/* ------------------------------------------------------------------ */
/* Channels                                                            */
/* ------------------------------------------------------------------ */

#define SH_PIPELINE_MAX 8

/* A channel's configuration; zero fields take the defaults in brackets. */
typedef struct sh_channel_opts {
  /* Handlers, head (network side) first; at most SH_PIPELINE_MAX. */
  const sh_handler *handlers[SH_PIPELINE_MAX];
  uint32_t nhandlers;
  /* Futures: how many the network handles at once [1]; a future whose
   * request passes future_barrier waits until none is inflight, and none
   * starts while it is inflight [NULL: no request is a barrier]. */
  uint32_t max_future_inflight;
  bool (*future_barrier)(const sh_msg *request);
  /* Stacks: how many run at once [1]; a request for which stack_barrier
   * says true runs alone [NULL: every request is a barrier]. */
  uint32_t max_stack_inflight;
  bool (*stack_barrier)(const sh_msg *request);
  /* Write the results of stacks in the order their requests arrived
   * [false: as each completes]. */
  bool head_of_line;
  /* Match a response to its future by id (sh_msg_set_id on both) instead
   * of FIFO order [false]. */
  bool match_by_id;
  /* Requests waiting for a stack: past this many the channel stops
   * reading (the peer is pushed back by the transport) [64]. */
  uint32_t max_pending_stacks;
  /* Write buffer watermarks in bytes [64 KiB, 16 KiB] and its limit [4 MiB]. */
  uint32_t write_high, write_low, write_limit;
  /* Pages read per readiness event before other work runs [16]. */
  uint32_t read_pages;
  /* Connect timeout, by the timeout convention [SH_FOREVER]. */
  int64_t connect_timeout_ms;
  /* A channel stack that ended without a result (its sh_throw: `error`;
   * sh_return with NULL: 0) has what this returns written in its place,
   * in its turn, and the channel stays open; NULL from it: as without the
   * hook (nothing written; a throw closes the channel) [NULL]. For
   * protocols that answer every request, e.g. with an error status. */
  sh_msg *(*fallback_reply)(sh_channel *ch, int error);
  /* Socket options, set on the socket before it is bound or connected, over
   * the runtime's defaults (TCP_NODELAY on connections, SO_REUSEADDR on
   * listeners); entries whose opt is 0 are skipped [none]. sh_tcp_serve
   * sets every one on its listening socket (an unknown option or a bad
   * value fails the call) and every one but SO_REUSEADDR and SO_REUSEPORT
   * on each connection it accepts. */
  sh_sockopt_value sockopts[SH_SOCKOPTS_MAX];
} sh_channel_opts;

/* What the actor's channel_event hook hears. */
typedef enum sh_channel_event {
  SH_CHANNEL_OPEN = 1,     /* accepted, connected or bound: the channel is live */
  SH_CHANNEL_EOF = 2,      /* the peer closed its side: no more requests */
  SH_CHANNEL_WRITABLE = 3, /* the write buffer fell below its low watermark */
  SH_CHANNEL_CLOSED = 4,   /* closed; `error` says why (0: orderly); last event */
} sh_channel_event;

/* The user's word on a channel (set it in SH_CHANNEL_OPEN). */
SH_API void sh_channel_set_data(sh_channel *ch, void *data);
SH_API void *sh_channel_data(const sh_channel *ch);
/* The channel of a channel stack. */
SH_API sh_channel *sh_stack_channel(const sh_stack *st);
SH_API int sh_channel_peer(const sh_channel *ch, sh_netaddr *out);
SH_API int sh_channel_local(const sh_channel *ch, sh_netaddr *out);
/* Bytes in the write buffer, not yet taken by the network. */
SH_API size_t sh_channel_pending_bytes(const sh_channel *ch);

/* Sets option opt of the channel's socket to value: 0, or -EINVAL (no
 * channel, an unknown option, a bad value), -ENOPROTOOPT (a TCP option on
 * a UDP channel), -EPIPE (the channel is closed), the transport's error.
 * The binding options (SO_REUSEADDR, SO_REUSEPORT) count at a bind: give
 * them in sh_channel_opts. */
SH_API int sh_channel_setopt(sh_channel *ch, sh_sockopt opt, int value);
/* Reads option opt: the value the transport uses (a flag is 0 or 1; on
 * Linux a buffer is twice the size set, the kernel's bookkeeping
 * included, within the system's limits). Errors as sh_channel_setopt. */
SH_API int sh_channel_getopt(const sh_channel *ch, sh_sockopt opt, int *value);

/* Writes m (taken) through the pipeline toward the network. -EPIPE when the
 * channel is closed or shut down for writing, -ENOBUFS when its write
 * buffer is past its limit; m is freed on an error. */
SH_API int sh_channel_write(sh_channel *ch, sh_msg *m);

/* From a stack: writes m (taken) and returns a future that completes with
 * 0 once the write buffer is below its high watermark (at once when it
 * is), or fails with -EPIPE / -ENOBUFS / the channel's close error. NULL
 * only for -EINVAL or -ENOMEM (m freed). */
SH_API sh_future *sh_channel_send(sh_stack *st, sh_channel *ch, sh_msg *m);

/* From a stack: sends request m (taken) to the network and returns a
 * future that completes with the response (a message of kind SH_REPLY
 * reaching the tail), in FIFO order or by id (opts.match_by_id). Fails
 * with the channel's close error, or -EPIPE once the peer's end of stream
 * was read (no response can come after it). NULL only for -EINVAL or
 * -ENOMEM. */
SH_API sh_future *sh_channel_ask(sh_stack *st, sh_channel *ch, sh_msg *m);

/* Sets / reads the id that matches a response to its request. */
SH_API void sh_msg_set_id(sh_msg *m, uint64_t id);
SH_API uint64_t sh_msg_id(const sh_msg *m);

/* Ends the write side once every byte buffered is written (TCP). */
SH_API int sh_channel_shutdown(sh_channel *ch);
/* Closes now: buffered bytes are dropped, everything pending fails with
 * -ECONNABORTED, the actor hears SH_CHANNEL_CLOSED. Idempotent. */
SH_API void sh_channel_close(sh_channel *ch);
/* Closes once every byte buffered is written. */
SH_API void sh_channel_close_after_flush(sh_channel *ch);

/* ------------------------------------------------------------------ */
/* TCP and UDP actors                                                  */
/* ------------------------------------------------------------------ */

/*
 * A TCP server: an acceptor actor listens at `at` and hands each accepted
 * connection to one of `instances` actors of class `cls` (an IO actor
 * class with a `channel` handler; SH_SPAWN_PER_WORKER: one per worker) in
 * turn; each connection becomes a channel of that actor with options
 * `opts` (NULL: defaults). *out (optional) receives the server's handle.
 * Past the descriptor limit the acceptor keeps serving the connections it
 * has, counts the refusal and tries again later.
 */
typedef struct sh_tcp_server sh_tcp_server;
SH_API int sh_tcp_serve(sh_system *sys, const sh_netaddr *at, const sh_actor_class *cls, void *arg,
                        uint32_t instances, const sh_channel_opts *opts, sh_tcp_server **out);
/* The address the server listens on (port 0 at serve: the chosen one). */
SH_API int sh_tcp_server_addr(const sh_tcp_server *s, sh_netaddr *out);
/* The address of its connection actors (to send them messages). */
SH_API const sh_addr *sh_tcp_server_workers(const sh_tcp_server *s);

typedef struct sh_tcp_stats {
  uint64_t accepted;   /* connections accepted */
  uint64_t refused;    /* accepts that failed for want of descriptors or memory */
  uint64_t open;       /* channels open now, over the server's actors */
} sh_tcp_stats;
SH_API int sh_tcp_server_stats(const sh_tcp_server *s, sh_tcp_stats *out);

/* The message a connect's future completes with. */
typedef struct sh_channel_msg {
  sh_msg hdr;
  sh_channel *ch;
} sh_channel_msg;
SH_MSG_DECLARE(sh_channel_msg);

/* From a stack of an IO actor: connects to `to`; the future completes with
 * an sh_channel_msg (the new channel, already open), or fails with
 * -ECONNREFUSED, -ETIMEDOUT (opts.connect_timeout_ms), -ENETUNREACH, an
 * option's error (opts.sockopts: -EINVAL, ...), ... NULL only for -EINVAL
 * or -ENOMEM. */
SH_API sh_future *sh_tcp_connect(sh_stack *st, const sh_netaddr *to, const sh_channel_opts *opts);

/* From an IO actor: a UDP channel bound to `at`; each datagram arrives as
 * an sh_datagram request; write sh_datagram messages to send. */
SH_API int sh_udp_open(sh_actor *self, const sh_netaddr *at, const sh_channel_opts *opts,
                       sh_channel **out);

#ifdef __cplusplus
}
#endif
#endif
