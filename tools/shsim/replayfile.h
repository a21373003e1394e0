/*
 * Replay files: one run, self-described, so that `shsim replay FILE` can run
 * it again. Text, one item a line:
 *
 *   # comments
 *   KEY=VALUE          the header: format, binary, scenario, seed, strategy,
 *                      workers and the simulator's options (replayfile.c)
 *   STEP KIND WHAT [VALUE] [@WHERE] [h=HASH]
 *                      one decision of the run a line, in order: KIND is
 *                      preempt or forced (WHAT: the fiber run next),
 *                      fault (WHAT: the point's id, 0x and 8 hex digits),
 *                      stale (WHAT: the load's rank) or draw (STEP: the
 *                      draw's number in its stream, WHAT the stream, VALUE
 *                      the value); WHERE the scheduling point and HASH the
 *                      trace hash before the decision, so that a replay that
 *                      goes another way is named where it parts
 *   decisions=N        how many decisions precede it: a file cut short (its
 *                      writer killed) is told from a whole one
 *   result=ok|FAIL:K   the outcome, after the decisions, with hash= and
 *                      steps=: the parent adds it, since it is the one that
 *                      classifies a child's death
 *
 * The decisions of a crashing run must still reach the file, so a child
 * formats the header before its run and writes the file with write(2) only.
 * Files of plain "STEP FIBER KIND" lines (KIND 0 preempt, 1 forced, 2 fault)
 * are read too.
 */
#ifndef SHSIM_REPLAYFILE_H
#define SHSIM_REPLAYFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stackhouse/sim.h>

/* 2: decisions carry their context (@WHERE h=HASH) and the values drawn
 * (draw lines); a format 1 file has neither, and is refused. */
#define REPLAYFILE_FORMAT 2

/* What a replay needs to know of a run, besides its decisions. */
typedef struct replay_run {
  const char *scenario;
  uint32_t workers;   /* as given to the scenario: 0 is its default */
  sh_sim_options o;   /* as configured: seed, strategy, bounds (schedule ignored) */
  const char *faults; /* the fault spec as given (NULL: none), carried as text */
} replay_run;

/* The outcome recorded after the decisions. */
typedef struct replay_outcome {
  bool known; /* the file has one */
  bool ok;
  char kind[32];
  uint64_t hash, steps;
} replay_outcome;

/* A file read back. Strings point into `text`. */
typedef struct replay_file {
  bool has_header;    /* a replay file, not a plain schedule */
  unsigned format;
  uint64_t binary;    /* the recording binary's identity (replayfile_binary) */
  replay_run run;
  replay_outcome outcome;
  sh_sim_choice *c;   /* the decisions (malloc'd) */
  sh_sim_decision_context *x; /* each one's context, as recorded (malloc'd) */
  bool has_context;   /* every decision line had its h= (a run's whole record) */
  size_t n;
  char *text;         /* the file's text, cut into strings (malloc'd) */
  const char *unknown; /* the first header key this shsim does not know, or NULL */
  uint64_t declared;  /* decisions=N: how many decisions the writer wrote */
  bool has_declared;  /* ... if the file says (a whole replay file does) */
  bool incomplete;    /* incomplete=1: the run outgrew the simulator's record */
} replay_file;

/* This binary's identity: its build id if the linker gave it one, the
 * library's version and the table of scenarios, hashed. */
uint64_t replayfile_binary(void);

/* In a child, before its run: the header for replayfile_record. */
void replayfile_prepare(const replay_run *r);

/* Writes the prepared header and the current run's decisions to path
 * (nothing if NULL). Async-signal-safe (open, write, close, no stdio): it
 * also runs in a fatal-signal handler, so that a run that asserts can be
 * replayed and shrunk too. */
void replayfile_record(const char *path);

/* Adds the outcome to a file replayfile_record wrote. 0 or -errno. */
int replayfile_add_outcome(const char *path, const replay_outcome *out);

/* Reads a file. 0, -errno, or -EINVAL for a bad line (its number to *line). */
int replayfile_load(const char *path, replay_file *f, size_t *line);

/* Whether f holds a whole run's record: its decisions=N says how many it
 * has and it has them, and the run did not outgrow the simulator's record. */
bool replayfile_whole(const replay_file *f);

void replayfile_free(replay_file *f);

#endif
