/*
 * The HTTP server's connection actors (one per worker by default) and the
 * record each connection keeps as its channel's data: what conn.c runs
 * (the actor's life, its connections' events, the Date they format and
 * the idle timeout, both on one periodic timer), and what the codec
 * (codec.c) and the router (route.c) read of them.
 */
#ifndef SH_HTTP_CONN_H
#define SH_HTTP_CONN_H

#include "server.h"

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

/* The connection's request count went to 0 (arm) or up from 0 (disarm). */
void sh_http_conn_arm(sh_http_conn *c);
void sh_http_conn_disarm(sh_http_conn *c);

/* The connection actors' class for handlers' stack locals of
 * locals_size bytes (at most SH_HTTP_MAX_LOCALS). */
const sh_actor_class *sh_http_actor_class(size_t locals_size);

#endif
