/*
 * shsim's command line. Options are a table: each names the commands that
 * accept it, whether a printed replay command repeats it, and its help
 * (`shsim COMMAND --help` lists the options of that command only).
 */
#include "args.h"

#include <errno.h>
#include <getopt.h>
#include <sched.h>
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
#define CMD_ANY_SIM (CMD_SIM | ARGS_CMD_FUZZ | ARGS_CMD_EXPLORE) /* fuzz, explore draw the others */
#define CMD_MANY (ARGS_CMD_SWEEP | ARGS_CMD_FUZZ)
#define OPT_CODE 256 /* getopt_long's code of the first option: past every char */

typedef enum opt_type {
  OPT_U64, OPT_U32, OPT_SEED, OPT_SEEDS, OPT_STRATEGY, OPT_STR, OPT_FLAG, OPT_SHARD, OPT_FAULTS
} opt_type;

typedef struct opt_def {
  const char *name;
  opt_type type;
  unsigned cmds; /* ARGS_CMD_* that accept it */
  bool replay;   /* a failing sweep run's replay command repeats it */
  size_t off;    /* its field in args */
  const char *help; /* "VALUE\twhat it does" ('\n' continues the text) */
} opt_def;

#define OPT(name, type, cmds, replay, field, help) \
  {name, type, cmds, replay, offsetof(args, field), help}
static const opt_def opts[] = {
    OPT("--seed", OPT_SEED, ARGS_CMD_RUN | ARGS_CMD_SHRINK, false, seeds, "N\tthe run's seed"),
    OPT("--seeds", OPT_SEEDS, CMD_MANY | ARGS_CMD_EXPLORE, false, seeds,
        "A..B|N\tthe seeds to run (inclusive; explore: its first runs)"),
    OPT("--runs", OPT_U64, ARGS_CMD_EXPLORE, false, runs,
        "N\truns at most (default 2000, or none with --time-budget)"),
    OPT("--strategy", OPT_STRATEGY, CMD_SIM, false, sim.strategy,
        "random|pct|none|msgpct|delay\tthe scheduling strategy (default random;\n"
        "fuzz draws one per seed)"),
    OPT("--workers", OPT_U32, CMD_SIM, true, workers, "K\tworkers (default: the scenario's)"),
    OPT("--steps-max", OPT_U64, CMD_ANY_SIM, true, sim.max_steps,
        "N\tFAIL:livelock past N scheduling points"),
    OPT("--switch-permille", OPT_U32, CMD_SIM, true, sim.switch_permille,
        "P\trandom: switch fibers at a yield point with probability P/1000"),
    OPT("--pct-depth", OPT_U32, CMD_SIM, true, sim.pct_depth, "D\tpct, msgpct: the bug depth (change points + 1);\ndelay: delays + 1"),
    OPT("--stale-permille", OPT_U32, CMD_SIM, true, sim.stale_permille,
        "P\ta weak load reads a lately overwritten value with probability\n"
        "P/1000, P <= 900 (default 0; fuzz draws 0, 250 or 750)"),
    OPT("--atomic-points", OPT_U32, CMD_SIM, true, sim.atomic_points,
        "0|1\tevery atomic store and read-modify-write is a scheduling point\n"
        "(default 0; fuzz draws 0 or 1)"),
    OPT("--pct-steps", OPT_U64, CMD_SIM, true, sim.pct_steps, "K\tpct, delay: the steps the change points (delays) fall\n"
        "in; msgpct: the deliveries"),
    OPT("--check-determinism", OPT_FLAG, ARGS_CMD_RUN | CMD_MANY, true, check_determinism,
        "\trun each seed twice: FAIL:nondeterministic where they part"),
    OPT("--timeout-s", OPT_U64, CMD_ANY_SIM | ARGS_CMD_REPLAY, false, timeout_s,
        "S\treal-time watchdog per run (default 600): FAIL:hang, killed"),
    OPT("--hang-after", OPT_U64, CMD_ANY_SIM | ARGS_CMD_REPLAY, true, hang_after_s,
        "S\tFAIL:hang after S s of real time without a scheduling point\n(default 10; 0: never)"),
    OPT("--trace", OPT_STR, ARGS_CMD_RUN | ARGS_CMD_REPLAY, false, sim.trace_path,
        "FILE.json\tChrome trace-event JSON of the run, for Perfetto"),
    OPT("--record", OPT_STR, ARGS_CMD_RUN, false, record_path, "FILE\twrite the run's replay file"),
    OPT("--schedule", OPT_STR, ARGS_CMD_RUN | ARGS_CMD_SHRINK, true, schedule_path,
        "FILE\tfollow the decisions of a replay or schedule file (a replay file\n"
        "recorded with other options than these is refused)"),
    OPT("--any-binary", OPT_FLAG, ARGS_CMD_RUN | ARGS_CMD_REPLAY, false, any_binary,
        "\treplay a file recorded by another binary (refused otherwise: a replay\n"
        "is exact only on the binary that recorded it)"),
    /* Printed quoted by args_fprint_command (a spec holds `*`). */
    OPT("--faults", OPT_FAULTS, CMD_ANY_SIM, false, sim.faults,
        "'PATTERN:P,...'\tfault points (libfiu names, a trailing * matches any rest)\n"
        "fire with probability P, decided by the seed (fuzz: each seed scales\n"
        "each rate by 0, 0.1, 1 or 10)"),
    OPT("--out", OPT_STR, ARGS_CMD_SHRINK, false, out_path,
        "FILE\tthe replay file (default SCENARIO-SEED.replay)"),
    OPT("--out", OPT_STR, ARGS_CMD_EXPLORE, false, out_path,
        "DIR\twhere a failure's replay file goes (default: the current directory)"),
    OPT("--out", OPT_STR, CMD_MANY, false, out_path,
        "DIR\teach failure as it is found: a line of DIR/failures.jsonl and\n"
        "its replay file; the summaries (summary.json, junit.xml) at the end,\n"
        "also when stopped by SIGINT, SIGTERM or the time budget"),
    OPT("--max-trials", OPT_U64, ARGS_CMD_SHRINK, false, max_trials, "T\treplays at most (default 2000)"),
    OPT("--jobs", OPT_U64, CMD_MANY | ARGS_CMD_EXPLORE, false, jobs,
        "J\tparallel children (default: the CPUs this process may run on)"),
    OPT("--shard", OPT_SHARD, CMD_MANY, false, shard_i,
        "I/N|k8s/N|slurm[/N]\tonly the seeds s with (s - A) % N == I - 1; k8s takes I\n"
        "from JOB_COMPLETION_INDEX (+1), slurm from SLURM_ARRAY_TASK_ID\n"
        "(- SLURM_ARRAY_TASK_MIN + 1) and N from SLURM_ARRAY_TASK_COUNT"),
    OPT("--time-budget", OPT_U64, CMD_MANY | ARGS_CMD_EXPLORE, false, time_budget_s,
        "S\tstart no seed after S s of real time"),
    OPT("--json", OPT_STR, CMD_MANY | ARGS_CMD_MERGE, false, json_path, "FILE\twrite the JSON summary"),
    OPT("--junit", OPT_STR, CMD_MANY | ARGS_CMD_MERGE, false, junit_path,
        "FILE\twrite JUnit XML: a test case per scenario"),
    OPT("--all", OPT_FLAG, ARGS_CMD_LIST, false, all, "\tthe hidden test scenarios too"),
};
#undef OPT
#define NOPTS (sizeof(opts) / sizeof(opts[0]))
_Static_assert(NOPTS <= sizeof(((args *)0)->given) / sizeof(const char *), "args.given too small");

void args_options_help(FILE *f, unsigned cmd) {
  for (size_t i = 0; i < NOPTS; i++) {
    if (!(opts[i].cmds & cmd)) continue;
    const char *tab = strchr(opts[i].help, '\t');
    char head[64];
    snprintf(head, sizeof(head), "%s%s%.*s", opts[i].name, tab != opts[i].help ? " " : "",
             (int)(tab - opts[i].help), opts[i].help);
    /* A long head takes a line of its own. */
    fprintf(f, strlen(head) >= 26 ? "  %s\n  %-26s " : "  %-26s ", head, "");
    for (const char *t = tab + 1; *t != '\0';) {
      size_t len = strcspn(t, "\n");
      fprintf(f, "%.*s\n", (int)len, t);
      t += len;
      if (*t == '\n' && *++t != '\0') fprintf(f, "  %-26s ", "");
    }
  }
}

/* Decimal, or hexadecimal with 0x (a leading 0 is not octal: seed 010 is ten). */
static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  /* strtoull takes "-1" as a huge number: refuse signs outright. */
  if (s == NULL || s[0] == '-' || s[0] == '+') return -EINVAL;
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

/* A batch system's variable: its value, or a message and -EINVAL. */
static int env_u64(const char *name, uint64_t *out) {
  const char *v = getenv(name);
  if (v != NULL && parse_u64(v, out) == 0) return 0;
  fprintf(stderr, "shsim: --shard: %s is %s\n", name, v == NULL ? "not set" : "not a number");
  return -EINVAL;
}

/* "slurm" or "slurm/N": a Slurm job array's task (its ids may start at 0
 * or 1: SLURM_ARRAY_TASK_MIN says which). */
static int shard_slurm(const char *count, args *a) {
  uint64_t id, min = 0;
  if (env_u64("SLURM_ARRAY_TASK_ID", &id) != 0) return -EINVAL;
  if (getenv("SLURM_ARRAY_TASK_MIN") != NULL && env_u64("SLURM_ARRAY_TASK_MIN", &min) != 0)
    return -EINVAL;
  if (count != NULL ? parse_u64(count, &a->shard_n) != 0
                    : env_u64("SLURM_ARRAY_TASK_COUNT", &a->shard_n) != 0)
    return -EINVAL;
  if (id < min) return -EINVAL;
  a->shard_i = id - min + 1;
  return 0;
}

/* "I/N", "k8s/N" (a Kubernetes Indexed Job's 0-based JOB_COMPLETION_INDEX;
 * a Job does not tell its pods its completions: N is given), "slurm[/N]".
 * Checked later: 1 <= I <= N. */
static int parse_shard(const char *s, args *a) {
  const char *slash = strchr(s, '/');
  char i[32];
  size_t n = slash != NULL ? (size_t)(slash - s) : strlen(s);
  if (n == 0 || n >= sizeof(i)) return -EINVAL;
  memcpy(i, s, n);
  i[n] = '\0';
  if (strcmp(i, "slurm") == 0) return shard_slurm(slash != NULL ? slash + 1 : NULL, a);
  if (slash == NULL || parse_u64(slash + 1, &a->shard_n) != 0) return -EINVAL;
  if (strcmp(i, "k8s") != 0) return parse_u64(i, &a->shard_i);
  uint64_t index;
  if (env_u64("JOB_COMPLETION_INDEX", &index) != 0) return -EINVAL;
  a->shard_i = index + 1;
  return 0;
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

/* The entry of option `name` for the commands in mask (some names mean
 * one thing to one command and another to another: --out). */
static const opt_def *opt_find(const char *name, unsigned mask) {
  for (size_t i = 0; i < NOPTS; i++)
    if (strcmp(opts[i].name, name) == 0 && (opts[i].cmds & mask)) return &opts[i];
  return NULL;
}

static int bad_arg(const args *a, const char *what, const char *arg) {
  const char *cmd = args_cmd_name(a->cmd);
  fprintf(stderr, "shsim: %s '%s' (shsim %s%s--help)\n", what, arg, cmd != NULL ? cmd : "",
          cmd != NULL ? " " : "");
  return -EINVAL;
}

static int take_option(args *a, const opt_def *d, const char *value) {
  size_t k = (size_t)(d - opts);
  if (d->type == OPT_FLAG) {
    *(bool *)((char *)a + d->off) = true;
    a->given[k] = "";
    return 0;
  }
  if (parse_value(d, value, a) != 0) return bad_arg(a, "bad value for", d->name);
  a->given[k] = value;
  return 0;
}

/* argv[first..] are the options of command a->cmd (getopt_long: --name
 * value or --name=value, a unique prefix of a name); merge's other words
 * are its files. */
static int parse_options(int argc, char **argv, int first, args *a) {
  struct option lo[NOPTS + 1];
  const opt_def *defs[NOPTS];
  size_t n = 0;
  for (size_t i = 0; i < NOPTS; i++) {
    if (!(opts[i].cmds & a->cmd)) continue;
    defs[n] = &opts[i];
    lo[n] = (struct option){opts[i].name + 2, opts[i].type == OPT_FLAG ? no_argument : required_argument,
                            NULL, OPT_CODE + (int)n};
    n++;
  }
  lo[n] = (struct option){NULL, 0, NULL, 0};
  /* Scanned from argv[first]: the word before it stands for the program
   * name; optind 0 starts getopt afresh (args_parse may run again). */
  int sub_argc = argc - first + 1;
  char **sub = argv + first - 1;
  optind = 0;
  opterr = 0;
  for (int c; (c = getopt_long(sub_argc, sub, ":", lo, NULL)) != -1;) {
    const char *word = sub[optind - 1];
    if (c == ':') return bad_arg(a, "missing value for", word);
    if (c < OPT_CODE || c >= OPT_CODE + (int)n) return bad_arg(a, "unknown option", word);
    int rc = take_option(a, defs[c - OPT_CODE], optarg);
    if (rc != 0) return rc;
  }
  if (optind < sub_argc && a->cmd != ARGS_CMD_MERGE) return bad_arg(a, "unexpected argument", sub[optind]);
  /* getopt_long has moved them to the end. */
  a->files = sub + optind;
  a->nfiles = sub_argc - optind;
  return 0;
}

static bool is_given(const args *a, const char *name) { return args_given(a, name) != NULL; }

static int check_args(const args *a) {
  if ((a->cmd & (ARGS_CMD_RUN | ARGS_CMD_SHRINK)) && !is_given(a, "--seed"))
    return bad_arg(a, "needs", "--seed N");
  if ((a->cmd & (CMD_MANY | ARGS_CMD_EXPLORE)) && !is_given(a, "--seeds"))
    return bad_arg(a, "needs", "--seeds A..B");
  if (a->cmd == ARGS_CMD_MERGE && a->nfiles == 0) return bad_arg(a, "merge needs", "FILE.json...");
  if (a->shard_i < 1 || a->shard_i > a->shard_n)
    return bad_arg(a, "out of range (1 <= I <= N):", "--shard");
  if (a->sim.switch_permille > 1000) return bad_arg(a, "out of range (0..1000):", "--switch-permille");
  if (a->sim.atomic_points > 1) return bad_arg(a, "out of range (0 or 1):", "--atomic-points");
  if (a->sim.stale_permille > 900) return bad_arg(a, "out of range (0..900):", "--stale-permille");
  if (a->sim.pct_depth < 1) return bad_arg(a, "out of range (>= 1):", "--pct-depth");
  if (a->timeout_s < 1 || a->timeout_s > 86400 * 7) return bad_arg(a, "out of range:", "--timeout-s");
  _Static_assert(POOL_JOBS_MAX == 256, "the message below names the bound");
  if (a->jobs < 1 || a->jobs > POOL_JOBS_MAX) return bad_arg(a, "out of range (1..256):", "--jobs");
  return 0;
}

/* The CPUs this process may run on (its affinity mask: a container's or a
 * batch job's share of the machine), not every CPU online. */
uint64_t args_cpus(void) {
  cpu_set_t set;
  long n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
                                                         : sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > POOL_JOBS_MAX ? POOL_JOBS_MAX : (uint64_t)n;
}

void args_default(args *a) {
  memset(a, 0, sizeof(*a));
  a->prog = "shsim";
  sh_sim_options_default(&a->sim);
  a->jobs = args_cpus();
  a->timeout_s = TIMEOUT_S_DEFAULT;
  a->max_trials = SHRINK_TRIALS_DEFAULT;
  a->shard_i = a->shard_n = 1;
}

/* --help anywhere, --version first, `help [COMMAND]`: 1 (printed), else 0. */
static int parse_help(int argc, char **argv, args *a) {
  if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0)) {
    args_version(stdout);
    return 1;
  }
  if (argc >= 2 && strcmp(argv[1], "help") == 0) {
    unsigned cmd = argc >= 3 ? args_cmd_find(argv[2]) : 0;
    if (argc >= 3 && cmd == 0) return bad_arg(a, "unknown command", argv[2]);
    args_usage(stdout, cmd);
    return 1;
  }
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      args_usage(stdout, args_cmd_find(argv[1]));
      return 1;
    }
  }
  return 0;
}

int args_parse(int argc, char **argv, args *a) {
  args_default(a);
  if (argc > 0 && argv[0] != NULL && argv[0][0] != '\0') a->prog = argv[0];
  int rc = parse_help(argc, argv, a);
  if (rc != 0) return rc;
  if (argc < 2) {
    args_usage(stderr, 0);
    return -EINVAL;
  }
  a->cmd = args_cmd_find(argv[1]);
  if (a->cmd == 0) return bad_arg(a, "unknown command", argv[1]);
  int first = 2;
  if (a->cmd != ARGS_CMD_LIST && a->cmd != ARGS_CMD_MERGE) {
    if (argc < 3 || argv[2][0] == '-')
      return bad_arg(a, a->cmd == ARGS_CMD_REPLAY ? "missing file after" : "missing scenario after",
                     argv[1]);
    a->target = argv[2];
    first = 3;
  }
  rc = parse_options(argc, argv, first, a);
  return rc != 0 ? rc : check_args(a);
}

int args_set_option(args *a, const char *name, const char *value) {
  const opt_def *d = opt_find(name, ARGS_CMD_RUN);
  if (d == NULL || d->type == OPT_FLAG) return -ENOENT;
  if (parse_value(d, value, a) != 0) return bad_arg(a, "bad value for", name);
  a->given[d - opts] = value;
  return 0;
}

const char *args_given(const args *a, const char *name) {
  for (size_t i = 0; i < NOPTS; i++)
    if (strcmp(opts[i].name, name) == 0 && a->given[i] != NULL) return a->given[i];
  return NULL;
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

/* The options that shape the runs, as "--name value" pairs, for a summary. */
size_t args_run_options(const args *a, const char **names, const char **values, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < NOPTS && n < cap; i++) {
    /* Those a run takes; a campaign's own (seeds, jobs, outputs) are not. */
    if (a->given[i] == NULL || !(opts[i].cmds & ARGS_CMD_RUN)) continue;
    names[n] = opts[i].name;
    values[n++] = a->given[i];
  }
  return n;
}

uint64_t args_hang_real_ms(const args *a) {
  return is_given(a, "--hang-after") ? a->hang_after_s * 1000 : a->sim.hang_real_ms;
}
