/*
 * shsim's commands and their help: `shsim --help` is the overview,
 * `shsim COMMAND --help` and `shsim help COMMAND` one command with only the
 * options it accepts (args.c's table), `shsim --version` the version.
 */
#include <stdio.h>
#include <string.h>

#include <stackhouse/stackhouse.h>

#include "args.h"
#include "replayfile.h"

typedef struct cmd_def {
  const char *name;
  unsigned bit;
  const char *synopsis; /* after "shsim NAME" */
  const char *about;    /* what it does, lines of text */
} cmd_def;

static const cmd_def cmds[] = {
    {"list", ARGS_CMD_LIST, "[--all]",
     "The visible scenarios; --all adds the hidden test scenarios and the\n"
     "failure each must end with.\n"},
    {"run", ARGS_CMD_RUN, "SCENARIO --seed N [options]",
     "One simulation. The last line of stdout is\n"
     "  scenario=NAME seed=N result=ok|FAIL:<kind> hash=0x<16 hex> steps=S vtime_ns=T msgs=M\n"
     "Exit status 1 on failure (its detail goes to stderr).\n"},
    {"sweep", ARGS_CMD_SWEEP, "SCENARIO|all --seeds A..B|N [options]",
     "Every seed of the range (inclusive) of one scenario or of every visible\n"
     "one, with the same options, on parallel children; then a table per\n"
     "scenario, the failures grouped (scenario, kind, place, message with its\n"
     "numbers masked; the lowest failing seed of each) and every failure with\n"
     "the commands that replay and shrink it. Exit status 1 if a run failed.\n"},
    {"shrink", ARGS_CMD_SHRINK, "SCENARIO --seed N [options]",
     "Runs a failing seed, records its choice sequence (every switch between\n"
     "fibers, every fault that fired, every value the scenario and the network\n"
     "drew), then cuts it down by delta debugging to the choices the failure\n"
     "needs (replayed where unnamed: no switch at a yield point, the lowest\n"
     "runnable fiber where one must run, no fault, a draw of 0) and lowers the\n"
     "values drawn toward 0. Writes the replay file (the whole shrunk run) and\n"
     "prints its replay command.\n"},
    {"replay", ARGS_CMD_REPLAY, "FILE [options]",
     "Runs a replay file (written by --record, --out or shrink) again: its\n"
     "scenario, seed, options and decisions (draws included); prints the run\n"
     "line and whether the run matches the recording: result, hash and each\n"
     "decision (the first that differs is named). Exit status 3 if it\n"
     "diverged, else the run's own. A file of another binary or format is\n"
     "refused.\n"},
    {"fuzz", ARGS_CMD_FUZZ, "SCENARIO|all --seeds A..B [options]",
     "A sweep where each seed draws its own strategy (any of the five), switch\n"
     "rate, PCT depth and steps, weak memory, atomic points, worker count\n"
     "(unless the scenario declares its own) and, for scenarios that use the\n"
     "network, network weather (swarm testing): one seed names one exact run.\n"
     "Failures are grouped as by sweep, each group with the command that\n"
     "replays its lowest seed. Exit status 1 if a run failed; 128 + the signal\n"
     "when stopped by SIGINT or SIGTERM (after writing what it found).\n"},
    {"explore", ARGS_CMD_EXPLORE, "SCENARIO|all --seeds A..B [--runs N] [options]",
     "Coverage-guided exploration: a free run of each seed, then runs that\n"
     "replay mutants of the choice sequences that reached new coverage (code\n"
     "edges in a `make explore` build, the runtime's sometimes-points in any)\n"
     "mixed with free runs of new seeds, each seed drawing its options as fuzz\n"
     "does. Stops at the first failure, with its replay file (in --out DIR,\n"
     "else here) and the commands that replay and shrink it; reports the\n"
     "sometimes-points no run reached. Exit status 1 if a run failed.\n"},
    {"merge", ARGS_CMD_MERGE, "FILE.json... [--json FILE] [--junit FILE]",
     "The totals and failure groups of the JSON summaries of several shards of\n"
     "one campaign (sweep or fuzz), as one. Refuses a shard given twice and\n"
     "names the shards missing. Exit status 1 if a run failed, 2 if a file\n"
     "cannot be merged.\n"},
};
#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

unsigned args_cmd_find(const char *name) {
  for (size_t i = 0; name != NULL && i < NCMDS; i++)
    if (strcmp(cmds[i].name, name) == 0) return cmds[i].bit;
  return 0;
}

const char *args_cmd_name(unsigned cmd) {
  for (size_t i = 0; i < NCMDS; i++)
    if (cmds[i].bit == cmd) return cmds[i].name;
  return NULL;
}

void args_version(FILE *f) {
  /* The library's version, as linked: a shsim built against another
   * library says so. */
  fprintf(f, "shsim %s (binary 0x%016llx)\n", sh_version(), (unsigned long long)replayfile_binary());
}

static void overview(FILE *f) {
  fprintf(f, "usage: shsim COMMAND ...   (shsim help COMMAND, shsim COMMAND --help)\n");
  for (size_t i = 0; i < NCMDS; i++) fprintf(f, "       shsim %s %s\n", cmds[i].name, cmds[i].synopsis);
  fprintf(f, "       shsim --version\n\n"
             "Failure kinds: those of the simulator (deadlock, livelock, vtime, socket), of\n"
             "the scenario (invariant, setup), and assert, crash, sanitizer, leak, exit, hang,\n"
             "nondeterministic, blocking, thread.\n"
             "Exit status 2: usage error, or shsim itself could not run.\n");
}

void args_usage(FILE *f, unsigned cmd) {
  const cmd_def *d = NULL;
  for (size_t i = 0; i < NCMDS; i++)
    if (cmds[i].bit == cmd) d = &cmds[i];
  if (d == NULL) {
    overview(f);
    return;
  }
  fprintf(f, "usage: shsim %s %s\n\n%s\noptions:\n", d->name, d->synopsis, d->about);
  args_options_help(f, cmd);
}
