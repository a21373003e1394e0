/*
 * The response message and what a handler calls to make and send one
 * (http.h): bodies up to SH_HTTP_INLINE_BODY bytes live in the message,
 * longer ones in pages; extra header lines are checked as they are added,
 * so the encoder (codec.c) copies them without looking.
 */
#include <stdlib.h>
#include <string.h>

#include "conn.h"

static void response_drop(sh_msg *m) {
  sh_http_response *r = (sh_http_response *)m;
  sh_buf_clear(&r->headers);
  sh_buf_clear(&r->body);
}

SH_MSG_DEFINE_DROP(sh_http_response, SH_NOTICE, 0, response_drop);

/* Reason phrases, indexed by status - 100, with their lengths: the
 * encoder copies them without strlen. */
typedef struct reason {
  const char *s;
  uint8_t n;
} reason;
#define R(code, text) [(code) - 100] = {text, sizeof(text) - 1}
static const reason reasons[500] = {
    R(100, "Continue"), R(101, "Switching Protocols"),
    R(200, "OK"), R(201, "Created"), R(202, "Accepted"), R(203, "Non-Authoritative Information"),
    R(204, "No Content"), R(205, "Reset Content"), R(206, "Partial Content"),
    R(300, "Multiple Choices"), R(301, "Moved Permanently"), R(302, "Found"),
    R(303, "See Other"), R(304, "Not Modified"), R(307, "Temporary Redirect"),
    R(308, "Permanent Redirect"),
    R(400, "Bad Request"), R(401, "Unauthorized"), R(402, "Payment Required"),
    R(403, "Forbidden"), R(404, "Not Found"), R(405, "Method Not Allowed"),
    R(406, "Not Acceptable"), R(408, "Request Timeout"), R(409, "Conflict"), R(410, "Gone"),
    R(411, "Length Required"), R(412, "Precondition Failed"), R(413, "Content Too Large"),
    R(414, "URI Too Long"), R(415, "Unsupported Media Type"), R(416, "Range Not Satisfiable"),
    R(417, "Expectation Failed"), R(421, "Misdirected Request"), R(422, "Unprocessable Content"),
    R(426, "Upgrade Required"), R(428, "Precondition Required"), R(429, "Too Many Requests"),
    R(431, "Request Header Fields Too Large"),
    R(500, "Internal Server Error"), R(501, "Not Implemented"), R(502, "Bad Gateway"),
    R(503, "Service Unavailable"), R(504, "Gateway Timeout"),
    R(505, "HTTP Version Not Supported"),
};
#undef R

const char *sh_http_reason_n(uint16_t status, size_t *len) {
  const reason *r = status >= 100 && status < 600 ? &reasons[status - 100] : NULL;
  if (r == NULL || r->s == NULL) {
    *len = 0;
    return "";
  }
  *len = r->n;
  return r->s;
}

const char *sh_http_reason(uint16_t status) {
  size_t n;
  return sh_http_reason_n(status, &n);
}

sh_http_response *sh_http_response_new(uint16_t status, const char *content_type, const void *body,
                                       size_t n) {
  sh_http_response *r = (sh_http_response *)sh_msg_alloc(&sh_http_response_type);
  if (r == NULL) return NULL;
  r->status = status;
  r->content_type = content_type;
  if (n <= SH_HTTP_INLINE_BODY) {
    if (n > 0) memcpy(r->inline_body, body, n);
    r->inline_len = (uint32_t)n;
  } else if (sh_buf_append(&r->body, body, n) != 0) {
    sh_msg_free(&r->hdr);
    return NULL;
  }
  return r;
}

sh_http_response *sh_http_response_status(uint16_t status, bool close) {
  sh_http_response *r = sh_http_response_new(status, NULL, NULL, 0);
  if (r != NULL) r->close = close;
  return r;
}

/* Bytes that would split a header line, or end it early. */
static bool bad_bytes(const char *s, const char *also) {
  return s[strcspn(s, also)] != '\0';
}

int sh_http_response_header(sh_http_response *r, const char *name, const char *value) {
  if (r == NULL || name == NULL || value == NULL || name[0] == '\0' ||
      bad_bytes(name, "\r\n: \t") || bad_bytes(value, "\r\n"))
    return -EINVAL;
  size_t nl = strlen(name), vl = strlen(value), n = nl + vl + 4;
  char small[512];
  char *line = n <= sizeof(small) ? small : malloc(n);
  if (line == NULL) return -ENOMEM;
  memcpy(line, name, nl);
  memcpy(line + nl, ": ", 2);
  memcpy(line + nl + 2, value, vl);
  memcpy(line + nl + 2 + vl, "\r\n", 2);
  int rc = sh_buf_append(&r->headers, line, n) != 0 ? -ENOMEM : 0;
  if (line != small) free(line);
  return rc;
}

sh_http_request *sh_http_req(sh_stack *st) { return sh_stack_msg_as(st, sh_http_request); }

void *sh_http_data(sh_stack *st) {
  return ((sh_http_actor *)sh_stack_actor(st))->srv->cfg.data;
}

sh_yield sh_http_reply(sh_stack *st, uint16_t status, const char *content_type, const void *body,
                       size_t n) {
  sh_http_response *r = sh_http_response_new(status, content_type, body, n);
  /* Out of memory: 503 without a body; no memory even for that: the
   * server's fallback answers the missing result. */
  if (r == NULL) r = sh_http_response_status(503, false);
  return sh_return(st, r != NULL ? &r->hdr : NULL);
}
