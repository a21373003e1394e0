/*
 * The HTTP conformance scenario's workload and its reference model.
 *
 * ho_build draws one connection's pipeline from the scenario's stream
 * (every method of sh_http_method, an unknown one and a lower-case GET;
 * paths routed for GET, for POST, for both, for PUT, TRACE and CONNECT,
 * under an any-method prefix, and unrouted; origin-, absolute- and
 * asterisk-form targets, and malformed ones; empty lines before a request
 * line; header names in drawn case, duplicates, values with whitespace
 * around, names for the handler to look up and the shape of its response;
 * Content-Length and chunked bodies at and around max_body, chunk sizes
 * with leading zeros, extensions and trailers, sizes past 64 bits; heads
 * at and past max_head, SH_HTTP_MAX_HEADERS and SH_HTTP_INLINE_HEAD;
 * Connection close and keep-alive, HTTP/1.0; malformed framing) and
 * writes its bytes.
 *
 * The model is written from RFC 9112 / 9110 and docs/http.md, not from
 * http/: for every request it says the response the server owes (status,
 * Connection header, Allow, whether a body comes, and for a handler's 200
 * the body itself, which names the request and what the header API says
 * of it (http_echo.h), and the Content-Type and X-Long headers it was
 * asked for), and where the server must
 * close: after a close-marked request, an HTTP/1.0 one without
 * keep-alive, a fatal framing error. Nothing after that is answered.
 */
#ifndef SCN_HTTP_ORACLE_H
#define SCN_HTTP_ORACLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stackhouse/http.h>
#include <stackhouse/scenario.h>

#define HO_REQS 10         /* requests of a connection, at most */
#define HO_OUT_MAX 20480u  /* bytes of a connection's requests, at most */
#define HO_ECHO_MAX 160u   /* bytes of a handler's body the model keeps (the rest: a sum) */
#define HO_BODY_MAX 512u   /* max_body + 1, at most */

/* Methods of the model (bits of ho_expect.allow): RFC 9110's and PATCH,
 * then ones the server does not know: made up, of other RFCs (of the
 * lengths of known ones), and GET in lower case (methods are
 * case-sensitive: RFC 9110 9.1). */
enum { HO_GET, HO_HEAD, HO_POST, HO_PUT, HO_DELETE, HO_CONNECT, HO_OPTIONS, HO_TRACE, HO_PATCH,
       HO_BREW, HO_LOWER_GET, HO_LABEL, HO_SEARCH, HO_CHECKIN, HO_NMETHODS };

/* What the server is configured with, as the model needs it. */
typedef struct ho_server {
  uint32_t max_head;
  uint64_t max_body;   /* below HO_BODY_MAX */
  bool any_route;  /* the table has an any-method route "/w/ *" */
  bool star_route; /* the table has an OPTIONS route "*" (a prefix: every path) */
} ho_server;

/* The response the model expects to one request. */
typedef struct ho_expect {
  uint16_t status;
  uint16_t alt;        /* another status the docs leave open (0: none) */
  bool close;          /* "Connection: close", and the server closes after it */
  bool keep_alive;     /* "Connection: keep-alive" (an HTTP/1.0 client asked) */
  bool head;           /* a HEAD: Content-Length without the body */
  bool handler;        /* a handler's 200: its body is echo */
  bool fatal;          /* a framing error: the codec's, counted in bad */
  uint16_t allow;      /* a 405: the methods Allow must list (bits) */
  uint32_t echo_len, echo_sum; /* a handler's body: its length and FNV-1a */
  uint32_t xlen, xsum; /* the headers the client does not read (hc_resp.xlen, xsum) */
  char echo[HO_ECHO_MAX]; /* its first bytes (NUL-terminated) */
} ho_expect;

/* One connection's pipeline and what it is owed. */
typedef struct ho_stream {
  char out[HO_OUT_MAX];
  uint32_t len;
  uint32_t nreqs;      /* requests in out */
  uint32_t start[HO_REQS + 1]; /* where each begins in out, and the end */
  uint32_t nexp;       /* responses owed: to requests 0 .. nexp - 1 */
  bool server_closes;  /* after response nexp - 1 (else the client closes) */
  uint32_t handled;    /* of those, requests a route's handler answers */
  uint32_t misses;     /* 404, 405, 501 for a method */
  ho_expect exp[HO_REQS];
} ho_stream;

/* Draws connection `conn`'s pipeline; with `hold`, request 0 is a GET of
 * the holding route "/h" (a wave past max_connections). */
void ho_build(sh_scn *s, const ho_server *srv, uint32_t conn, bool hold, ho_stream *out);

/* FNV-1a of n more bytes (start from HO_SUM0). */
#define HO_SUM0 2166136261u
uint32_t ho_sum(uint32_t h, const void *p, size_t n);

/* The names of the model's methods, and an Allow value's as bits (0x8000:
 * a token no method has). */
extern const char *const ho_method_names[HO_NMETHODS];
uint16_t ho_allow_bits(const char *v);

/* The routes the scenario serves, as its table has them (any_route,
 * star_route: whether the table has those). */
uint32_t ho_routes(const ho_server *srv, sh_http_route *out, sh_stack_fn echo, sh_stack_fn hold);

#endif
