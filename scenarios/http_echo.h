/*
 * What the conformance scenario's handler answers, written by one function
 * that both sides call: the handler (http_conformance.c) with what the
 * server's API says of the request, the model (http_oracle.c) with what
 * it wrote. The bytes are the same only when every field is: the format
 * is shared, the values never are.
 *
 * The body names the request (method as sent and as the server's enum,
 * target, path, query, version, keep-alive, body length and sum), then
 * every header by index (sh_http_header_at: name as sent, value trimmed,
 * and what an index past the last returns), then each name the request
 * asked to look up (sh_http_header: the first header of that name in any
 * case, or none), then what the handler was asked to report of the
 * response API (a reason phrase, a refused header line), then filler.
 * A value longer than HO_SHOWN is written as its length and sum, so a
 * head of a few KiB makes a body of a few hundred bytes; the filler is
 * what makes a long one.
 */
#ifndef SCN_HTTP_ECHO_H
#define SCN_HTTP_ECHO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stackhouse/http.h>

#define HO_LOOKS 6          /* names looked up per request, at most */
#define HO_LOOK_NAME 24     /* bytes of a looked-up name, at most */
#define HO_SHOWN 40         /* bytes of a name or value written as they are */
#define HO_FILL_MAX 4200u   /* filler bytes, at most */
/* A body: the fixed part, a line per header and per lookup, the filler. */
#define HO_ECHO_BUF (512u + (SH_HTTP_MAX_HEADERS + HO_LOOKS) * (2u * HO_SHOWN + 8u) + HO_FILL_MAX)

typedef struct ho_echo_in {
  sh_http_str method_name, target, path, query;
  const char *method_enum; /* the sh_http_method's name ("OTHER" for SH_HTTP_OTHER) */
  unsigned version;
  bool keep_alive;
  uint64_t body_len;
  uint32_t body_sum;
  uint32_t nheaders;                      /* at most SH_HTTP_MAX_HEADERS */
  sh_http_str name[SH_HTTP_MAX_HEADERS], value[SH_HTTP_MAX_HEADERS];
  int past_rc;                            /* header_at(nheaders) */
  uint32_t nlooks;                        /* at most HO_LOOKS */
  sh_http_str look[HO_LOOKS], found_value[HO_LOOKS];
  bool found[HO_LOOKS];
  const char *reason;                     /* sh_http_reason of the status asked, or NULL */
  uint16_t reason_of;
  int bad_header_rc;                      /* sh_http_response_header of a bad line, if asked */
  bool bad_header;
  uint32_t fill;                          /* filler bytes, at most HO_FILL_MAX */
} ho_echo_in;

/* Writes the body for `in` into out (size bytes, at least HO_ECHO_BUF);
 * returns its length. */
size_t ho_echo_format(const ho_echo_in *in, char *out, size_t size);

/* What a request asks of its response (its "X-Shape" header): the
 * Content-Type's length (0: "text/plain"), filler bytes, an "X-Long"
 * header's value length (0: none), a status whose reason to report (0:
 * none), and a bad header line to try (0: none; 1 .. HO_BAD_LINES). */
typedef struct ho_shape {
  uint32_t ctype_len, fill, xlong;
  uint16_t reason_of;
  uint8_t bad_line;
} ho_shape;
#define HO_CTYPE_MAX 2400u  /* a Content-Type's length, at most */
#define HO_XLONG_MAX 2400u  /* an X-Long value's length, at most */
#define HO_BAD_LINES 4

/* The Content-Type of a length (a static string, as the API needs) and an
 * X-Long value of a length: tails of one string of 'a's. */
const char *ho_ctype(uint32_t len);
const char *ho_xlong(uint32_t len);
/* The bad header lines a handler may be asked to add (all refused). */
extern const char *const ho_bad_names[HO_BAD_LINES + 1], *const ho_bad_values[HO_BAD_LINES + 1];

#endif
