/*
 * What a scenario's trace file tells besides the runtime's own events
 * (docs/simulator.md, "Traces"), read back with the trace JSON parser:
 *
 *   - a message type that describes itself (SH_MSG_DEFINE_DESCRIBED): its
 *     words are the "text" argument of the message's slice and of the ask's
 *     flow ends, for the ask and for its reply; the hook is called only
 *     while a trace is written, and the trace hash is the same with and
 *     without the file (the words are never hashed);
 *   - a failed check (SH_SCN_CHECK): an instant "check failed: FILE:LINE:
 *     message" on the track of the fiber that checked, inside the run of
 *     the actor that checked;
 *   - a note (sh_scn_note): an instant named by its text, likewise;
 *   - a failure the simulator detects (a deadlock): an instant "FAIL:
 *     deadlock" with the failure's detail, on a fiber's track.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <stackhouse/scenario.h>
#include <stackhouse/sim.h>

#include "support/tracejson.h"

#define WORKERS 2
#define EVENTS_MAX 65536
#define DEPTH_MAX 16

/* ---- a scenario with described messages, a note and a failing check ------ */

typedef struct kv_ask {
  sh_msg hdr;
  uint32_t key, value;
} kv_ask;

typedef struct kv_sum {
  sh_msg hdr;
  uint32_t sum;
} kv_sum;

/* Calls of the describe hooks: the simulator runs on this one thread. */
static unsigned describe_calls;

static int kv_ask_describe(const sh_msg *m, char *buf, size_t n) {
  const kv_ask *a = (const kv_ask *)m;
  describe_calls++;
  return snprintf(buf, n, "key=%u value=%u", a->key, a->value);
}

static int kv_sum_describe(const sh_msg *m, char *buf, size_t n) {
  describe_calls++;
  return snprintf(buf, n, "sum=%u", ((const kv_sum *)m)->sum);
}

SH_MSG_DEFINE_DESCRIBED(kv_ask, SH_ASK, 0, kv_ask_describe);
SH_MSG_DEFINE_DESCRIBED(kv_sum, SH_REPLY, 0, kv_sum_describe);

/* The last word, in no words: a type without the hook. */
typedef struct kv_bye {
  sh_msg hdr;
} kv_bye;
SH_MSG_DEFINE(kv_bye, SH_NOTICE, 0);

static sh_yield adder_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  const kv_ask *a = sh_stack_msg_as(st, kv_ask);
  kv_sum *r = sh_msg_new(kv_sum, .sum = a->key + a->value);
  return r != NULL ? sh_return(st, &r->hdr) : sh_throw(st, -ENOMEM);
}

/* kv_bye ends the workload. */
static sh_yield adder_notice(sh_actor *self, sh_stack *st) {
  sh_scn_done(sh_scn_of(self), sh_actor_system(self));
  return sh_return(st, NULL);
}

static const sh_actor_class adder_class = {
    .name = "adder",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .ask = adder_ask,
    .notice = adder_notice,
};

typedef struct marker_locals {
  sh_future *f;
} marker_locals;

static const sh_addr *adder;

/* Notes its round, asks 7 + 42, checks (and fails, on purpose) that the
 * sum is 0, then says bye to the adder. */
static sh_yield marker_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  marker_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    sh_scn_note(s, "round %u", 1u);
    l->f = sh_ask(st, adder, &sh_msg_new(kv_ask, .key = 7, .value = 42)->hdr, SH_FOREVER);
    if (!SH_SCN_CHECK(s, l->f != NULL, "sh_ask failed")) return sh_return(st, NULL);
    return sh_suspend(st, 1);
  }
  const kv_sum *r = sh_future_reply(l->f, kv_sum);
  SH_SCN_CHECK(s, r != NULL && r->sum == 0, "deliberate: sum %u", r != NULL ? r->sum : 0);
  kv_bye *bye = sh_msg_new(kv_bye);
  int rc = bye != NULL ? sh_notice(adder, &bye->hdr) : -ENOMEM;
  if (!SH_SCN_CHECK(s, rc == 0, "bye not sent: %d", rc)) sh_scn_done(s, sh_actor_system(self));
  return sh_return(st, NULL);
}

static const sh_actor_class marker_class = {
    .name = "marker",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(marker_locals),
    .init = sh_scn_actor_init,
    .notice = marker_notice,
};

static int marks_setup(sh_scn *s, sh_system *sys) {
  const sh_addr *m;
  int rc = sh_scn_spawn_on(s, sys, &adder_class, 1, 1, &adder);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &marker_class, 0, 0, &m);
  return rc != 0 ? rc : sh_scn_kick(m);
}

static const sh_scenario trace_marks = {
    .name = "trace_marks",
    .summary = "a described ask and reply, a note and a failing check, for the trace",
    .workers = WORKERS,
    .flags = SH_SCN_HIDDEN | SH_SCN_SIM_ONLY,
    .expect = "invariant",
    .setup = marks_setup,
};
SH_SCENARIO(trace_marks);

/* ---- helpers ----------------------------------------------------------------- */

static void temp_path(char *buf, size_t cap) {
  const char *dir = getenv("TMPDIR");
  if (dir == NULL || dir[0] == '\0') dir = "/tmp";
  assert_true(snprintf(buf, cap, "%s/sh_marks_XXXXXX", dir) < (int)cap);
  int fd = mkstemp(buf);
  assert_true(fd >= 0);
  close(fd);
}

typedef struct trace {
  char *text;
  doc d;
  ev *evs;
} trace;

/* Reads and parses the trace file at path, then removes it. */
static void load(trace *t, const char *path) {
  size_t len = 0;
  t->text = slurp_file(path, &len);
  unlink(path);
  assert_non_null(t->text);
  t->evs = calloc(EVENTS_MAX, sizeof *t->evs);
  assert_non_null(t->evs);
  assert_true(parse_doc(&t->d, t->text, len, t->evs, EVENTS_MAX));
  assert_true(t->d.total <= EVENTS_MAX);
}

static void unload(trace *t) {
  free(t->text);
  free(t->evs);
}

static unsigned tid_of(const ev *e) {
  unsigned v = 0;
  assert_non_null(e->tid.s);
  assert_int_equal(sscanf(e->tid.s, "%u", &v), 1);
  return v;
}

/* The first event of phase ph and category cat whose name begins with
 * name and whose text is text (NULL: any); its index, or -1. */
static long find(const doc *d, const char *ph, const char *cat, const char *name,
                 const char *text) {
  for (size_t i = 0; i < d->n; i++) {
    const ev *e = &d->evs[i];
    if (!span_is(e->ph, ph) || (cat != NULL && !span_is(e->cat, cat))) continue;
    if (name != NULL && !span_starts(e->name, name)) continue;
    if (text != NULL && !span_is(e->argtext, text)) continue;
    return (long)i;
  }
  return -1;
}

/* The run slice open on event i's track when i happens: its name, checked
 * to be `cls`. Walks the slices of that track from the start. */
static void assert_in_run(const doc *d, long i, const char *cls) {
  assert_true(i >= 0);
  unsigned tid = tid_of(&d->evs[i]);
  const ev *open[DEPTH_MAX];
  size_t depth = 0;
  for (long j = 0; j < i; j++) {
    const ev *e = &d->evs[j];
    if (span_is(e->ph, "M") || span_is(e->scope, "g") || tid_of(e) != tid) continue;
    if (span_is(e->ph, "B")) {
      assert_true(depth < DEPTH_MAX);
      open[depth++] = e;
    } else if (span_is(e->ph, "E")) {
      assert_true(depth > 0);
      depth--;
    }
  }
  assert_true(depth > 0 && span_is(open[0]->cat, "run") && span_is(open[0]->name, cls));
}

static uint64_t run_marks(const char *trace_path, sh_scn_result *r) {
  sh_sim_options o;
  sh_sim_options_default(&o);
  o.seed = 7;
  o.trace_path = trace_path;
  sh_sim_configure(&o);
  sh_scenario_run(sh_scenario_find("trace_marks"), o.seed, 0, r);
  sh_sim_report rep;
  sh_sim_report_get(&rep);
  return rep.hash;
}

/* ---- tests --------------------------------------------------------------------- */

static void test_described_messages(void **state) {
  (void)state;
  sh_scn_result r;
  describe_calls = 0;
  uint64_t plain = run_marks(NULL, &r);
  assert_int_equal(describe_calls, 0); /* untraced: the hooks are never asked */
  char path[256];
  temp_path(path, sizeof path);
  uint64_t traced = run_marks(path, &r);
  assert_true(describe_calls > 0);
  assert_true(plain == traced); /* the words are not hashed, the run is the same */
  assert_false(r.ok);
  assert_string_equal(r.kind, "invariant");
  trace t;
  load(&t, path);
  const doc *d = &t.d;
  assert_true(find(d, "B", "msg", "kv_ask", "key=7 value=42") >= 0);
  assert_true(find(d, "s", "flow", "ask", "key=7 value=42") >= 0);
  assert_true(find(d, "B", "msg", "kv_sum", "sum=49") >= 0);
  assert_true(find(d, "f", "flow", "ask", "sum=49") >= 0);
  /* The framework's start notice describes itself; a type without the
   * hook has no text. */
  assert_true(find(d, "B", "msg", "sh_scn_go", "n=0") >= 0);
  long bye = find(d, "B", "msg", "kv_bye", NULL);
  assert_true(bye >= 0 && d->evs[bye].argtext.s == NULL);
  unload(&t);
}

static void test_check_and_note(void **state) {
  (void)state;
  sh_scn_result r;
  char path[256];
  temp_path(path, sizeof path);
  run_marks(path, &r);
  trace t;
  load(&t, path);
  const doc *d = &t.d;
  long note = find(d, "i", "note", "round 1", "round 1");
  assert_true(note >= 0 && span_is(d->evs[note].scope, "t"));
  assert_true(tid_of(&d->evs[note]) < WORKERS);
  assert_in_run(d, note, "marker");
  long check = find(d, "i", "check", "check failed: test_sim_trace_marks.c:", NULL);
  assert_true(check > note);
  char name[400];
  assert_true(unescape(d->evs[check].name, name, sizeof name));
  assert_non_null(strstr(name, "deliberate: sum 49"));
  assert_non_null(strstr(r.detail, "deliberate: sum 49"));
  assert_true(tid_of(&d->evs[check]) < WORKERS);
  assert_in_run(d, check, "marker");
  unload(&t);
}

static void test_sim_failure_drawn(void **state) {
  (void)state;
  char path[256];
  temp_path(path, sizeof path);
  sh_sim_options o;
  sh_sim_options_default(&o);
  o.trace_path = path;
  sh_sim_result r;
  assert_int_equal(sh_sim_run("test_deadlock", &o, &r), 0);
  assert_string_equal(r.kind, "deadlock");
  trace t;
  load(&t, path);
  long fail = find(&t.d, "i", "fail", "FAIL: deadlock", NULL);
  assert_true(fail >= 0 && span_is(t.d.evs[fail].scope, "t"));
  char text[300];
  assert_true(unescape(t.d.evs[fail].argtext, text, sizeof text));
  assert_string_equal(text, r.detail);
  unload(&t);
}

int main(void) {
  alarm(120); /* a hang fails instead of blocking the suite */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_described_messages),
      cmocka_unit_test(test_check_and_note),
      cmocka_unit_test(test_sim_failure_drawn),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
