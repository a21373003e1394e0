/*
 * Tests for the simulator's Chrome trace writer (backend-sim/trace.c).
 *
 * A synthetic event stream -- two workers and the outside fiber, runs with
 * nested message slices on two tracks at once, a house that moves to another
 * track, an ask answered on another track, an ask that times out, stray
 * RUN_END and DELIVER, an out-of-range track, a timestamp that goes back,
 * names that need escaping -- is written to a temporary file, which is then
 * checked with the small JSON parser below (no outside tool): the document
 * is valid JSON, B/E balance and nest per track, every message slice sits in
 * a run, flows pair up and bind where they should, timestamps never go back
 * and have the microseconds.nanoseconds form. Also: open errors, write errors
 * reported at close, an empty trace, and a NULL trace as a no-op.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/tracejson.h"
#include "trace.h"

/* ---- files --------------------------------------------------------------- */

static void temp_path(char *buf, size_t cap) {
  const char *dir = getenv("TMPDIR");
  if (dir == NULL || dir[0] == '\0') dir = "/tmp";
  assert_true(snprintf(buf, cap, "%s/sh_trace_XXXXXX", dir) < (int)cap);
  int fd = mkstemp(buf);
  assert_true(fd >= 0);
  close(fd);
}

static char *slurp(const char *path, size_t *len) {
  char *buf = slurp_file(path, len);
  assert_non_null(buf);
  assert_true(*len > 0);
  return buf;
}

/* ---- checks on the parsed events ------------------------------------------- */

#define TRACKS 3 /* two workers and the outside fiber */
#define STACK_MAX 8

/* "123.456" microseconds -> 123456 ns; the form must be exactly that. */
static uint64_t ts_ns(span s) {
  assert_non_null(s.s);
  assert_true(s.len >= 5 && s.s[s.len - 4] == '.');
  uint64_t v = 0;
  for (size_t i = 0; i < s.len; i++) {
    if (i == s.len - 4) continue;
    assert_true(s.s[i] >= '0' && s.s[i] <= '9');
    v = v * 10 + (uint64_t)(s.s[i] - '0');
  }
  return v;
}

static uint32_t tid_of(const ev *e) {
  assert_non_null(e->tid.s);
  unsigned v = 0;
  assert_int_equal(sscanf(e->tid.s, "%u", &v), 1);
  assert_true(v < TRACKS);
  return v;
}

static size_t count(const doc *d, const char *ph, const char *name) {
  size_t n = 0;
  for (size_t i = 0; i < d->n; i++)
    if (span_is(d->evs[i].ph, ph) && (name == NULL || span_is(d->evs[i].name, name))) n++;
  return n;
}

static bool has_meta(const doc *d, const char *what, uint32_t tid, const char *name) {
  for (size_t i = 0; i < d->n; i++) {
    const ev *e = &d->evs[i];
    if (span_is(e->ph, "M") && span_is(e->name, what) && tid_of(e) == tid &&
        span_is(e->argname, name))
      return true;
  }
  return false;
}

/* The walk in file order: slices balance and nest per track, a message
 * slice sits in a run, flow starts and bp:e ends sit in a slice, a flow end
 * without bp is followed on its track by the timeout instant it binds to,
 * and time never goes back. */
static void check_nesting(const doc *d) {
  const ev *stack[TRACKS][STACK_MAX];
  size_t depth[TRACKS] = {0};
  uint64_t last = 0;
  for (size_t i = 0; i < d->n; i++) {
    const ev *e = &d->evs[i];
    if (span_is(e->ph, "M")) continue;
    uint64_t ns = ts_ns(e->ts);
    assert_true(ns >= last);
    last = ns;
    if (span_is(e->scope, "g")) continue; /* global instants have no track */
    uint32_t t = tid_of(e);
    if (span_is(e->ph, "B")) {
      assert_true(depth[t] < STACK_MAX);
      if (span_is(e->cat, "msg"))
        assert_true(depth[t] > 0 && span_is(stack[t][depth[t] - 1]->cat, "run"));
      stack[t][depth[t]++] = e;
    } else if (span_is(e->ph, "E")) {
      assert_true(depth[t] > 0);
      depth[t]--;
    } else if (span_is(e->ph, "s") || (span_is(e->ph, "f") && span_is(e->bp, "e"))) {
      assert_true(depth[t] > 0);
    } else if (span_is(e->ph, "f")) {
      size_t j = i + 1;
      while (j < d->n && (span_is(d->evs[j].ph, "M") || span_is(d->evs[j].scope, "g") ||
                          tid_of(&d->evs[j]) != t))
        j++;
      assert_true(j < d->n);
      assert_true(span_is(d->evs[j].ph, "i") && span_is(d->evs[j].cat, "timeout"));
      assert_int_equal(ts_ns(d->evs[j].ts), ns);
    } else {
      assert_true(span_is(e->ph, "i") && span_is(e->scope, "t"));
    }
  }
  for (uint32_t t = 0; t < TRACKS; t++) assert_int_equal(depth[t], 0);
}

/* Every flow start has exactly one end with its id, name and category,
 * no earlier than the start; returns the number of flows. */
static size_t check_flows(const doc *d) {
  size_t flows = 0;
  for (size_t i = 0; i < d->n; i++) {
    const ev *s = &d->evs[i];
    if (!span_is(s->ph, "s") && !span_is(s->ph, "f")) continue;
    assert_true(span_is(s->name, "ask") && span_is(s->cat, "flow") && s->id.s != NULL);
    if (!span_is(s->ph, "s")) continue;
    flows++;
    size_t ends = 0;
    for (size_t j = 0; j < d->n; j++) {
      const ev *f = &d->evs[j];
      if (!span_is(f->ph, "f") || f->id.len != s->id.len || memcmp(f->id.s, s->id.s, s->id.len))
        continue;
      ends++;
      assert_true(j > i && ts_ns(f->ts) >= ts_ns(s->ts));
    }
    assert_int_equal(ends, 1);
  }
  assert_int_equal(flows, count(d, "f", NULL));
  return flows;
}

static const ev *find_b(const doc *d, const char *cat, const char *name) {
  for (size_t i = 0; i < d->n; i++)
    if (span_is(d->evs[i].ph, "B") && span_is(d->evs[i].cat, cat) && span_is(d->evs[i].name, name))
      return &d->evs[i];
  return NULL;
}

/* ---- tests --------------------------------------------------------------- */

#define W0 0u
#define W1 1u
#define OUT 2u
#define WEIRD "we\"ird\\na\nme\x01"
#define END_NS 1234567890123ull

static void write_stream(sh_simtrace *t) {
  uint64_t f1 = SH_TRACE_FLOW(1, 7), f2 = SH_TRACE_FLOW(0xabcdef01u, 9);
  sh_simtrace_event(t, 5, W0, SH_TRACE_RUN, 1, "pinger", 0);
  sh_simtrace_event(t, 5, W0, SH_TRACE_DELIVER, 1, "start", 0);
  sh_simtrace_event(t, 200, W0, SH_TRACE_ASK, 1, "ping", f1);
  /* A switch inside the run: worker 1 runs the ponger meanwhile. */
  sh_simtrace_event(t, 300, W1, SH_TRACE_RUN, 2, "ponger", 0);
  sh_simtrace_event(t, 300, W1, SH_TRACE_DELIVER, 2, "ping", 0);
  sh_simtrace_event(t, 400, W0, SH_TRACE_RUN_END, 1, "pinger", 0);
  sh_simtrace_event(t, 500, W1, SH_TRACE_RUN_END, 2, "ponger", 0);
  /* The pinger runs again, on worker 1 this time, and gets its reply. */
  sh_simtrace_event(t, 600, W1, SH_TRACE_RUN, 1, "pinger", 0);
  sh_simtrace_event(t, 600, W1, SH_TRACE_DELIVER, 1, "pong", 0);
  sh_simtrace_event(t, 650, W1, SH_TRACE_REPLY, 1, "pong", f1);
  sh_simtrace_event(t, 700, W1, SH_TRACE_DELIVER, 1, WEIRD, 0);
  sh_simtrace_event(t, 700, W1, SH_TRACE_ASK, 1, "slow", f2);
  sh_simtrace_event(t, 800, W1, SH_TRACE_RUN_END, 1, "pinger", 0);
  /* Strays: no run is open on the outside track. */
  sh_simtrace_event(t, 800, OUT, SH_TRACE_RUN_END, 3, "ghost", 0);
  sh_simtrace_event(t, 850, OUT, SH_TRACE_DELIVER, 3, "lost", 0);
  sh_simtrace_event(t, 860, 7, SH_TRACE_RUN, 4, "nowhere", 0);
  sh_simtrace_instant(t, 870, OUT, "time jump");
  sh_simtrace_instant(t, 880, UINT32_MAX, "FAIL: test");
  /* The ask times out in a later run; a timestamp from the past is raised. */
  sh_simtrace_event(t, 900, W0, SH_TRACE_RUN, 1, "pinger", 0);
  sh_simtrace_event(t, 900, W0, SH_TRACE_DELIVER, 1, "sh_tick", 0);
  sh_simtrace_event(t, 890, W0, SH_TRACE_TIMEOUT, 1, "timeout", f2);
  /* Left open for close: a run with a message on each worker. */
  sh_simtrace_event(t, 1000, W1, SH_TRACE_RUN, 2, "ponger", 0);
  sh_simtrace_event(t, 1000, W1, SH_TRACE_DELIVER, 2, "ping", 0);
}

static void test_stream(void **state) {
  (void)state;
  char path[256];
  temp_path(path, sizeof path);
  sh_simtrace *t = NULL;
  assert_int_equal(sh_simtrace_open(path, 2, &t), 0);
  assert_non_null(t);
  write_stream(t);
  assert_int_equal(sh_simtrace_close(t, END_NS), 0);

  size_t len;
  char *text = slurp(path, &len);
  unlink(path); /* before any check can fail */
  static doc d;
  static ev evs[MAX_EVENTS];
  assert_true(parse_doc(&d, text, len, evs, MAX_EVENTS));
  assert_true(d.total < MAX_EVENTS);
  assert_true(d.has_events);
  assert_true(d.unit_ns);

  assert_true(has_meta(&d, "process_name", 0, "stackhouse sim"));
  assert_true(has_meta(&d, "thread_name", W0, "worker 0"));
  assert_true(has_meta(&d, "thread_name", W1, "worker 1"));
  assert_true(has_meta(&d, "thread_name", OUT, "outside"));

  check_nesting(&d);
  assert_int_equal(check_flows(&d), 2);

  assert_int_equal(count(&d, "B", "pinger"), 3);
  assert_int_equal(count(&d, "B", "ponger"), 2);
  assert_non_null(find_b(&d, "msg", "start"));
  assert_non_null(find_b(&d, "msg", "pong"));
  assert_non_null(find_b(&d, "msg", "sh_tick"));
  assert_int_equal(count(&d, "B", "nowhere"), 0);
  const ev *first = find_b(&d, "run", "pinger");
  assert_true(span_is(first->ts, "0.005") && tid_of(first) == W0);

  /* Escaped names come back as they went in. */
  bool weird = false;
  for (size_t i = 0; i < d.n; i++) {
    char buf[64];
    if (span_is(d.evs[i].cat, "msg") && unescape(d.evs[i].name, buf, sizeof buf) &&
        strcmp(buf, WEIRD) == 0)
      weird = true;
  }
  assert_true(weird);

  /* Strays became instants; the instant off every track is global. */
  assert_int_equal(count(&d, "i", "lost"), 1);
  assert_int_equal(count(&d, "i", "run end without run"), 1);
  assert_int_equal(count(&d, "i", "time jump"), 1);
  size_t global = 0;
  for (size_t i = 0; i < d.n; i++)
    if (span_is(d.evs[i].scope, "g")) global += span_is(d.evs[i].name, "FAIL: test");
  assert_int_equal(global, 1);

  /* The timeout: its instant carries the flow id, its flow end that id too. */
  size_t timeouts = 0;
  for (size_t i = 0; i < d.n; i++)
    if (span_is(d.evs[i].ph, "f") && span_is(d.evs[i].id, "0xabcdef0100000009"))
      timeouts += d.evs[i].bp.s == NULL;
  assert_int_equal(timeouts, 1);
  assert_non_null(strstr(text, "\"flow\":\"0xabcdef0100000009\""));

  /* Close ended the four open slices at its own time. */
  size_t at_end = 0;
  for (size_t i = 0; i < d.n; i++)
    if (span_is(d.evs[i].ph, "E")) at_end += span_is(d.evs[i].ts, "1234567890.123");
  assert_int_equal(at_end, 4);

  free(text);
}

static void test_empty(void **state) {
  (void)state;
  char path[256];
  temp_path(path, sizeof path);
  sh_simtrace *t = NULL;
  assert_int_equal(sh_simtrace_open(path, 0, &t), 0);
  assert_int_equal(sh_simtrace_close(t, 0), 0);
  size_t len;
  char *text = slurp(path, &len);
  unlink(path); /* before any check can fail */
  static doc d;
  static ev evs[MAX_EVENTS];
  assert_true(parse_doc(&d, text, len, evs, MAX_EVENTS));
  assert_true(d.has_events && d.unit_ns);
  assert_true(has_meta(&d, "thread_name", 0, "outside"));
  assert_int_equal(count(&d, "B", NULL), 0);
  free(text);
}

static void test_open_errors(void **state) {
  (void)state;
  sh_simtrace *t = NULL;
  assert_int_equal(sh_simtrace_open("/nonexistent-sh-dir/trace.json", 2, &t), -ENOENT);
  const char *dir = getenv("TMPDIR");
  assert_true(sh_simtrace_open(dir != NULL && dir[0] != '\0' ? dir : "/tmp", 2, &t) < 0);
  assert_int_equal(sh_simtrace_open(NULL, 2, &t), -EINVAL);
  assert_int_equal(sh_simtrace_open("x", UINT32_MAX, &t), -EINVAL);
}

/* A full disk shows at close, where the buffer is flushed. */
static void test_write_error(void **state) {
  (void)state;
  if (access("/dev/full", W_OK) != 0) skip();
  sh_simtrace *t = NULL;
  assert_int_equal(sh_simtrace_open("/dev/full", 2, &t), 0);
  write_stream(t);
  assert_int_equal(sh_simtrace_close(t, END_NS), -ENOSPC);
}

static void test_null_trace(void **state) {
  (void)state;
  sh_simtrace_event(NULL, 1, 0, SH_TRACE_RUN, 1, "x", 0);
  sh_simtrace_event(NULL, 2, 0, SH_TRACE_RUN_END, 1, "x", 0);
  sh_simtrace_instant(NULL, 3, 0, "x");
  assert_int_equal(sh_simtrace_close(NULL, 4), 0);
}

/* The checks above are only as good as the parser: it must refuse these. */
static void test_parser(void **state) {
  (void)state;
  assert_true(json_ok("{\"a\":[1,-2.5e3,0,true,false,null,{\"b\":\"\\u00e9\\n\"}],\"c\":{}}"));
  assert_true(json_ok(" [ ] "));
  static const char *bad[] = {
      "{\"a\":1,}", "[1 2]", "{\"a\":\"x\\q\"}", "{\"a\":01}", "{\"a\":\"t\tb\"}",
      "{\"a\":1}x", "{\"a\":[1,]}", "{\"a\":tru}", "{", "\"abc", "{a:1}", "{\"a\" 1}",
      "[1.]", "[-]", "{\"a\":\"\\u12g4\"}", "", "[1e]", "{\"a\":1 \"b\":2}", "[\"a\"\"b\"]",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (json_ok(bad[i])) fail_msg("accepted: %s", bad[i]);
  }
  /* Nesting deeper than the parser's bound is refused, not a stack overflow. */
  char deep[2 * MAX_DEPTH + 3];
  memset(deep, '[', MAX_DEPTH + 1);
  memset(deep + MAX_DEPTH + 1, ']', MAX_DEPTH + 1);
  deep[2 * MAX_DEPTH + 2] = '\0';
  assert_false(json_ok(deep));
  deep[1] = ']';
  deep[2] = '\0';
  assert_true(json_ok(deep));
}

int main(void) {
  alarm(60); /* a hang fails instead of blocking the suite */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parser),      cmocka_unit_test(test_stream),
      cmocka_unit_test(test_empty),       cmocka_unit_test(test_open_errors),
      cmocka_unit_test(test_write_error), cmocka_unit_test(test_null_trace),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
