/*
 * stackhouse HTTP/1.1: a server on channels.
 *
 * Model.
 *   - sh_http_serve starts a TCP server (<stackhouse/net.h>) whose
 *     connection actors (one per worker by default) run the HTTP codec at
 *     the head of each connection's pipeline. The codec parses requests
 *     incrementally as bytes arrive, however the bytes are split, and
 *     fires each whole request (head and body) toward the actor as an
 *     sh_http_request message.
 *   - Each request runs in a channel stack of the connection actor: the
 *     route that matches its method and path (exact path, or a prefix when
 *     the route's path ends in '*') is the stack's handler. A handler is an
 *     ordinary stack function: it may ask other actors, sleep, suspend, and
 *     answers with sh_http_reply (or sh_return of an sh_http_response).
 *   - Keep-alive and pipelining: requests of one connection may run
 *     concurrently (up to max_inflight) and their responses are written in
 *     the order the requests arrived. There is no cap on the number of
 *     requests a connection may send; "Connection: close" (and HTTP/1.0
 *     without "Connection: keep-alive") closes the connection after its
 *     response.
 *   - Every request gets exactly one response. A handler that throws gets
 *     a status for its error (-ETIMEDOUT: 504; -EAGAIN, -EBUSY, -ENOBUFS,
 *     -ESHUTDOWN, -ECONNREFUSED: 503; others: 500), as does one that
 *     returns no response (500).
 *   - Bad input is answered, then the connection closes: a malformed
 *     request line or header, a header without a colon, a NUL or other
 *     control byte, header folding, conflicting Content-Length headers, a
 *     bad chunk size: 400; a head longer than max_head or with more than
 *     SH_HTTP_MAX_HEADERS headers: 431; a declared body over max_body: 413
 *     (before any of it is read); a transfer coding other than chunked:
 *     501; an HTTP version other than 1.0 and 1.1: 505. A method no route
 *     knows: 501; a path no route has: 404; a path whose routes take other
 *     methods: 405 (with Allow). These last three keep the connection.
 *   - idle_timeout_ms bounds the time a connection may take to send a
 *     whole request (head and body) while none of its requests is being
 *     handled: from its accept, and from the moment its last response was
 *     written. It closes idle keep-alive connections and slow senders
 *     alike (checked a few times per timeout: a connection closes between
 *     1 and 1.5 timeouts late). A peer still reading its responses is not
 *     idle: its time counts from the last time its unwritten bytes fell.
 *   - max_connections is server-wide: a connection accepted past it is
 *     answered 503 and closed at once; the others keep being served.
 *   - Responses carry Server and Date; Date is formatted once a second per
 *     connection actor (virtual time in the simulator).
 *
 * Memory: a connection holds at most max_head bytes of an unfinished head
 * and max_body bytes of an unfinished body, plus the channel's bounds
 * (sh_channel_opts: max_pending_stacks requests waiting), plus the
 * responses of the requests it took: it takes none while its write
 * buffer is past the high watermark (a client slow to read is pushed
 * back, not cut off). Request and response messages come from the
 * worker's pools: in steady state a request whose head fits
 * SH_HTTP_INLINE_HEAD bytes costs no malloc.
 */
#ifndef STACKHOUSE_HTTP_H
#define STACKHOUSE_HTTP_H

#include <stackhouse/http_private.h>
#include <stackhouse/net.h>
#include <stackhouse/stackhouse.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Methods a route may take (a bit each in sh_http_route.methods). */
typedef enum sh_http_method {
  SH_HTTP_OTHER = 0, /* a well-formed method none of the below */
  SH_HTTP_GET,
  SH_HTTP_HEAD,
  SH_HTTP_POST,
  SH_HTTP_PUT,
  SH_HTTP_DELETE,
  SH_HTTP_CONNECT,
  SH_HTTP_OPTIONS,
  SH_HTTP_TRACE,
  SH_HTTP_PATCH,
} sh_http_method;
#define SH_HTTP_M(m) (1u << (m))

/* A view of bytes (not NUL-terminated) inside the message that holds it. */
typedef struct sh_http_str {
  const char *p;
  size_t len;
} sh_http_str;

/* Headers per request, at most; more: 431. */
#define SH_HTTP_MAX_HEADERS 64
/* A head up to this many bytes lives in the request message itself;
 * a longer one (up to max_head) takes one malloc. */
#define SH_HTTP_INLINE_HEAD 1280

/*
 * A request (kind SH_NOTICE), as a handler sees it: sh_http_req(st). The
 * views point into the message; they live as long as it does (the stack's
 * life). The last member is the codec's (<stackhouse/http_private.h>): the
 * request's head and where its headers are in it, not for handlers.
 */
typedef struct sh_http_request {
  sh_msg hdr;
  sh_http_method method;
  sh_http_str method_name; /* as sent */
  sh_http_str target;      /* the request target as sent */
  sh_http_str path;        /* the target up to '?' */
  sh_http_str query;       /* after '?' (len 0: none) */
  uint8_t version;         /* 10 or 11 */
  bool keep_alive;         /* the connection stays open after the response */
  bool chunked;            /* the body came chunked */
  uint32_t nheaders;       /* headers (sh_http_header_at) */
  int64_t content_length;  /* declared, or -1 */
  sh_buf body;             /* the whole body (pages moved from the socket's, not copied) */
  SH_HTTP_REQUEST_PRIVATE_FIELDS;
} sh_http_request;
SH_MSG_DECLARE(sh_http_request);

/* Header i (0 .. nheaders - 1), as sent (name case kept, value trimmed). */
SH_API int sh_http_header_at(const sh_http_request *r, uint32_t i, sh_http_str *name,
                             sh_http_str *value);
/* The first header named `name` (case-insensitive): true and its value. */
SH_API bool sh_http_header(const sh_http_request *r, const char *name, sh_http_str *value);

/* Bodies up to this many bytes live in the response message itself. */
#define SH_HTTP_INLINE_BODY 512

/*
 * A response: what a handler returns (sh_return) to be written. The codec
 * adds the status line, Server, Date, Content-Length and, when the
 * connection closes after it, "Connection: close".
 */
typedef struct sh_http_response {
  sh_msg hdr;
  uint16_t status;
  bool close;               /* close the connection after this response */
  const char *content_type; /* a static string, or NULL: no Content-Type */
  sh_buf headers;           /* extra header lines ("Name: value\r\n"), sh_http_response_header */
  sh_buf body;              /* a body too long for the inline one */
  uint32_t inline_len;
  char inline_body[SH_HTTP_INLINE_BODY];
} sh_http_response;
SH_MSG_DECLARE(sh_http_response);

/* A new response with a copy of n bytes of body; NULL when out of memory.
 * content_type must outlive the response (a string literal). */
SH_API sh_http_response *sh_http_response_new(uint16_t status, const char *content_type,
                                              const void *body, size_t n);
/* Appends a header line; -EINVAL for a name or value with CR, LF or NUL
 * (or a name with ':' or a space), -ENOMEM. */
SH_API int sh_http_response_header(sh_http_response *r, const char *name, const char *value);
/* The standard reason phrase of a status ("" for an unknown one). */
SH_API const char *sh_http_reason(uint16_t status);

/* In a handler: the request of this stack. */
SH_API sh_http_request *sh_http_req(sh_stack *st);
/* In a handler: the server's user data (sh_http_config.data). */
SH_API void *sh_http_data(sh_stack *st);
/* In a handler: answers with a response holding a copy of the body, and
 * returns the stack (return its value). Out of memory: 503, no body. */
SH_API sh_yield sh_http_reply(sh_stack *st, uint16_t status, const char *content_type,
                              const void *body, size_t n);

/* A route: handler runs for requests whose method is in `methods`
 * (SH_HTTP_M bits; 0: any) and whose path is `path` (ending in '*': any
 * path starting with what comes before it). First match wins. A HEAD
 * request no route takes by name goes to the first GET route of its
 * path, answered without the body. */
typedef struct sh_http_route {
  uint32_t methods;
  const char *path;
  sh_stack_fn handler;
} sh_http_route;

/* A server's configuration; zero fields take the defaults in brackets. */
typedef struct sh_http_config {
  const sh_http_route *routes; /* kept, not copied: must outlive the server */
  uint32_t nroutes;            /* at most 65535 */
  size_t locals_size;        /* stack locals every handler may use [0; at most 64 KiB] */
  void *data;                /* user data for handlers (sh_http_data) */
  uint32_t instances;        /* connection actors [SH_SPAWN_PER_WORKER] */
  uint32_t max_connections;  /* open connections server-wide [0: no limit] */
  int64_t idle_timeout_ms;   /* see above [60000; SH_FOREVER: none] */
  uint32_t max_head;         /* request line and headers, bytes [8192; at most 65535] */
  uint64_t max_body;         /* request body, bytes [1 MiB] */
  uint32_t max_inflight;     /* requests of one connection handled at once [16; at most 256] */
  const char *server_name;   /* the Server header ["stackhouse"] */
} sh_http_config;

typedef struct sh_http_server sh_http_server;

/* Serves HTTP at `at` until the system stops. -EINVAL for a bad config.
 * The handle is valid until the system shuts down (sh_system_shutdown,
 * sh_system_free): read its stats before. */
SH_API int sh_http_serve(sh_system *sys, const sh_netaddr *at, const sh_http_config *cfg,
                         sh_http_server **out);
SH_API int sh_http_server_addr(const sh_http_server *s, sh_netaddr *out);

typedef struct sh_http_stats {
  uint64_t connections;   /* accepted */
  uint64_t open;          /* open now */
  uint64_t refused;       /* answered 503 for max_connections */
  uint64_t requests;      /* requests fired to handlers */
  uint64_t bad;           /* answered with an error status by the codec */
  uint64_t timeouts;      /* closed by idle_timeout_ms */
} sh_http_stats;
SH_API int sh_http_server_stats(const sh_http_server *s, sh_http_stats *out);

#ifdef __cplusplus
}
#endif
#endif
