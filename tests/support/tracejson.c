/* The trace files' JSON parser for tests (tracejson.h). */
#include "tracejson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool span_is(span s, const char *lit) {
  return s.s != NULL && s.len == strlen(lit) && memcmp(s.s, lit, s.len) == 0;
}

bool span_starts(span s, const char *lit) {
  return s.s != NULL && s.len >= strlen(lit) && memcmp(s.s, lit, strlen(lit)) == 0;
}

static void skip_ws(doc *d) {
  while (d->p < d->end && (*d->p == ' ' || *d->p == '\n' || *d->p == '\r' || *d->p == '\t')) d->p++;
}

static bool eat(doc *d, char c) {
  skip_ws(d);
  if (d->p >= d->end || *d->p != c) return false;
  d->p++;
  return true;
}

static bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool parse_string(doc *d, span *out) {
  if (!eat(d, '"')) return false;
  const char *start = d->p;
  while (d->p < d->end && *d->p != '"') {
    unsigned char c = (unsigned char)*d->p++;
    if (c < 0x20) return false;
    if (c != '\\') continue;
    if (d->p >= d->end) return false;
    char e = *d->p++;
    if (e == 'u') {
      for (int i = 0; i < 4; i++)
        if (d->p >= d->end || !is_hex(*d->p++)) return false;
    } else if (strchr("\"\\/bfnrt", e) == NULL || e == '\0') {
      return false;
    }
  }
  if (d->p >= d->end) return false;
  *out = (span){start, (size_t)(d->p - start)};
  d->p++;
  return true;
}

static bool digits(doc *d) {
  const char *s = d->p;
  while (d->p < d->end && *d->p >= '0' && *d->p <= '9') d->p++;
  return d->p > s;
}

static bool parse_number(doc *d, span *out) {
  const char *start = d->p;
  if (d->p < d->end && *d->p == '-') d->p++;
  if (d->p < d->end && *d->p == '0')
    d->p++;
  else if (!digits(d))
    return false;
  if (d->p < d->end && *d->p == '.') {
    d->p++;
    if (!digits(d)) return false;
  }
  if (d->p < d->end && (*d->p == 'e' || *d->p == 'E')) {
    d->p++;
    if (d->p < d->end && (*d->p == '+' || *d->p == '-')) d->p++;
    if (!digits(d)) return false;
  }
  *out = (span){start, (size_t)(d->p - start)};
  return true;
}

static bool parse_value(doc *d, int depth, span *out, ev *args_of);

/* An event's member `key` with value val, kept if the tests look at it. */
static void keep_field(ev *e, span key, span val) {
  static const struct {
    const char *key;
    size_t off;
  } fields[] = {
      {"ph", offsetof(ev, ph)},   {"name", offsetof(ev, name)}, {"cat", offsetof(ev, cat)},
      {"id", offsetof(ev, id)},   {"ts", offsetof(ev, ts)},     {"tid", offsetof(ev, tid)},
      {"s", offsetof(ev, scope)}, {"bp", offsetof(ev, bp)},
  };
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    if (span_is(key, fields[i].key)) *(span *)(void *)((char *)e + fields[i].off) = val;
}

/* Members of an object at `depth` (1: the document, 3: a trace event, 4:
 * an event's args, whose "name" and "text" go to args_of). */
static bool parse_object(doc *d, int depth, ev *args_of) {
  ev e = {0};
  if (!eat(d, '{')) return false;
  if (!eat(d, '}')) {
    do {
      span key, val = {0};
      if (!parse_string(d, &key) || !eat(d, ':')) return false;
      skip_ws(d);
      bool arr = d->p < d->end && *d->p == '[';
      if (!parse_value(d, depth + 1, &val, span_is(key, "args") ? &e : NULL)) return false;
      if (depth == 1 && span_is(key, "traceEvents")) d->has_events = arr;
      if (depth == 1 && span_is(key, "displayTimeUnit")) d->unit_ns = span_is(val, "ns");
      if (depth == 4 && args_of != NULL && span_is(key, "name")) args_of->argname = val;
      if (depth == 4 && args_of != NULL && span_is(key, "text")) args_of->argtext = val;
      if (depth == 3) keep_field(&e, key, val);
    } while (eat(d, ','));
    if (!eat(d, '}')) return false;
  }
  if (depth == 3) {
    if (d->n < d->cap) d->evs[d->n++] = e;
    d->total++;
  }
  return true;
}

static bool parse_array(doc *d, int depth) {
  if (!eat(d, '[')) return false;
  if (eat(d, ']')) return true;
  do {
    span ignored;
    if (!parse_value(d, depth + 1, &ignored, NULL)) return false;
  } while (eat(d, ','));
  return eat(d, ']');
}

static bool parse_literal(doc *d, const char *lit, span *out) {
  size_t n = strlen(lit);
  if ((size_t)(d->end - d->p) < n || memcmp(d->p, lit, n) != 0) return false;
  *out = (span){d->p, n};
  d->p += n;
  return true;
}

static bool parse_value(doc *d, int depth, span *out, ev *args_of) {
  if (depth > MAX_DEPTH) return false;
  *out = (span){0};
  skip_ws(d);
  if (d->p >= d->end) return false;
  switch (*d->p) {
  case '{': return parse_object(d, depth, args_of);
  case '[': return parse_array(d, depth);
  case '"': return parse_string(d, out);
  case 't': return parse_literal(d, "true", out);
  case 'f': return parse_literal(d, "false", out);
  case 'n': return parse_literal(d, "null", out);
  default: return parse_number(d, out);
  }
}

bool parse_doc(doc *d, const char *text, size_t len, ev *evs, size_t cap) {
  memset(d, 0, sizeof *d);
  d->p = text;
  d->end = text + len;
  d->evs = evs;
  d->cap = cap;
  span top;
  if (!parse_value(d, 1, &top, NULL)) return false;
  skip_ws(d);
  return d->p == d->end;
}

bool json_ok(const char *text) {
  doc d;
  return parse_doc(&d, text, strlen(text), NULL, 0);
}

bool unescape(span s, char *buf, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < s.len; i++) {
    if (o + 1 >= cap) return false;
    char c = s.s[i];
    if (c == '\\') {
      char e = s.s[++i];
      if (e == 'u') {
        unsigned v = 0;
        if (sscanf(s.s + i + 1, "%4x", &v) != 1 || v >= 0x80) return false;
        c = (char)v;
        i += 4;
      } else {
        c = e == 'n' ? '\n' : e == 't' ? '\t' : e;
      }
    }
    buf[o++] = c;
  }
  buf[o] = '\0';
  return true;
}

char *slurp_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  char *buf = NULL;
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
  if (n >= 0) {
    rewind(f);
    buf = malloc((size_t)n + 1);
  }
  if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf == NULL) return NULL;
  buf[n] = '\0';
  *len = (size_t)n;
  return buf;
}
