/*
 * The HTTP server's internals shared by its modules: the server (config,
 * counters, limits), and what its modules call of each other.
 *
 * server.c runs the server's life and statistics, conn.c the connection
 * actors (conn.h), route.c the routing (route.h), codec.c the pipeline
 * handler (requests in, responses out), response.c the response message;
 * parser.c and head.c the request parser (parser.h).
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

/* Lets go of the server: its memory goes with the last holder. */
void sh_http_server_release(sh_http_server *s);

/* The codec: handlers[0] of every connection. */
extern const sh_handler sh_http_codec;

/* Decoding may go on: the write buffer drained, or the peer's input ended. */
void sh_http_codec_resume(sh_channel *ch);

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
