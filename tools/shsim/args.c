/*
 * shsim's command line. Options are a table: each names the commands that
 * accept it and whether a printed replay command repeats it.
 */
#include "args.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool.h"

#define SEEDS_MAX 100000000ull     /* seeds in one range */
#define TIMEOUT_S_DEFAULT 600
#define SHRINK_TRIALS_DEFAULT 2000 /* replays one shrink may make */
#define CMD_SIM (ARGS_CMD_RUN | ARGS_CMD_SWEEP | ARGS_CMD_SHRINK)
#define CMD_ANY_SIM (CMD_SIM | ARGS_CMD_FUZZ) /* fuzz draws the others itself */
#define CMD_MANY (ARGS_CMD_SWEEP | ARGS_CMD_FUZZ)

static void usage(FILE *f) {
  fprintf(f,
          "usage: shsim list [--all]\n"
          "       shsim run SCENARIO --seed N [options]\n"
          "       shsim sweep SCENARIO|all --seeds A..B|N [--jobs J] [options]\n"
          "       shsim shrink SCENARIO --seed N [--out FILE] [--max-trials T] [options]\n"
          "       shsim replay FILE [--trace FILE.json] [--timeout-s S] [--any-binary]\n"
          "       shsim fuzz SCENARIO|all --seeds A..B [--jobs J] [--shard I/N]\n"
          "                  [--time-budget S] [--json FILE] [--steps-max N] [--check-determinism]\n"
          "       shsim merge FILE.json...\n"
          "options: --strategy random|pct|none  --workers K  --steps-max N\n"
          "         --switch-permille P  --pct-depth D  --pct-steps K  --check-determinism\n"
          "         --timeout-s S (real-time watchdog per run, default %d)\n"
          "         --hang-after S (FAIL:hang after S s of real time without a scheduling\n"
          "           point, default 10; 0: never)\n"
          "         --trace FILE.json (run only: Chrome trace-event JSON, for Perfetto)\n"
          "         --schedule FILE (run only: follow the decisions of a replay or schedule\n"
          "           file, with the options given on the command line)\n"
          "         --record FILE (run only: write the run's replay file)\n"
          "         --stale-permille P  a weak load that may read a value another fiber\n"
          "           overwrote lately reads it with probability P/1000, P <= 900 (default 0;\n"
          "           fuzz draws 0, 250 or 750 per seed)\n"
          "         --atomic-points 1  every atomic store and read-modify-write of the\n"
          "           runtime is also a scheduling point (default 0; fuzz draws 0 or 1)\n"
          "         --faults 'PATTERN:P[,PATTERN:P...]' fault points (libfiu names, a\n"
          "           trailing * matches any rest) fire with probability P (0..1), decided by\n"
          "           the seed: e.g. 'sh/pool/*:0.01,sh/timer/new:0.001' (fuzz: each seed\n"
          "           scales each rate by 0, 0.1, 1 or 10)\n"
          "\n"
          "list: the visible scenarios; --all adds the hidden test scenarios and the\n"
          "  failure each must end with.\n"
          "run: one simulation. The last line of stdout is\n"
          "  scenario=NAME seed=N result=ok|FAIL:<kind> hash=0x<16 hex> steps=S vtime_ns=T msgs=M\n"
          "  Exit status 1 on failure (its detail goes to stderr).\n"
          "sweep: every seed of the range (inclusive) of one scenario or of every visible\n"
          "  one, on J parallel children (default: one per CPU); then a table per scenario\n"
          "  and each failure with the command that replays it. Exit status 1 if any run\n"
          "  failed.\n"
          "shrink: runs a failing seed, records its choice sequence (every switch between\n"
          "  fibers, every fault that fired, every value the scenario and the network\n"
          "  drew), then cuts it down by delta debugging to those the failure needs\n"
          "  (replayed where unnamed: no switch at a yield point, the lowest runnable\n"
          "  fiber where one must run, no fault, a draw of 0) and lowers the values\n"
          "  drawn toward 0. Writes the replay file FILE (default SCENARIO-SEED.replay)\n"
          "  and prints the replay command.\n"
          "replay: runs a replay file (written by --record or shrink) again: its\n"
          "  scenario, seed, options and decisions (draws included); prints the run line\n"
          "  and whether the run matches the recording: result, hash and each decision\n"
          "  (the first that differs is named). Exit status: 3 if it diverged, else the\n"
          "  run's own. A file of another binary is refused unless --any-binary.\n"
          "fuzz: a sweep where each seed draws its own strategy, switch rate, PCT depth\n"
          "  and steps and worker count (swarm testing): one seed names one exact run, and\n"
          "  each failure prints the command that replays it. --shard I/N runs the seeds s\n"
          "  with (s - A) %% N == I - 1 only; --time-budget S starts no seed after S seconds;\n"
          "  --json FILE writes a summary. Failures are grouped by kind and detail.\n"
          "merge: the groups and totals of several fuzz summaries (--json files).\n"
          "--check-determinism runs each seed twice: FAIL:nondeterministic if the two\n"
          "runs differ, naming the first decision (step, kind, fibers, scheduling point)\n"
          "or stretch between two decisions where they part. Failure kinds: those of the simulator (deadlock, livelock, vtime), of\n"
          "the scenario (invariant, setup), and assert, crash, sanitizer, leak, exit, hang.\n"
          "Exit status 2: usage error, or shsim itself could not run.\n",
          TIMEOUT_S_DEFAULT);
}

typedef enum opt_type {
  OPT_U64, OPT_U32, OPT_SEED, OPT_SEEDS, OPT_STRATEGY, OPT_STR, OPT_FLAG, OPT_SHARD, OPT_FAULTS
} opt_type;

typedef struct opt_def {
  const char *name;
  opt_type type;
  unsigned cmds; /* ARGS_CMD_* that accept it */
  bool replay;   /* a failing sweep run's replay command repeats it */
  size_t off;    /* its field in args */
} opt_def;

#define OPT(name, type, cmds, replay, field) {name, type, cmds, replay, offsetof(args, field)}
static const opt_def opts[] = {
    OPT("--seed", OPT_SEED, ARGS_CMD_RUN | ARGS_CMD_SHRINK, false, seeds),
    OPT("--seeds", OPT_SEEDS, CMD_MANY, false, seeds),
    OPT("--strategy", OPT_STRATEGY, CMD_SIM, false, sim.strategy),
    OPT("--workers", OPT_U32, CMD_SIM, true, workers),
    OPT("--steps-max", OPT_U64, CMD_ANY_SIM, true, sim.max_steps),
    OPT("--switch-permille", OPT_U32, CMD_SIM, true, sim.switch_permille),
    OPT("--pct-depth", OPT_U32, CMD_SIM, true, sim.pct_depth),
    OPT("--stale-permille", OPT_U32, CMD_SIM, true, sim.stale_permille),
    OPT("--atomic-points", OPT_U32, CMD_SIM, true, sim.atomic_points),
    OPT("--pct-steps", OPT_U64, CMD_SIM, true, sim.pct_steps),
    OPT("--check-determinism", OPT_FLAG, ARGS_CMD_RUN | CMD_MANY, true, check_determinism),
    OPT("--timeout-s", OPT_U64, CMD_ANY_SIM | ARGS_CMD_REPLAY, false, timeout_s),
    OPT("--hang-after", OPT_U64, CMD_ANY_SIM | ARGS_CMD_REPLAY, true, hang_after_s),
    OPT("--trace", OPT_STR, ARGS_CMD_RUN | ARGS_CMD_REPLAY, false, sim.trace_path),
    OPT("--record", OPT_STR, ARGS_CMD_RUN, false, record_path),
    OPT("--schedule", OPT_STR, ARGS_CMD_RUN, true, schedule_path),
    OPT("--any-binary", OPT_FLAG, ARGS_CMD_RUN | ARGS_CMD_REPLAY, false, any_binary),
    /* Printed quoted by args_fprint_command (a spec holds `*`). */
    OPT("--faults", OPT_FAULTS, CMD_ANY_SIM, false, sim.faults),
    OPT("--out", OPT_STR, ARGS_CMD_SHRINK, false, out_path),
    OPT("--max-trials", OPT_U64, ARGS_CMD_SHRINK, false, max_trials),
    OPT("--jobs", OPT_U64, CMD_MANY, false, jobs),
    OPT("--shard", OPT_SHARD, ARGS_CMD_FUZZ, false, shard_i),
    OPT("--time-budget", OPT_U64, ARGS_CMD_FUZZ, false, time_budget_s),
    OPT("--json", OPT_STR, ARGS_CMD_FUZZ, false, json_path),
    OPT("--all", OPT_FLAG, ARGS_CMD_LIST, false, all),
};
#undef OPT
#define NOPTS (sizeof(opts) / sizeof(opts[0]))
_Static_assert(NOPTS <= sizeof(((args *)0)->given) / sizeof(const char *), "args.given too small");

/* Decimal, or hexadecimal with 0x (a leading 0 is not octal: seed 010 is ten). */
static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  /* strtoull takes "-1" as a huge number: refuse signs outright. */
  if (s[0] == '-' || s[0] == '+') return -EINVAL;
  bool hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  unsigned long long v = strtoull(s, &end, hex ? 16 : 10);
  if (errno != 0 || end == s || *end != '\0') return -EINVAL;
  *out = v;
  return 0;
}

/* "A..B" (inclusive, A <= B) or "N". */
static int parse_seeds(const char *s, args_seed_range *out) {
  const char *dots = strstr(s, "..");
  if (dots == NULL) {
    if (parse_u64(s, &out->lo) != 0) return -EINVAL;
    out->hi = out->lo;
    return 0;
  }
  char lo[32];
  size_t n = (size_t)(dots - s);
  if (n == 0 || n >= sizeof(lo)) return -EINVAL;
  memcpy(lo, s, n);
  lo[n] = '\0';
  if (parse_u64(lo, &out->lo) != 0 || parse_u64(dots + 2, &out->hi) != 0) return -EINVAL;
  if (out->hi < out->lo || out->hi - out->lo >= SEEDS_MAX) return -ERANGE;
  return 0;
}

/* "I/N": shard I of N (checked later: 1 <= I <= N). */
static int parse_shard(const char *s, args *a) {
  const char *slash = strchr(s, '/');
  char i[32];
  size_t n = slash != NULL ? (size_t)(slash - s) : 0;
  if (n == 0 || n >= sizeof(i)) return -EINVAL;
  memcpy(i, s, n);
  i[n] = '\0';
  return parse_u64(i, &a->shard_i) != 0 || parse_u64(slash + 1, &a->shard_n) != 0 ? -EINVAL : 0;
}

static int parse_faults(const char *v, const char **out) {
  const char *why = "";
  if (sh_sim_faults_parse(v, NULL, NULL, &why) != 0) {
    fprintf(stderr, "shsim: bad fault spec '%s': %s\n", v, why);
    return -EINVAL;
  }
  *out = v;
  return 0;
}

static int parse_value(const opt_def *d, const char *v, args *a) {
  void *field = (char *)a + d->off;
  uint64_t u;
  switch (d->type) {
  case OPT_U64:
    return parse_u64(v, (uint64_t *)field);
  case OPT_U32:
    if (parse_u64(v, &u) != 0 || u > UINT32_MAX) return -EINVAL;
    *(uint32_t *)field = (uint32_t)u;
    return 0;
  case OPT_SEED:
    if (parse_u64(v, &u) != 0) return -EINVAL;
    *(args_seed_range *)field = (args_seed_range){u, u};
    return 0;
  case OPT_SEEDS:
    return parse_seeds(v, (args_seed_range *)field);
  case OPT_STRATEGY:
    return sh_sim_strategy_parse(v, (sh_sim_strategy *)field);
  case OPT_STR:
    *(const char **)field = v;
    return 0;
  case OPT_SHARD:
    return parse_shard(v, a);
  case OPT_FAULTS:
    return parse_faults(v, (const char **)field);
  case OPT_FLAG:
    break;
  }
  return -EINVAL;
}

static const opt_def *opt_find(const char *name) {
  for (size_t i = 0; i < NOPTS; i++)
    if (strcmp(opts[i].name, name) == 0) return &opts[i];
  return NULL;
}

static int bad_arg(const char *what, const char *arg) {
  fprintf(stderr, "shsim: %s '%s' (shsim --help)\n", what, arg);
  return -EINVAL;
}

/* argv[i..] are options of command a->cmd. */
static int parse_options(int argc, char **argv, int i, args *a) {
  for (; i < argc; i++) {
    const opt_def *d = opt_find(argv[i]);
    if (d == NULL || !(d->cmds & a->cmd)) return bad_arg("unknown option", argv[i]);
    size_t k = (size_t)(d - opts);
    if (d->type == OPT_FLAG) {
      *(bool *)((char *)a + d->off) = true;
      a->given[k] = "";
      continue;
    }
    if (i + 1 >= argc) return bad_arg("missing value for", argv[i]);
    if (parse_value(d, argv[i + 1], a) != 0) return bad_arg("bad value for", argv[i]);
    a->given[k] = argv[++i];
  }
  return 0;
}

static bool is_given(const args *a, const char *name) { return args_given(a, name) != NULL; }

static int check_args(const args *a) {
  if ((a->cmd & (ARGS_CMD_RUN | ARGS_CMD_SHRINK)) && !is_given(a, "--seed"))
    return bad_arg("needs", "--seed N");
  if ((a->cmd & CMD_MANY) && !is_given(a, "--seeds"))
    return bad_arg("needs", "--seeds A..B");
  if (a->shard_i < 1 || a->shard_i > a->shard_n) return bad_arg("out of range (1 <= I <= N):", "--shard");
  if (a->sim.switch_permille > 1000) return bad_arg("out of range (0..1000):", "--switch-permille");
  if (a->sim.atomic_points > 1) return bad_arg("out of range (0 or 1):", "--atomic-points");
  if (a->sim.stale_permille > 900) return bad_arg("out of range (0..900):", "--stale-permille");
  if (a->sim.pct_depth < 1) return bad_arg("out of range (>= 1):", "--pct-depth");
  if (a->timeout_s < 1 || a->timeout_s > 86400 * 7) return bad_arg("out of range:", "--timeout-s");
  _Static_assert(POOL_JOBS_MAX == 256, "the message below names the bound");
  if (a->jobs < 1 || a->jobs > POOL_JOBS_MAX) return bad_arg("out of range (1..256):", "--jobs");
  return 0;
}

static uint64_t cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > POOL_JOBS_MAX ? POOL_JOBS_MAX : (uint64_t)n;
}

void args_default(args *a) {
  memset(a, 0, sizeof(*a));
  a->prog = "shsim";
  sh_sim_options_default(&a->sim);
  a->jobs = cpus();
  a->timeout_s = TIMEOUT_S_DEFAULT;
  a->max_trials = SHRINK_TRIALS_DEFAULT;
  a->shard_i = a->shard_n = 1;
}

int args_parse(int argc, char **argv, args *a) {
  args_default(a);
  if (argc > 0 && argv[0] != NULL && argv[0][0] != '\0') a->prog = argv[0];
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 1;
    }
  }
  if (argc < 2) {
    usage(stderr);
    return -EINVAL;
  }
  const char *cmd = argv[1];
  a->cmd = strcmp(cmd, "list") == 0     ? ARGS_CMD_LIST
           : strcmp(cmd, "run") == 0    ? ARGS_CMD_RUN
           : strcmp(cmd, "sweep") == 0  ? ARGS_CMD_SWEEP
           : strcmp(cmd, "shrink") == 0 ? ARGS_CMD_SHRINK
           : strcmp(cmd, "fuzz") == 0   ? ARGS_CMD_FUZZ
           : strcmp(cmd, "merge") == 0  ? ARGS_CMD_MERGE
           : strcmp(cmd, "replay") == 0 ? ARGS_CMD_REPLAY
                                        : 0;
  if (a->cmd == 0) return bad_arg("unknown command", cmd);
  int first = 2;
  if (a->cmd == ARGS_CMD_MERGE) {
    if (argc < 3) return bad_arg("merge needs", "FILE.json...");
    a->files = argv + 2;
    a->nfiles = argc - 2;
    return 0;
  }
  if (a->cmd != ARGS_CMD_LIST) {
    if (argc < 3 || argv[2][0] == '-')
      return bad_arg(a->cmd == ARGS_CMD_REPLAY ? "missing file after" : "missing scenario after", cmd);
    a->target = argv[2];
    first = 3;
  }
  int rc = parse_options(argc, argv, first, a);
  return rc != 0 ? rc : check_args(a);
}

int args_set_option(args *a, const char *name, const char *value) {
  const opt_def *d = opt_find(name);
  if (d == NULL || !(d->cmds & ARGS_CMD_RUN) || d->type == OPT_FLAG) return -ENOENT;
  if (parse_value(d, value, a) != 0) return bad_arg("bad value for", name);
  a->given[d - opts] = value;
  return 0;
}

const char *args_given(const args *a, const char *name) {
  const opt_def *d = opt_find(name);
  return d != NULL ? a->given[d - opts] : NULL;
}

void args_print_command(const args *a, const char *cmd, const char *name, uint64_t seed,
                        unsigned mask) {
  args_fprint_command(stdout, a, cmd, name, seed, mask);
}

void args_fprint_command(FILE *f, const args *a, const char *cmd, const char *name, uint64_t seed,
                         unsigned mask) {
  fprintf(f, "%s %s %s --seed %llu --strategy %s", a->prog, cmd, name, (unsigned long long)seed,
         sh_sim_strategy_name(a->sim.strategy));
  for (size_t i = 0; i < NOPTS; i++) {
    if (!opts[i].replay || a->given[i] == NULL || !(opts[i].cmds & mask)) continue;
    fprintf(f, " %s%s%s", opts[i].name, a->given[i][0] != '\0' ? " " : "", a->given[i]);
  }
  if (a->sim.faults != NULL && (mask & CMD_ANY_SIM)) fprintf(f, " --faults '%s'", a->sim.faults);
}

uint64_t args_hang_real_ms(const args *a) {
  return is_given(a, "--hang-after") ? a->hang_after_s * 1000 : a->sim.hang_real_ms;
}
