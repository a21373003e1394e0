/*
 * The HTTP server's internals shared by its modules: the server (config,
 * counters), its connection actors (one per worker by default: the Date
 * they format, the connections they watch for idleness), and the record
 * each connection keeps as its channel's data.
 *
 * server.c runs the actors (routing, the idle sweep, max_connections),
 * codec.c the pipeline handler (requests in, responses out), response.c
 * the response message.
 */
#ifndef SH_HTTP_SERVER_H
#define SH_HTTP_SERVER_H

#include <stdatomic.h>

#include <stackhouse/http.h>

/* Requests waiting for a stack on one connection before it stops reading. */
#define SH_HTTP_MAX_PENDING 64u
/* The most max_inflight may be: the codec's ring of outstanding requests
 * (codec.c) holds max_inflight + SH_HTTP_MAX_PENDING entries. */
#define SH_HTTP_MAX_INFLIGHT 256u
#define SH_HTTP_RING (SH_HTTP_MAX_INFLIGHT + SH_HTTP_MAX_PENDING)
/* The most stack locals a handler may have (sh_http_config.locals_size). */
#define SH_HTTP_MAX_LOCALS 65536u
/* The longest Server header value. */
#define SH_HTTP_MAX_NAME 128u
/* "Sun, 06 Nov 1994 08:49:37 GMT" */
#define SH_HTTP_DATE_LEN 29u

struct sh_http_server {
  sh_http_config cfg;
  sh_channel_opts opts;
  sh_tcp_server *tcp;
  /* Who holds the server: sh_http_serve while it runs, and each connection
   * actor from its init to its stop; the last to let go frees it. */
  atomic_uint refs;
  /* Open connections (stats), and those of them served, not refused:
   * max_connections bounds these, since a refused one may linger after
   * its 503 until its client closes or the idle timeout. */
  atomic_uint open, served;
  /* "Server: <name>\r\nDate: ", made once. */
  char server_line[SH_HTTP_MAX_NAME + 24];
  uint32_t server_line_len;
  /* Each connection actor's counters (sh_http_server_stats) and each
   * route's path length, in the server's allocation: the counters are
   * read until the server goes, after the actors that wrote them. */
  uint32_t max_actors;
  atomic_uint nactors;
  struct sh_http_counters *counters;
  uint32_t *plen;
};

/* A connection actor's counters: written by the actor only (a cache line
 * of their own: none shared between workers), read by any thread. */
#define SH_HTTP_LINE 64u
typedef struct sh_http_counters {
  _Alignas(SH_HTTP_LINE) atomic_uint_fast64_t connections;
  atomic_uint_fast64_t refused, requests, bad, timeouts;
} sh_http_counters;

typedef struct sh_http_conn sh_http_conn;

/* Content types longer than this are encoded anew for every response. */
#define SH_HTTP_PREFIX_CTYPE 256u

typedef struct sh_http_prefix {
  bool valid;
  uint16_t status;
  const char *ctype;
  uint32_t len;
  char b[64 + SH_HTTP_MAX_NAME + 24 + SH_HTTP_DATE_LEN + 32 + SH_HTTP_PREFIX_CTYPE];
} sh_http_prefix;

/* A connection actor. */
typedef struct sh_http_actor {
  sh_actor base;
  sh_http_server *srv;
  /* Connections armed for the idle timeout, oldest first. */
  sh_http_conn *armed_head, *armed_tail;
  /* Records of closed connections, for the next ones. */
  sh_http_conn *free;
  uint32_t nfree;
  sh_http_counters *n; /* in the server's memory */
  /* The head of the last response encoded, up to its Content-Length
   * value: handlers answer with the same status and Content-Type again
   * and again. Invalid when the Date changes. */
  sh_http_prefix pre;
  uint32_t nconns;  /* open connections: the timer runs while there are some */
  bool ticking;
  uint64_t timer;
  char date[SH_HTTP_DATE_LEN + 1];
} sh_http_actor;

/* A connection's record: its channel's data. */
struct sh_http_conn {
  sh_http_actor *actor;
  sh_channel *ch;
  sh_http_conn *prev, *next; /* armed list, or free list (next) */
  int64_t armed_at;          /* sh_clock_ms when armed; -1: not armed */
  size_t armed_pending;      /* its unwritten response bytes then */
  bool refused;              /* answered 503 for max_connections */
  bool eof;                  /* the peer's end of stream was read */
};

/* The codec: handlers[0] of every connection. */
extern const sh_handler sh_http_codec;

/* Decoding may go on: the write buffer drained, or the peer's input ended. */
void sh_http_codec_resume(sh_channel *ch);

/* The connection's request count went to 0 (arm) or up from 0 (disarm). */
void sh_http_conn_arm(sh_http_conn *c);
void sh_http_conn_disarm(sh_http_conn *c);

/* The response for a status the server answers itself (an empty body,
 * text/plain); close: the connection closes after it. NULL: no memory. */
sh_http_response *sh_http_response_status(uint16_t status, bool close);

/* The reason phrase of a status and its length ("" and 0: unknown). */
const char *sh_http_reason_n(uint16_t status, size_t *len);

/* One more, by the counter's only writer: no read-modify-write needed;
 * relaxed, as the counters order nothing. */
static inline void sh_http_count(atomic_uint_fast64_t *c) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

#endif
