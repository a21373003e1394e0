/*
 * A small JSON parser for the simulator's trace files (tests only): it
 * checks that a whole document is valid JSON and keeps, for each object of
 * "traceEvents", the members the tests look at, as raw text (strings
 * without their quotes, still escaped). No outside tool needed.
 */
#ifndef TESTS_SUPPORT_TRACEJSON_H
#define TESTS_SUPPORT_TRACEJSON_H

#include <stdbool.h>
#include <stddef.h>

typedef struct span {
  const char *s;
  size_t len;
} span;

/* The members of one traceEvents object: its own, and of its args the
 * name (metadata) and the text (a message's words, a check, a note, a
 * failure's detail). */
typedef struct ev {
  span ph, name, cat, id, ts, tid, scope, bp, argname, argtext;
} ev;

#define MAX_EVENTS 256
#define MAX_DEPTH 32

typedef struct doc {
  const char *p, *end;
  ev *evs;          /* cap events kept, the first ones */
  size_t cap;
  size_t n;         /* events kept */
  size_t total;     /* events seen */
  bool has_events;  /* top level: "traceEvents" is an array */
  bool unit_ns;     /* top level: "displayTimeUnit":"ns" */
} doc;

bool span_is(span s, const char *lit);
/* Whether s begins with lit. */
bool span_starts(span s, const char *lit);
/* Parses text[0..len) into d, keeping up to cap events in evs; the top
 * level must be one value and nothing else. */
bool parse_doc(doc *d, const char *text, size_t len, ev *evs, size_t cap);
/* Whether text is one valid JSON value. */
bool json_ok(const char *text);
/* Decodes a raw string span (ASCII escapes only) into buf. */
bool unescape(span s, char *buf, size_t cap);
/* The whole file, NUL-terminated (malloc'd), its length in *len; NULL on
 * an error. */
char *slurp_file(const char *path, size_t *len);

#endif
