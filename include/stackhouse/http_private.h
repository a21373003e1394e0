/*
 * stackhouse HTTP/1.1: the codec's fields of sh_http_request, kept out of
 * the public struct's view (<stackhouse/http.h>, which includes this
 * header: include that one). A request is one message of known size from
 * the worker's pools, its head inline, so these fields stay in the struct;
 * they are no part of the API and may change in any version: handlers
 * read a request through its public fields and sh_http_header(_at).
 *
 * A macro, expanded as the struct's last member where http.h has defined
 * SH_HTTP_MAX_HEADERS and SH_HTTP_INLINE_HEAD (as libuv's
 * UV_REQ_PRIVATE_FIELDS); the http/ sources reach the fields through it:
 * r->priv_.status and so on.
 */
#ifndef STACKHOUSE_HTTP_PRIVATE_H
#define STACKHOUSE_HTTP_PRIVATE_H

#include <stdint.h>

/* A header: offsets and lengths of its name and value in the head. */
typedef struct sh_http_hslot_ {
  uint16_t no, nl, vo, vl;
} sh_http_hslot_;

/* status: != 0, not a request but an error the codec answers; route: the
 * matched route's index + 1 (0: none yet); big: a head longer than
 * SH_HTTP_INLINE_HEAD (malloc'd), else NULL and the head is in head[];
 * h: the headers (nheaders of them), written by the parser, not zeroed. */
#define SH_HTTP_REQUEST_PRIVATE_FIELDS      \
  struct sh_http_request_private_ {         \
    uint16_t status;                        \
    uint16_t route;                         \
    char *big;                              \
    sh_http_hslot_ h[SH_HTTP_MAX_HEADERS];  \
    char head[SH_HTTP_INLINE_HEAD];         \
  } priv_

#endif
