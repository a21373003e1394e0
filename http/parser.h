/*
 * The HTTP/1.1 request parser: bytes in, sh_http_request messages out.
 * Pure (no channel, no actor): the codec (codec.c) drives it from its
 * decode callback, the tests and the fuzz target drive it directly.
 *
 * Incremental: sh_http_parse takes what it can from `in` and keeps its
 * place in the parser, so a request split at any byte boundary parses the
 * same as one arriving whole. A head is taken from `in` (copied into the
 * request message) only once complete; body bytes move into the request's
 * body as they arrive (whole pages without a copy).
 */
#ifndef SH_HTTP_PARSER_H
#define SH_HTTP_PARSER_H

#include <stackhouse/http.h>

typedef struct sh_http_limits {
  uint32_t max_head; /* bytes of request line and headers, CRLFs included (<= 65535) */
  uint64_t max_body; /* bytes of body (decoded, for chunked) */
} sh_http_limits;

typedef struct sh_http_parser {
  sh_http_limits lim;
  uint32_t state;          /* the parser's; 0 (zeroed) is "awaiting a head" */
  uint32_t scan;           /* head bytes already scanned for its end */
  uint32_t scan_state;     /* where the end-of-head scan stood */
  uint64_t remaining;      /* body: bytes left of the length, or of the chunk */
  uint64_t body_len;       /* body: bytes taken so far */
  uint32_t line;           /* chunked: bytes of the chunk-size or trailer line so far */
  sh_http_request *req;    /* the request whose body is being read */
  uint16_t error;          /* once an error was returned: its status */
} sh_http_parser;

/* What sh_http_parse returns (or -ENOMEM). */
enum {
  SH_HTTP_MORE = 0,  /* need more bytes */
  SH_HTTP_DONE = 1,  /* *out is a whole request, the caller's */
  SH_HTTP_ERROR = 2, /* bad input: p->error is the status to answer (400, 413,
                      * 431, 501, 505); the parser is dead from here on: every
                      * later call consumes all of `in` and returns SH_HTTP_MORE */
};

void sh_http_parser_init(sh_http_parser *p, const sh_http_limits *lim);
/* Frees a request still being received. */
void sh_http_parser_reset(sh_http_parser *p);
/* Takes bytes from `in`: at most one request per call. */
int sh_http_parse(sh_http_parser *p, sh_buf *in, sh_http_request **out);
/* True while a request has begun (head bytes scanned or body being read). */
bool sh_http_parser_busy(const sh_http_parser *p);

/* A request message with its fields zeroed (its header slots and inline
 * head are not: the parser fills them); NULL when out of memory. */
sh_http_request *sh_http_request_alloc(void);

/* Parses a whole head (request line, headers, the empty line) held in
 * r's storage, len bytes, filling r's fields. 0, or the error status. */
uint16_t sh_http_parse_head(sh_http_request *r, size_t len);

#endif
