/*
 * shsim's command line: the command, its scenario, its options, and the
 * commands shsim prints for the user to paste (replay, shrink).
 */
#ifndef SHSIM_ARGS_H
#define SHSIM_ARGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <stackhouse/sim.h>

/* The commands, as bits: an option names those that accept it. */
enum {
  ARGS_CMD_LIST = 1u << 0,
  ARGS_CMD_RUN = 1u << 1,
  ARGS_CMD_SWEEP = 1u << 2,
  ARGS_CMD_SHRINK = 1u << 3,
  ARGS_CMD_FUZZ = 1u << 4,  /* a sweep whose seeds draw their own options (swarm.h) */
  ARGS_CMD_MERGE = 1u << 5, /* the JSON summaries of fuzz campaigns, as one */
  ARGS_CMD_REPLAY = 1u << 6, /* a replay file, run again (its name is the target) */
  ARGS_CMD_EXPLORE = 1u << 7, /* coverage-guided exploration of choice sequences */
};

struct sh_scenario;

/* explore's batches (explore.c): what a child runs as unit u, the scenario
 * and seed in place of the plan's, then the schedule to replay (in the
 * options) and the replay file's path. NULL for every other command. */
typedef struct args_batch {
  void (*pick)(void *ctx, uint64_t u, const struct sh_scenario **sc, uint64_t *seed);
  void (*options)(void *ctx, uint64_t u, sh_sim_options *o, const char **record_path);
  void *ctx;
} args_batch;

typedef struct args_seed_range {
  uint64_t lo, hi; /* inclusive */
} args_seed_range;

typedef struct args {
  unsigned cmd;       /* ARGS_CMD_* */
  const char *prog;   /* argv[0], so that printed commands can be pasted */
  const char *target; /* scenario name, or "all" (sweep) */
  args_seed_range seeds;
  sh_sim_options sim; /* seed and vtime limit set per run */
  uint32_t workers;   /* 0: the scenario's default */
  uint64_t jobs;
  uint64_t timeout_s;
  uint64_t hang_after_s; /* --hang-after, if given (see args_hang_real_ms) */
  bool check_determinism;
  bool all;
  const char *schedule_path; /* run: replay this schedule */
  const char *out_path;      /* shrink: where the shrunk schedule goes; sweep, fuzz: a
                                directory for the findings as they come */
  uint64_t max_trials;       /* shrink: replays at most */
  const char *record_path;   /* children write each run's replay file here */
  bool record_failed_only;   /* ... only a failed run's (a campaign's --out) */
  bool exact;                /* replay: sim and workers are the run's own, as recorded */
  bool any_binary;           /* replay, run --schedule: a file of another binary too */
  uint64_t shard_i, shard_n; /* seeds s with (s - lo) % shard_n == shard_i - 1 */
  uint64_t time_budget_s;    /* no new seed after this much real time (0: none) */
  uint64_t runs;             /* explore: runs at most (0: its default) */
  const args_batch *batch;   /* explore: the units of a batch (NULL otherwise) */
  const char *json_path;     /* sweep, fuzz, merge: the summary goes here */
  const char *junit_path;    /* sweep, fuzz, merge: JUnit XML goes here */
  char **files;              /* merge: the summaries */
  int nfiles;
  const char *given[32]; /* argv text of each option given, by index in the option table */
} args;

/* The command of that name (ARGS_CMD_*), or 0. */
unsigned args_cmd_find(const char *name);
const char *args_cmd_name(unsigned cmd); /* NULL for 0 */

/* The help of one command (cmd: ARGS_CMD_*), or the overview (0). */
void args_usage(FILE *f, unsigned cmd);

/* The options command cmd accepts, one or more lines each. */
void args_options_help(FILE *f, unsigned cmd);

/* "shsim VERSION (binary 0x...)" and a newline. */
void args_version(FILE *f);

/* The CPUs this process may run on (1..POOL_JOBS_MAX): --jobs's default. */
uint64_t args_cpus(void);

/* The options given that shape the runs (not the seeds, jobs, outputs):
 * names[i] and values[i], at most cap of them; their count. */
size_t args_run_options(const args *a, const char **names, const char **values, size_t cap);

/* Every option at its default; no command, no scenario. */
void args_default(args *a);

/* 0 and *a, 1 for --help (printed), or -EINVAL (reported on stderr). */
int args_parse(int argc, char **argv, args *a);

/* Sets option `name` ("--faults") to `value` as if given. 0, -ENOENT (no
 * such option for a run) or -EINVAL (reported). */
int args_set_option(args *a, const char *name, const char *value);

/* The text given for option `name`, or NULL (not given, or no such option). */
const char *args_given(const args *a, const char *name);

/* Prints (no newline) "PROG CMD NAME --seed SEED --strategy S" and the
 * options given that shape a run and that the commands in `mask` accept. */
void args_print_command(const args *a, const char *cmd, const char *name, uint64_t seed,
                        unsigned mask);

/* The same, to f. */
void args_fprint_command(FILE *f, const args *a, const char *cmd, const char *name, uint64_t seed,
                         unsigned mask);

/* A run's real-time hang bound in ms (sim.h's hang_real_ms): --hang-after's,
 * else the options'. */
uint64_t args_hang_real_ms(const args *a);

#endif
