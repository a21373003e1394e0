/*
 * The conformance handler's body (http_echo.h): one writer for the
 * handler and the model, so that they differ only where the server does.
 */
#include "http_echo.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "http_oracle.h"

/* 3072 'a's: Content-Types and X-Long values are tails of it. */
#define A64 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define A512 A64 A64 A64 A64 A64 A64 A64 A64
static const char as[] = A512 A512 A512 A512 A512 A512;
_Static_assert(sizeof(as) - 1 >= HO_CTYPE_MAX && sizeof(as) - 1 >= HO_XLONG_MAX, "tails too short");

const char *ho_ctype(uint32_t len) {
  assert(len <= HO_CTYPE_MAX);
  return len == 0 ? "text/plain" : as + sizeof(as) - 1 - len;
}

const char *ho_xlong(uint32_t len) {
  assert(len <= HO_XLONG_MAX);
  return as + sizeof(as) - 1 - len;
}

/* A ':' or a space in a name, CR or LF in a value, an empty name: each
 * would split or spoil the line (http.h: -EINVAL). */
const char *const ho_bad_names[HO_BAD_LINES + 1] = {NULL, "X:Y", "X Y", "X-V", ""};
const char *const ho_bad_values[HO_BAD_LINES + 1] = {NULL, "v", "v", "a\r\nb", "v"};

typedef struct wbuf {
  char *p;
  size_t len, size;
} wbuf;

__attribute__((format(printf, 2, 3))) static void wput(wbuf *w, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(w->p + w->len, w->size - w->len, fmt, ap);
  va_end(ap);
  if (n > 0) w->len += (size_t)n < w->size - w->len ? (size_t)n : w->size - w->len - 1;
}

/* A name or value as it is, or, past HO_SHOWN bytes, as its length and sum. */
static void shown(wbuf *w, sh_http_str v) {
  if (v.len <= HO_SHOWN) wput(w, "%.*s", (int)v.len, v.p);
  else wput(w, "~%zu/%08x", v.len, ho_sum(HO_SUM0, v.p, v.len));
}

size_t ho_echo_format(const ho_echo_in *in, char *out, size_t size) {
  assert(size >= HO_ECHO_BUF && in->nheaders <= SH_HTTP_MAX_HEADERS);
  assert(in->nlooks <= HO_LOOKS && in->fill <= HO_FILL_MAX);
  wbuf w = {out, 0, size};
  wput(&w, "%.*s %.*s v%u ka%d n%llu s%08x\n", (int)in->method_name.len, in->method_name.p,
       (int)in->target.len, in->target.p, in->version, in->keep_alive,
       (unsigned long long)in->body_len, in->body_sum);
  wput(&w, "M%s P%.*s Q%.*s H%u E%d\n", in->method_enum, (int)in->path.len, in->path.p,
       (int)in->query.len, in->query.p, in->nheaders, in->past_rc);
  for (uint32_t i = 0; i < in->nheaders; i++) {
    shown(&w, in->name[i]);
    wput(&w, ": ");
    shown(&w, in->value[i]);
    wput(&w, "\n");
  }
  for (uint32_t k = 0; k < in->nlooks; k++) {
    wput(&w, "?");
    shown(&w, in->look[k]);
    if (!in->found[k]) {
      wput(&w, "!\n");
      continue;
    }
    wput(&w, "=");
    shown(&w, in->found_value[k]);
    wput(&w, "\n");
  }
  if (in->reason != NULL) wput(&w, "R%u %s\n", in->reason_of, in->reason);
  if (in->bad_header) wput(&w, "B%d\n", in->bad_header_rc);
  /* The filler: a pattern, so that a lost or moved byte changes the sum. */
  for (uint32_t i = 0; i < in->fill && w.len + 1 < w.size; i++) out[w.len++] = (char)('a' + i % 23);
  return w.len;
}
