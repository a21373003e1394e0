/*
 * The simulator's Chrome trace-event JSON writer.
 *
 * Slices are "B"/"E" pairs: nesting is then implied by order and no event
 * has to be held back until its end is known. Each track remembers only
 * whether a run and a message slice inside it are open, so an E is written
 * only for a B that was, and a stray RUN_END or DELIVER (a trace opened or
 * a fiber switched mid-run) becomes an instant instead of breaking the
 * nesting. Timestamps never go backwards in the file (an earlier one is
 * raised to the latest seen), so an E can never precede its own B.
 *
 * Flows are v1 flow events, matched by viewers on (cat, name, id): both
 * ends are named "ask". The id is written as a hex string because a 64-bit
 * number does not survive a JavaScript viewer's doubles.
 */
#include "trace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "nodemem.h"

/* Events are small; a large buffer turns them into few big writes. */
#define SH_SIMTRACE_BUF (1u << 20)

typedef struct sh_simtrack {
  bool run; /* a run slice is open */
  bool msg; /* a message slice is open inside it */
  uint32_t pid; /* its process: 0 (shown as 1) the simulation's own, else a node's */
} sh_simtrack;

struct sh_simtrace {
  FILE *f;
  char *buf;          /* f's buffer, freed after fclose */
  int err;            /* first write error (positive errno), 0 if none */
  bool first;         /* no event written yet: no comma before the next */
  uint64_t last_ns;   /* the latest timestamp written */
  uint32_t tracks;    /* workers + 1, then one per thread fiber added */
  sh_simtrack *track; /* [tracks] */
  uint64_t named[4];  /* processes whose name was written, a bit each */
};

/* Keeps the first error: the later ones are usually its consequences. */
static void note(sh_simtrace *t, int rc) {
  if (rc < 0 && t->err == 0) t->err = errno != 0 ? errno : EIO;
}

/* A JSON string: quote, backslash and control characters escaped; other
 * bytes go through as they are (names are C identifiers or UTF-8). */
static void put_str(sh_simtrace *t, const char *s) {
  if (s == NULL) s = "?";
  note(t, fputc('"', t->f) == EOF ? -1 : 0);
  for (size_t i = 0; s[i] != '\0' && i < 4096; i++) { /* names are short */
    unsigned char c = (unsigned char)s[i];
    int rc;
    if (c == '"' || c == '\\')
      rc = fprintf(t->f, "\\%c", c);
    else if (c < 0x20)
      rc = fprintf(t->f, "\\u%04x", c);
    else
      rc = fputc(c, t->f) == EOF ? -1 : 0;
    note(t, rc);
  }
  note(t, fputc('"', t->f) == EOF ? -1 : 0);
}

/* Opens an event: separator, phase, process, thread and (for ts != NULL)
 * the timestamp in microseconds with the nanoseconds as three decimals. */
static void open_event(sh_simtrace *t, char ph, uint32_t tid, const uint64_t *ns) {
  uint32_t pid = tid < t->tracks && t->track[tid].pid != 0 ? t->track[tid].pid : 1;
  note(t, fprintf(t->f, "%s{\"ph\":\"%c\",\"pid\":%" PRIu32 ",\"tid\":%" PRIu32,
                  t->first ? "" : ",\n", ph, pid, tid));
  t->first = false;
  if (ns == NULL) return;
  uint64_t v = *ns > t->last_ns ? *ns : t->last_ns;
  t->last_ns = v;
  note(t, fprintf(t->f, ",\"ts\":%" PRIu64 ".%03u", v / 1000, (unsigned)(v % 1000)));
}

static void close_event(sh_simtrace *t) { note(t, fputs("}", t->f)); }

/* ,"name":"..." */
static void put_name(sh_simtrace *t, const char *name) {
  note(t, fputs(",\"name\":", t->f));
  put_str(t, name);
}

static void meta(sh_simtrace *t, uint32_t tid, const char *what, const char *name) {
  open_event(t, 'M', tid, NULL);
  put_name(t, what);
  note(t, fputs(",\"args\":{\"name\":", t->f));
  put_str(t, name);
  note(t, fputs("}", t->f));
  close_event(t);
}

/* ,"text":"..." inside args, when there is a text (a message's own words,
 * a check's or a note's). */
static void put_text(sh_simtrace *t, const char *text) {
  if (text == NULL) return;
  note(t, fputs(",\"text\":", t->f));
  put_str(t, text);
}

static void begin(sh_simtrace *t, uint64_t ns, uint32_t tid, const char *cat, const char *name,
                  uint64_t house, const char *text) {
  open_event(t, 'B', tid, &ns);
  put_name(t, name);
  note(t, fprintf(t->f, ",\"cat\":\"%s\",\"args\":{\"house\":%" PRIu64, cat, house));
  put_text(t, text);
  note(t, fputs("}", t->f));
  close_event(t);
}

static void end(sh_simtrace *t, uint64_t ns, uint32_t tid) {
  open_event(t, 'E', tid, &ns);
  close_event(t);
}

/* A thread instant; `flow` != 0 is added as an argument. */
static void instant(sh_simtrace *t, uint64_t ns, uint32_t tid, const char *cat, const char *name,
                    uint64_t flow) {
  open_event(t, 'i', tid, &ns);
  put_name(t, name);
  note(t, fprintf(t->f, ",\"s\":\"t\",\"cat\":\"%s\"", cat));
  if (flow != 0) note(t, fprintf(t->f, ",\"args\":{\"flow\":\"0x%" PRIx64 "\"}", flow));
  close_event(t);
}

/* A flow end of flow `flow` (ask, net): `enclosing` binds it to the slice
 * open at ns (a reply's message), otherwise to the next slice on the track
 * (the timeout instant). */
static void flow_event(sh_simtrace *t, uint64_t ns, uint32_t tid, const char *flow, char ph,
                       uint64_t id, bool enclosing, const char *type, const char *text) {
  open_event(t, ph, tid, &ns);
  note(t, fprintf(t->f, ",\"name\":\"%s\",\"cat\":\"flow\",\"id\":\"0x%" PRIx64 "\"%s", flow,
                  id, enclosing && ph == 'f' ? ",\"bp\":\"e\"" : ""));
  note(t, fputs(",\"args\":{\"type\":", t->f));
  put_str(t, type);
  put_text(t, text);
  note(t, fputs("}", t->f));
  close_event(t);
}

static void end_msg(sh_simtrace *t, uint64_t ns, uint32_t tid) {
  if (!t->track[tid].msg) return;
  t->track[tid].msg = false;
  end(t, ns, tid);
}

static void end_run(sh_simtrace *t, uint64_t ns, uint32_t tid) {
  end_msg(t, ns, tid);
  if (!t->track[tid].run) return;
  t->track[tid].run = false;
  end(t, ns, tid);
}

/* A track's name and its place: viewers order tracks by the sort index
 * rather than by first appearance. Metadata may come anywhere in the file. */
static void name_track(sh_simtrace *t, uint32_t track, const char *name) {
  meta(t, track, "thread_name", name);
  open_event(t, 'M', track, NULL);
  note(t, fprintf(t->f, ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%" PRIu32 "}",
                  track));
  close_event(t);
}

int sh_simtrace_open(const char *path, uint32_t workers, sh_simtrace **out) {
  if (path == NULL || out == NULL || workers == UINT32_MAX) return -EINVAL;
  sh_simtrace *t = sh_simraw_calloc(1, sizeof *t);
  if (t == NULL) return -ENOMEM;
  t->tracks = workers + 1;
  t->track = sh_simraw_calloc(t->tracks, sizeof *t->track);
  t->buf = sh_simraw_malloc(SH_SIMTRACE_BUF);
  if (t->track == NULL || t->buf == NULL) {
    sh_simraw_free(t->track);
    sh_simraw_free(t->buf);
    sh_simraw_free(t);
    return -ENOMEM;
  }
  t->f = fopen(path, "w");
  if (t->f == NULL) {
    int err = errno != 0 ? errno : EIO;
    sh_simraw_free(t->track);
    sh_simraw_free(t->buf);
    sh_simraw_free(t);
    return -err;
  }
  setvbuf(t->f, t->buf, _IOFBF, SH_SIMTRACE_BUF);
  t->first = true;
  note(t, fputs("{\"traceEvents\":[\n", t->f));
  meta(t, 0, "process_name", "stackhouse sim");
  for (uint32_t i = 0; i < t->tracks; i++) {
    char name[32];
    if (i < workers)
      snprintf(name, sizeof name, "worker %" PRIu32, i);
    else
      snprintf(name, sizeof name, "outside");
    name_track(t, i, name);
  }
  *out = t;
  return 0;
}

int sh_simtrace_track(sh_simtrace *t, uint32_t track, const char *name) {
  return sh_simtrace_track_in(t, track, name, 0, NULL);
}

/* Process pid's name, once. */
static void name_process(sh_simtrace *t, uint32_t pid, uint32_t track, const char *process) {
  if (pid / 64 >= sizeof(t->named) / sizeof(t->named[0]) || (t->named[pid / 64] >> (pid % 64) & 1))
    return;
  t->named[pid / 64] |= 1ull << (pid % 64);
  meta(t, track, "process_name", process);
  open_event(t, 'M', track, NULL);
  note(t, fprintf(t->f, ",\"name\":\"process_sort_index\",\"args\":{\"sort_index\":%" PRIu32 "}",
                  pid));
  close_event(t);
}

int sh_simtrace_track_in(sh_simtrace *t, uint32_t track, const char *name, uint32_t pid,
                         const char *process) {
  if (t == NULL) return 0;
  if (track == UINT32_MAX) return -EINVAL;
  if (track >= t->tracks) {
    sh_simtrack *n = sh_simraw_realloc(t->track, ((size_t)track + 1) * sizeof *n);
    if (n == NULL) return -ENOMEM;
    for (uint32_t i = t->tracks; i <= track; i++) n[i] = (sh_simtrack){0};
    t->track = n;
    t->tracks = track + 1;
  }
  /* A track taken by a fiber of another process: what it had open ends. */
  if (t->track[track].pid != pid) end_run(t, t->last_ns, track);
  t->track[track].pid = pid;
  if (pid != 0 && process != NULL) name_process(t, pid, track, process);
  name_track(t, track, name);
  return 0;
}

void sh_simtrace_track_end(sh_simtrace *t, uint64_t ns, uint32_t track) {
  if (t == NULL || track >= t->tracks) return;
  end_run(t, ns, track);
}

void sh_simtrace_span(sh_simtrace *t, uint64_t ns, uint32_t track, bool start, uint64_t id,
                      const char *cat, const char *name) {
  if (t == NULL) return;
  open_event(t, start ? 'b' : 'e', track, &ns);
  put_name(t, name);
  note(t, fprintf(t->f, ",\"cat\":\"%s\",\"id\":\"0x%" PRIx64 "\"", cat, id));
  close_event(t);
}

void sh_simtrace_event(sh_simtrace *t, uint64_t ns, uint32_t track, sh_trace_kind kind,
                       uint64_t house, const char *name, uint64_t id) {
  sh_simtrace_event_text(t, ns, track, kind, house, name, id, NULL);
}

void sh_simtrace_event_text(sh_simtrace *t, uint64_t ns, uint32_t track, sh_trace_kind kind,
                            uint64_t house, const char *name, uint64_t id, const char *text) {
  /* No state for a track that does not exist: nothing to nest it in. */
  if (t == NULL || track >= t->tracks) return;
  sh_simtrack *tr = &t->track[track];
  switch (kind) {
  case SH_TRACE_RUN:
    end_run(t, ns, track); /* a run never nests in a run on one fiber */
    begin(t, ns, track, "run", name, house, NULL);
    tr->run = true;
    break;
  case SH_TRACE_DELIVER:
    if (!tr->run) {
      instant(t, ns, track, "unmatched", name, 0);
      break;
    }
    end_msg(t, ns, track);
    begin(t, ns, track, "msg", name, house, text);
    tr->msg = true;
    break;
  case SH_TRACE_RUN_END:
    if (!tr->run)
      instant(t, ns, track, "unmatched", "run end without run", 0);
    else
      end_run(t, ns, track);
    break;
  case SH_TRACE_ASK:
    flow_event(t, ns, track, "ask", 's', id, true, name, text);
    break;
  case SH_TRACE_REPLY:
    flow_event(t, ns, track, "ask", 'f', id, true, name, text);
    break;
  case SH_TRACE_TIMEOUT:
    /* The end first: it binds to the next slice, the instant right after. */
    flow_event(t, ns, track, "ask", 'f', id, false, name, NULL);
    instant(t, ns, track, "timeout", name, id);
    break;
  default:
    instant(t, ns, track, "unmatched", "unknown trace kind", 0);
    break;
  }
}

/* A slice of its own holds the arrow's end: the track may have none open
 * (a worker polling between runs), and its B/E pair leaves the nesting of
 * the run and message slices as it was. */
void sh_simtrace_net(sh_simtrace *t, uint64_t ns, uint32_t track, bool send, uint64_t id,
                     const char *what) {
  if (t == NULL || track >= t->tracks) return;
  open_event(t, 'B', track, &ns);
  put_name(t, send ? "net send" : "net arrival");
  note(t, fputs(",\"cat\":\"net\"", t->f));
  close_event(t);
  flow_event(t, ns, track, "net", send ? 's' : 'f', id, true, what, NULL);
  end(t, ns, track);
}

void sh_simtrace_instant(sh_simtrace *t, uint64_t ns, uint32_t track, const char *name) {
  sh_simtrace_mark(t, ns, track, "sim", name, NULL);
}

void sh_simtrace_mark(sh_simtrace *t, uint64_t ns, uint32_t track, const char *cat,
                      const char *name, const char *text) {
  if (t == NULL) return;
  bool on_track = track < t->tracks;
  /* Off every track: a global instant, drawn across the whole trace. */
  open_event(t, 'i', on_track ? track : 0, &ns);
  put_name(t, name);
  note(t, fputs(on_track ? ",\"s\":\"t\",\"cat\":" : ",\"s\":\"g\",\"cat\":", t->f));
  put_str(t, cat);
  if (text != NULL) {
    note(t, fputs(",\"args\":{\"text\":", t->f));
    put_str(t, text);
    note(t, fputs("}", t->f));
  }
  close_event(t);
}

int sh_simtrace_close(sh_simtrace *t, uint64_t ns) {
  if (t == NULL) return 0;
  for (uint32_t i = 0; i < t->tracks; i++) end_run(t, ns, i);
  note(t, fputs("\n],\"displayTimeUnit\":\"ns\"}\n", t->f));
  note(t, fflush(t->f) == EOF ? -1 : 0);
  note(t, fclose(t->f) == EOF ? -1 : 0);
  int err = t->err;
  sh_simraw_free(t->buf);
  sh_simraw_free(t->track);
  sh_simraw_free(t);
  return -err;
}
