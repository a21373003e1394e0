/*
 * Inside the conformance oracle (http_oracle.c draws and judges,
 * http_oracle_write.c writes the bytes): a drawn request's description,
 * and what writing its head found out. Not for the scenario itself.
 */
#ifndef SCN_HTTP_ORACLE_REQ_H
#define SCN_HTTP_ORACLE_REQ_H

#include "http_echo.h"
#include "http_oracle.h"

/* Paths: routed ones (P_W only when the table has "/w/ *"), unrouted ones
 * close to them, then the paths of an absolute-form target without one
 * ("/") and of the asterisk-form ("*"); last the holding route's. */
enum { P_G, P_P, P_B, P_W, P_M, NROUTED, NPATHS = NROUTED + 4, P_ROOT = NPATHS, P_STAR, P_HOLD };
extern const char *const ho_paths[P_HOLD + 1];

/* Request-target forms (RFC 9112 3.2) the server takes. */
enum { T_ORIGIN, T_ABSOLUTE, T_ASTERISK };

/* One kind of bad input per bad request; B_OK: none. */
enum { B_OK, B_NO_COLON, B_BAD_CL, B_NO_HOST, B_BAD_CHUNK, B_OVERFLOW, B_HUGE, B_VERSION, B_GZIP,
       B_TARGET, B_BARE_CR, B_BAD_VERSION, B_TWO_HOSTS, NBAD };
#define NBAD_TARGETS 7  /* B_TARGET's kinds (bad_target) */
#define NBAD_VERSIONS 4 /* B_BAD_VERSION's kinds (bad_target) */
/* Heads at a limit and one past it: max_head, SH_HTTP_MAX_HEADERS, and
 * the request's inline storage (SH_HTTP_INLINE_HEAD, no limit: past it
 * the head takes a malloc). */
enum { PAD_NONE, PAD_HEAD_AT, PAD_HEAD_OVER, PAD_HDRS_AT, PAD_HDRS_OVER, PAD_INLINE_AT,
       PAD_INLINE_OVER, NPAD };
enum { F_NONE, F_LEN, F_CHUNKED };

#define HO_EXTRA 4 /* extra headers of a request, at most */

typedef struct req {
  uint8_t method, path, conn, bad, pad, framing, version, cl_zeros;
  uint8_t form, bad_target, lead, nextra, nlooks;
  bool sleep, shaped, no_query; /* no_query: an absolute-form target with neither path nor query */
  uint8_t extra[HO_EXTRA][2]; /* name and value, indices of the writer's tables */
  uint8_t look[HO_LOOKS];     /* names to look up, indices of the writer's table */
  ho_shape shape;
  uint64_t body_len, body_seed;
} req;

/* What writing a head found out, for the model: its length (request line
 * to the empty line, CRLFs included, leading empty lines not), its
 * target, and every header as written (the value untrimmed). */
typedef struct head_info {
  uint32_t len;
  uint32_t nheaders;
  sh_http_str target;
  sh_http_str name[SH_HTTP_MAX_HEADERS + 1], value[SH_HTTP_MAX_HEADERS + 1];
  sh_http_str look[HO_LOOKS]; /* the names looked up, as written */
} head_info;

typedef struct out_buf {
  char *p;
  size_t len, size;
} out_buf;

void ho_put(out_buf *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Draws what of r the writer draws (extra headers, lookups). */
void ho_draw_extras(sh_scn *s, req *r);
/* The head of r (its target names connection conn, request j). */
void ho_write_head(sh_scn *s, const req *r, uint32_t conn, uint32_t j, const ho_server *srv,
                   out_buf *o, head_info *h);
/* A chunked body of r (or a bad chunk size). */
void ho_write_chunked(sh_scn *s, const req *r, const char *body, out_buf *o);

#endif
