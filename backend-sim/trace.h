/*
 * The simulator's Chrome trace-event JSON writer (`shsim run --trace F`).
 * The file opens in Perfetto (ui.perfetto.dev) or chrome://tracing: one
 * track per worker fiber (plus one for the outside fiber and one per thread
 * fiber), a slice per house run named by its actor class, nested slices per
 * message handled named by its type, flow arrows from each ask to its reply,
 * instants for timeouts, time jumps and failures. Timestamps are virtual
 * time.
 *
 * The simulator feeds it in the order things happen on its one thread;
 * every call is cheap when no file is open (t == NULL is allowed: no-op).
 */
#ifndef SH_SIM_TRACE_H
#define SH_SIM_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "plat.h"

typedef struct sh_simtrace sh_simtrace;

/* Creates `path` and writes the header (process and track names: tracks
 * 0..workers-1 are "worker N", track `workers` is "outside"). -errno on
 * failure. */
int sh_simtrace_open(const char *path, uint32_t workers, sh_simtrace **out);

/* Names track `track` (a thread fiber's, added after the open; tracks
 * between the last one and it exist unnamed). Events on a track that was
 * never opened or added are dropped (instants become global). -errno. */
int sh_simtrace_track(sh_simtrace *t, uint32_t track, const char *name);

/* sh_simtrace_track for a track of process `pid` (a node: 1 + its number;
 * 0: the simulation's own), named `process` the first time it shows. */
int sh_simtrace_track_in(sh_simtrace *t, uint32_t track, const char *name, uint32_t pid,
                         const char *process);
/* The fiber of `track` is gone (a crash): the slices it had open end. */
void sh_simtrace_track_end(sh_simtrace *t, uint64_t ns, uint32_t track);
/* An async span (a cut between nodes): its start or end; `id` pairs them. */
void sh_simtrace_span(sh_simtrace *t, uint64_t ns, uint32_t track, bool start, uint64_t id,
                      const char *cat, const char *name);

/* A core trace point (plat.h sh_trace_kind) on `track` at virtual time `ns`. */
void sh_simtrace_event(sh_simtrace *t, uint64_t ns, uint32_t track, sh_trace_kind kind,
                       uint64_t house, const char *name, uint64_t flow);

/* The same with `text` (NULL: none), a message's own words
 * (sh_msg_type.describe): an argument of the message's slice (DELIVER) or
 * of the flow's end (ASK, REPLY). */
void sh_simtrace_event_text(sh_simtrace *t, uint64_t ns, uint32_t track, sh_trace_kind kind,
                            uint64_t house, const char *name, uint64_t flow, const char *text);

/* A network flow arrow's end (net.c): send (true) on the sender's track
 * when it is sent, or its arrival on the receiver's; `id` joins the two,
 * `what` says what went (tcp, fin, connect, udp). */
void sh_simtrace_net(sh_simtrace *t, uint64_t ns, uint32_t track, bool send, uint64_t id,
                     const char *what);

/* An instant event named `name` (e.g. "park", "time jump", "FAIL: deadlock"). */
void sh_simtrace_instant(sh_simtrace *t, uint64_t ns, uint32_t track, const char *name);

/* An instant of category `cat` ("sim", "check", "note", "fail") with an
 * argument `text` (NULL: none); off every track, a global one. */
void sh_simtrace_mark(sh_simtrace *t, uint64_t ns, uint32_t track, const char *cat,
                      const char *name, const char *text);

/* Closes every open slice at `ns`, ends the JSON document, closes the file,
 * frees t. -errno if a write failed at any point. */
int sh_simtrace_close(sh_simtrace *t, uint64_t ns);

#endif
