/*
 * shsim: runs scenarios on the deterministic simulator. See `shsim --help`.
 *
 * Every simulation runs in a forked child, so that whatever goes wrong in it
 * (a failure the simulator detects, a failed invariant, an assert, a crash,
 * a sanitizer report, a hang) ends as one classified result instead of
 * taking the runner down or hanging it. A child runs a chunk of (scenario,
 * seed) "units" one after the other (forking costs about as much as a short
 * run) and reports each as one fixed-size record on a pipe. A child stops at
 * its first failure; when it dies before reporting a unit, the parent
 * classifies that unit from the wait status and the tail of the child's
 * stderr. Either way a fresh child takes the rest of the chunk.
 *
 * In sanitizer builds LeakSanitizer checks, once per chunk, that the runs
 * freed everything; a leaking chunk is run again one unit per child to find
 * the run that leaks.
 *
 * This tool is not simulated code: it may read the real clock, fork and poll.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "scenario.h"
#include <stackhouse/sim.h>

/* Present only in sanitizer builds (weak: NULL otherwise). */
extern void __sanitizer_set_death_callback(void (*)(void)) __attribute__((weak));
extern int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

#define SCN_MAX 256                /* the registry holds at most this many */
#define JOBS_MAX 256               /* parallel children in a sweep */
#define SEEDS_MAX 100000000ull     /* seeds in one range */
#define UNITS_MAX 1000000000ull    /* (scenario, seed) pairs in one sweep */
#define CHUNK_MAX 32               /* units per child: a crash restarts at most this much */
#define TICK_MS 100                /* parent poll period: watchdog and progress */
#define TAIL_BYTES 4096            /* child's stderr kept for classifying a death */
#define FAILURES_KEPT 1000         /* failures listed after a sweep */
#define TIMEOUT_S_DEFAULT 600
#define SHRINK_TRIALS_DEFAULT 2000 /* replays one shrink may make */
#define SCHEDULE_MAX (1u << 22)    /* choices in a schedule file */

static void usage(FILE *f) {
  fprintf(f,
          "usage: shsim list [--all]\n"
          "       shsim run SCENARIO --seed N [options]\n"
          "       shsim sweep SCENARIO|all --seeds A..B|N [--jobs J] [options]\n"
          "       shsim shrink SCENARIO --seed N [--out FILE] [--max-trials T] [options]\n"
          "options: --strategy random|pct|none  --workers K  --steps-max N\n"
          "         --switch-permille P  --pct-depth D  --pct-steps K  --check-determinism\n"
          "         --timeout-s S (real-time watchdog per run, default %d)\n"
          "         --trace FILE.json (run only: Chrome trace-event JSON, for Perfetto)\n"
          "         --schedule FILE (run only: replay a schedule written by shrink)\n"
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
          "shrink: runs a failing seed, records its schedule (every switch between\n"
          "  fibers), then cuts it down by delta debugging to the choices the failure\n"
          "  needs (replayed where unnamed: no switch at a yield point, the lowest\n"
          "  runnable fiber where one must run). Writes FILE (default\n"
          "  SCENARIO-SEED.schedule) and prints the replay command.\n"
          "--check-determinism runs each seed twice: FAIL:nondeterministic if the hashes\n"
          "differ. Failure kinds: those of the simulator (deadlock, livelock, vtime), of\n"
          "the scenario (invariant, setup), and assert, crash, sanitizer, leak, exit, hang.\n"
          "Exit status 2: usage error, or shsim itself could not run.\n",
          TIMEOUT_S_DEFAULT);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- arguments ------------------------------------------------------------------ */

enum { CMD_LIST = 1u << 0, CMD_RUN = 1u << 1, CMD_SWEEP = 1u << 2, CMD_SHRINK = 1u << 3 };
#define CMD_SIM (CMD_RUN | CMD_SWEEP | CMD_SHRINK)

typedef struct seed_range {
  uint64_t lo, hi; /* inclusive */
} seed_range;

typedef enum opt_type { OPT_U64, OPT_U32, OPT_SEED, OPT_SEEDS, OPT_STRATEGY, OPT_STR, OPT_FLAG } opt_type;

typedef struct opt_def {
  const char *name;
  opt_type type;
  unsigned cmds; /* CMD_* that accept it */
  bool replay;   /* a failing sweep run's replay command repeats it */
  size_t off;    /* its field in args */
} opt_def;

typedef struct args {
  unsigned cmd;
  const char *target; /* scenario name, or "all" (sweep) */
  seed_range seeds;
  sh_sim_options sim; /* seed and vtime limit set per run */
  uint32_t workers;   /* 0: the scenario's default */
  uint64_t jobs;
  uint64_t timeout_s;
  bool check_determinism;
  bool all;
  const char *schedule_path; /* run: replay this schedule */
  const char *out_path;      /* shrink: where the shrunk schedule goes */
  uint64_t max_trials;       /* shrink: replays at most */
  const char *record_path;   /* children write each run's schedule here */
  const char *given[20]; /* argv text of each option given, by index in opts[] */
} args;

#define OPT(name, type, cmds, replay, field) {name, type, cmds, replay, offsetof(args, field)}
static const opt_def opts[] = {
    OPT("--seed", OPT_SEED, CMD_RUN | CMD_SHRINK, false, seeds),
    OPT("--seeds", OPT_SEEDS, CMD_SWEEP, false, seeds),
    OPT("--strategy", OPT_STRATEGY, CMD_SIM, false, sim.strategy),
    OPT("--workers", OPT_U32, CMD_SIM, true, workers),
    OPT("--steps-max", OPT_U64, CMD_SIM, true, sim.max_steps),
    OPT("--switch-permille", OPT_U32, CMD_SIM, true, sim.switch_permille),
    OPT("--pct-depth", OPT_U32, CMD_SIM, true, sim.pct_depth),
    OPT("--pct-steps", OPT_U64, CMD_SIM, true, sim.pct_steps),
    OPT("--check-determinism", OPT_FLAG, CMD_RUN | CMD_SWEEP, true, check_determinism),
    OPT("--timeout-s", OPT_U64, CMD_SIM, false, timeout_s),
    OPT("--trace", OPT_STR, CMD_RUN, false, sim.trace_path),
    OPT("--schedule", OPT_STR, CMD_RUN, true, schedule_path),
    OPT("--out", OPT_STR, CMD_SHRINK, false, out_path),
    OPT("--max-trials", OPT_U64, CMD_SHRINK, false, max_trials),
    OPT("--jobs", OPT_U64, CMD_SWEEP, false, jobs),
    OPT("--all", OPT_FLAG, CMD_LIST, false, all),
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
static int parse_seeds(const char *s, seed_range *out) {
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
    *(seed_range *)field = (seed_range){u, u};
    return 0;
  case OPT_SEEDS:
    return parse_seeds(v, (seed_range *)field);
  case OPT_STRATEGY:
    return sh_sim_strategy_parse(v, (sh_sim_strategy *)field);
  case OPT_STR:
    *(const char **)field = v;
    return 0;
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

static bool given(const args *a, const char *name) {
  const opt_def *d = opt_find(name);
  return d != NULL && a->given[d - opts] != NULL;
}

static int check_args(const args *a) {
  if ((a->cmd & (CMD_RUN | CMD_SHRINK)) && !given(a, "--seed")) return bad_arg("needs", "--seed N");
  if (a->cmd == CMD_SWEEP && !given(a, "--seeds")) return bad_arg("sweep needs", "--seeds A..B");
  if (a->sim.switch_permille > 1000) return bad_arg("out of range (0..1000):", "--switch-permille");
  if (a->sim.pct_depth < 1) return bad_arg("out of range (>= 1):", "--pct-depth");
  if (a->timeout_s < 1 || a->timeout_s > 86400 * 7) return bad_arg("out of range:", "--timeout-s");
  if (a->jobs < 1 || a->jobs > JOBS_MAX) return bad_arg("out of range (1..256):", "--jobs");
  return 0;
}

static uint64_t cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > JOBS_MAX ? JOBS_MAX : (uint64_t)n;
}

/* 0 and *a, 1 for --help (printed), or -EINVAL (reported). */
static int parse_args(int argc, char **argv, args *a) {
  memset(a, 0, sizeof(*a));
  sh_sim_options_default(&a->sim);
  a->jobs = cpus();
  a->timeout_s = TIMEOUT_S_DEFAULT;
  a->max_trials = SHRINK_TRIALS_DEFAULT;
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
  a->cmd = strcmp(cmd, "list") == 0 ? CMD_LIST : strcmp(cmd, "run") == 0 ? CMD_RUN
           : strcmp(cmd, "sweep") == 0 ? CMD_SWEEP : strcmp(cmd, "shrink") == 0 ? CMD_SHRINK : 0;
  if (a->cmd == 0) return bad_arg("unknown command", cmd);
  int first = 2;
  if (a->cmd != CMD_LIST) {
    if (argc < 3 || argv[2][0] == '-') return bad_arg("missing scenario after", cmd);
    a->target = argv[2];
    first = 3;
  }
  int rc = parse_options(argc, argv, first, a);
  return rc != 0 ? rc : check_args(a);
}

/* ---- the units of work: (scenario, seed) pairs ------------------------------------ */

typedef struct plan {
  const sh_scenario *scs[SCN_MAX];
  size_t nscs;
  seed_range seeds;
  uint64_t nseeds;
  /* nscs * nseeds, seed-major: the runs of a costly scenario spread over
   * every child instead of filling the last ones. */
  uint64_t nunits;
} plan;

static bool visible(const sh_scenario *sc) { return !(sc->flags & SH_SCN_HIDDEN); }

/* `all` (sweep): every visible scenario; else the one named (hidden ones too). */
static int plan_make(const args *a, plan *p) {
  memset(p, 0, sizeof(*p));
  p->seeds = a->seeds;
  p->nseeds = a->seeds.hi - a->seeds.lo + 1;
  if (a->cmd == CMD_SWEEP && strcmp(a->target, "all") == 0) {
    size_t n = sh_scenario_count();
    for (size_t i = 0; i < n && p->nscs < SCN_MAX; i++)
      if (visible(sh_scenario_at(i))) p->scs[p->nscs++] = sh_scenario_at(i);
  } else {
    p->scs[0] = sh_scenario_find(a->target);
    if (p->scs[0] == NULL) {
      fprintf(stderr, "shsim: no scenario '%s' (shsim list --all)\n", a->target);
      return -ENOENT;
    }
    p->nscs = 1;
  }
  if (p->nscs == 0) {
    fprintf(stderr, "shsim: no scenario to run\n");
    return -ENOENT;
  }
  if (p->nseeds > UNITS_MAX / p->nscs) {
    fprintf(stderr, "shsim: more than %llu runs in one sweep\n", UNITS_MAX);
    return -ERANGE;
  }
  p->nunits = p->nscs * p->nseeds;
  return 0;
}

static size_t unit_scn_index(const plan *p, uint64_t u) { return (size_t)(u % p->nscs); }
static const sh_scenario *unit_scn(const plan *p, uint64_t u) { return p->scs[unit_scn_index(p, u)]; }
static uint64_t unit_seed(const plan *p, uint64_t u) { return p->seeds.lo + u / p->nscs; }

/* ---- the record a child sends for each unit ----------------------------------------- */

typedef enum rec_type {
  REC_RESULT = 1, /* a unit's result; the child goes on */
  REC_LAST,       /* a unit's result, then the child exits: its stderr may hold the detail */
  REC_PARTIAL,    /* the figures of a unit that is dying (the wait status classifies) */
  REC_LEAKED,     /* the units [unit, unit_end) run by this child leaked memory, together */
} rec_type;

typedef struct rec {
  uint64_t unit;
  uint64_t unit_end; /* REC_LEAKED */
  uint8_t type;      /* rec_type */
  uint8_t ok;
  uint8_t recheck;   /* set by the parent: a leak recheck's run, which only reports a leak */
  char kind[32];
  char detail[256];
  sh_sim_report rep;
  uint64_t msgs;    /* stats.delivered, 0 if unknown */
  uint64_t real_ns; /* real time of the run, measured in the child */
} rec;
/* A pipe write of at most PIPE_BUF bytes is atomic: a dying child's record
 * is either whole or absent. */
_Static_assert(sizeof(rec) <= PIPE_BUF, "a record must fit one atomic pipe write");

static void rec_init(rec *r, uint64_t unit, rec_type type) {
  memset(r, 0, sizeof(*r));
  r->unit = unit;
  r->type = (uint8_t)type;
}

static void rec_fail(rec *r, const char *kind, const char *detail) {
  r->ok = 0;
  snprintf(r->kind, sizeof(r->kind), "%s", kind);
  snprintf(r->detail, sizeof(r->detail), "%s", detail);
}

/* ---- child side ---------------------------------------------------------------------- */

/* What the failure handlers need; they take no context argument. */
static struct {
  int fd;            /* the record pipe */
  uint64_t unit;     /* the unit running */
  uint64_t start_ns; /* when its run started */
  const char *record_path; /* write each run's schedule here (shrink) */
} child = {.fd = -1};

/* ---- schedule files: "# comment" lines, then one "STEP FIBER" line per choice ---- */

/* Decimal digits of v at the end of buf[0..24): returns the first. */
static char *u64_digits(uint64_t v, char *end) {
  do {
    *--end = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  return end;
}

/* Writes the current run's schedule to child.record_path. Async-signal-safe
 * (open, write, close, no stdio): it also runs in the fatal-signal handler,
 * so that a run that asserts can be shrunk too. */
static void schedule_record(void) {
  if (child.record_path == NULL) return;
  const sh_sim_choice *c;
  size_t n = sh_sim_schedule(&c);
  int fd = open(child.record_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  static const char head[] = "# stackhouse schedule: step fiber forced\n";
  ssize_t w = write(fd, head, sizeof(head) - 1);
  for (size_t i = 0; i < n && w >= 0; i++) {
    char line[48], *end = line + sizeof(line);
    *--end = '\n';
    char *p = u64_digits(c[i].forced, end);
    *--p = ' ';
    p = u64_digits(c[i].to, p);
    *--p = ' ';
    p = u64_digits(c[i].step, p);
    w = write(fd, p, (size_t)(line + sizeof(line) - p));
  }
  close(fd);
}

/* Reads a schedule file into *out (malloc'd). -errno, or -EINVAL for a bad line. */
static int schedule_load(const char *path, sh_sim_choice **out, size_t *n_out) {
  FILE *f = fopen(path, "re");
  if (f == NULL) return -errno;
  size_t n = 0, cap = 0;
  sh_sim_choice *v = NULL;
  char line[128];
  int rc = 0;
  while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
    if (line[0] == '#' || line[0] == '\n') continue;
    unsigned long long step, to, forced;
    if (sscanf(line, "%llu %llu %llu", &step, &to, &forced) != 3 || to > UINT32_MAX ||
        forced > 1 || n == SCHEDULE_MAX) {
      rc = -EINVAL;
      break;
    }
    if (n == cap) {
      cap = cap == 0 ? 256 : cap * 2;
      sh_sim_choice *nv = realloc(v, cap * sizeof(*v));
      if (nv == NULL) {
        rc = -ENOMEM;
        break;
      }
      v = nv;
    }
    v[n++] = (sh_sim_choice){.step = step, .to = (uint32_t)to, .forced = (uint32_t)forced};
  }
  fclose(f);
  if (rc != 0) {
    free(v);
    return rc;
  }
  *out = v;
  *n_out = n;
  return 0;
}

static int schedule_save(const char *path, const sh_sim_choice *c, size_t n, const char *about) {
  FILE *f = fopen(path, "we");
  if (f == NULL) return -errno;
  fprintf(f, "# stackhouse schedule: step fiber forced\n# %s\n", about);
  for (size_t i = 0; i < n; i++)
    fprintf(f, "%llu %u %u\n", (unsigned long long)c[i].step, c[i].to, c[i].forced);
  return fclose(f) == 0 ? 0 : -errno;
}

static void rec_send(const rec *r) {
  ssize_t n;
  do {
    n = write(child.fd, r, sizeof(*r));
  } while (n < 0 && errno == EINTR);
}

/* Sends what the simulator knows about the unit that is failing. */
static void send_death(const char *kind, const char *detail) {
  schedule_record();
  sh_sim_trace_abandon(kind);
  rec r;
  rec_init(&r, child.unit, REC_LAST);
  rec_fail(&r, kind, detail);
  r.real_ns = now_ns() - child.start_ns;
  sh_sim_report_get(&r.rep);
  rec_send(&r);
}

__attribute__((noreturn)) static void on_sim_failure(const char *kind, const char *detail) {
  send_death(kind, detail);
  _exit(1);
}

/* The sanitizer prints its report to stderr, then calls this, then exits:
 * the parent takes the detail from the stderr tail. */
static void on_sanitizer_death(void) { send_death("sanitizer", ""); }

/* A crash, an assert or the watchdog: send the figures so far; the parent
 * classifies the death from the wait status. Best effort, it runs in a
 * signal handler. */
static void on_fatal_signal(int sig) {
  schedule_record();
  /* Not async-signal-safe (stdio), but the process is dying anyway and a
   * trace that ends cleanly is worth the risk. */
  sh_sim_trace_abandon(sig == SIGUSR1 ? "hang" : sig == SIGABRT ? "assert" : "crash");
  rec r;
  rec_init(&r, child.unit, REC_PARTIAL);
  r.real_ns = now_ns() - child.start_ns; /* clock_gettime is async-signal-safe */
  sh_sim_report_get(&r.rep);
  rec_send(&r);
  signal(sig, SIG_DFL);
  raise(sig); /* delivered when the handler returns: the child dies by sig */
}

static void child_install_handlers(void) {
  sh_sim_on_failure(on_sim_failure);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_fatal_signal;
  sa.sa_flags = SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  /* assert() aborts; sanitizers do not handle SIGABRT by default. SIGUSR1
   * is the watchdog's. */
  sigaction(SIGABRT, &sa, NULL);
  sigaction(SIGUSR1, &sa, NULL);
  if (__sanitizer_set_death_callback != NULL) {
    /* The sanitizers own the other fatal signals (their report is better). */
    __sanitizer_set_death_callback(on_sanitizer_death);
    return;
  }
  /* An alternate stack, so that a fiber's stack overflow still reports. */
  size_t sz = 64 * 1024;
  stack_t ss = {.ss_sp = malloc(sz), .ss_size = sz};
  if (ss.ss_sp != NULL) sigaltstack(&ss, NULL);
  static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
  for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++) sigaction(fatal[i], &sa, NULL);
}

static void unit_run_once(const args *a, const plan *p, uint64_t u, rec *out) {
  const sh_scenario *sc = unit_scn(p, u);
  uint64_t seed = unit_seed(p, u);
  sh_sim_options o = a->sim;
  o.seed = seed;
  o.vtime_limit_ns = sh_scenario_vtime_limit_ns(sc);
  o.max_steps = sh_scenario_max_steps(sc, o.max_steps);
  rec_init(out, u, REC_RESULT);
  sh_scn_result r;
  child.start_ns = now_ns();
  sh_sim_configure(&o);
  sh_scenario_run(sc, seed, a->workers, &r);
  schedule_record();
  out->real_ns = now_ns() - child.start_ns;
  sh_sim_report_get(&out->rep);
  out->ok = r.ok;
  out->msgs = r.stats.delivered;
  if (!r.ok) rec_fail(out, r.kind, r.detail);
}

/* --check-determinism: the same seed again must retrace the same run. */
static void unit_check_again(const args *a, const plan *p, uint64_t u, rec *first) {
  rec again;
  unit_run_once(a, p, u, &again);
  if (again.rep.hash == first->rep.hash && again.rep.steps == first->rep.steps &&
      again.ok == first->ok)
    return;
  char d[256];
  snprintf(d, sizeof(d), "hash 0x%016llx steps %llu, then hash 0x%016llx steps %llu",
           (unsigned long long)first->rep.hash, (unsigned long long)first->rep.steps,
           (unsigned long long)again.rep.hash, (unsigned long long)again.rep.steps);
  rec_fail(first, "nondeterministic", d);
}

static void unit_run(const args *a, const plan *p, uint64_t u, rec *out) {
  child.unit = u;
  unit_run_once(a, p, u, out);
  if (a->check_determinism && out->ok) unit_check_again(a, p, u, out);
}

/* LeakSanitizer (sanitizer builds): every allocation of a run must be freed
 * by its end. The report goes to stderr, where the parent finds the detail.
 * A check costs several ms (longer than most runs), so a sweep's child
 * checks once for all its runs and the parent rechecks a leaking range run
 * by run (child_run_units). */
static bool leaked(void) {
  return __lsan_do_recoverable_leak_check != NULL && __lsan_do_recoverable_leak_check() != 0;
}

static void child_check_range(uint64_t lo, uint64_t hi) {
  if (lo >= hi || !leaked()) return;
  rec r;
  rec_init(&r, lo, REC_LEAKED);
  r.unit_end = hi;
  rec_send(&r);
}

/* Runs the units [lo, hi), up to the first failure: a failed run may leave
 * the process broken, so the next one starts in a fresh child. */
static void child_run_units(const args *a, const plan *p, uint64_t lo, uint64_t hi, bool leak_each) {
  for (uint64_t u = lo; u < hi; u++) {
    rec r;
    unit_run(a, p, u, &r);
    if (leak_each && r.ok && leaked()) rec_fail(&r, "leak", "");
    r.type = r.ok ? REC_RESULT : REC_LAST;
    /* The failed run's own leaks are in this check too; its recheck fails
     * the same way again, which explains them. */
    if (!leak_each && !r.ok) child_check_range(lo, u + 1);
    rec_send(&r);
    if (!r.ok) return;
  }
  if (!leak_each) child_check_range(lo, hi);
}

/* ---- parent side: children and their pipes -------------------------------------------- */

typedef struct slot {
  pid_t pid;            /* 0: free */
  int rec_fd, err_fd;   /* read ends; -1 once at EOF */
  uint64_t next, end;   /* units [next, end) not reported yet */
  uint64_t child_end;   /* the child runs [next, child_end): a recheck runs one per child */
  uint64_t started_ns;  /* when `next` started (the watchdog's reference) */
  bool leak_each;       /* leak check after each run (else once, after the last) */
  bool recheck;         /* rechecking a leaking range: only leaks are news */
  bool leak_found;      /* the recheck found one (kept across restarts in its range) */
  uint64_t range_lo;    /* the recheck's first unit */
  bool killed;          /* by the watchdog */
  uint64_t killed_ns;   /* when the watchdog asked it to report and die */
  bool held_valid;
  rec held;             /* a partial or last record, used when the child is reaped */
  size_t rlen;
  char rbuf[sizeof(rec)];
  size_t tlen;
  char tail[TAIL_BYTES]; /* the last bytes of the child's stderr */
} slot;

typedef struct range {
  uint64_t lo, hi;
} range;

typedef struct runner runner;
typedef void (*result_fn)(void *ctx, const rec *r);
typedef void (*tick_fn)(void *ctx);

struct runner {
  const args *a;
  const plan *p;
  slot *slots;
  size_t nslots;
  uint64_t handed; /* units [0, handed) have gone to a child */
  uint64_t chunk;
  bool echo_stderr; /* run: the child's stderr is shown as it comes */
  bool leak_each;   /* run: check for leaks after the run itself */
  range rechecks[JOBS_MAX]; /* leaking ranges to run again one by one, first */
  size_t nrechecks;
  result_fn on_result;
  tick_fn on_tick;
  void *ctx;
};

/* shsim could not go on (no fork, no pipe): end its own children, exit 2. */
__attribute__((noreturn)) static void runner_die(runner *rn, const char *what, int err) {
  fprintf(stderr, "shsim: %s: %s\n", what, strerror(err));
  for (size_t i = 0; i < rn->nslots; i++)
    if (rn->slots[i].pid > 0) kill(rn->slots[i].pid, SIGKILL);
  exit(2);
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

__attribute__((noreturn)) static void child_main(runner *rn, slot *me, pid_t parent, int rec_w,
                                                 int err_w) {
  /* A parent gone (killed) must not leave a hung simulation behind. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  for (size_t i = 0; i < rn->nslots; i++) {
    close_fd(&rn->slots[i].rec_fd);
    close_fd(&rn->slots[i].err_fd);
  }
  dup2(err_w, STDERR_FILENO);
  close(err_w);
  child.fd = rec_w;
  child.record_path = rn->a->record_path;
  child_install_handlers();
  child_run_units(rn->a, rn->p, me->next, me->child_end, me->leak_each);
  fflush(NULL);
  _exit(0);
}

static void slot_spawn(runner *rn, slot *s, uint64_t begin, uint64_t end) {
  int rp[2], ep[2];
  if (pipe2(rp, O_CLOEXEC) != 0) runner_die(rn, "pipe", errno);
  if (pipe2(ep, O_CLOEXEC) != 0) runner_die(rn, "pipe", errno);
  s->next = begin;
  s->end = end;
  /* A recheck runs each unit alone, so that a leak it finds is the unit's own
   * and `shsim run` reproduces it. */
  s->child_end = s->recheck ? begin + 1 : end;
  fflush(NULL); /* else the child would flush the parent's buffered output again */
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) runner_die(rn, "fork", errno);
  if (pid == 0) {
    close(rp[0]);
    close(ep[0]);
    child_main(rn, s, parent, rp[1], ep[1]);
  }
  close(rp[1]);
  close(ep[1]);
  s->pid = pid;
  s->rec_fd = rp[0];
  s->err_fd = ep[0];
  s->started_ns = now_ns();
  s->killed = false;
  s->held_valid = false;
  s->rlen = 0;
  s->tlen = 0;
}

/* Gives a free slot its next range: a leak recheck first, else a new chunk. */
static bool slot_assign(runner *rn, slot *s) {
  if (rn->nrechecks > 0) {
    range r = rn->rechecks[--rn->nrechecks];
    s->recheck = s->leak_each = true;
    s->leak_found = false;
    s->range_lo = r.lo;
    slot_spawn(rn, s, r.lo, r.hi);
    return true;
  }
  if (rn->handed >= rn->p->nunits) return false;
  uint64_t end = rn->handed + rn->chunk;
  if (end > rn->p->nunits) end = rn->p->nunits;
  s->recheck = false;
  s->leak_each = rn->leak_each;
  slot_spawn(rn, s, rn->handed, end);
  rn->handed = end;
  return true;
}

static void runner_fill(runner *rn) {
  for (size_t i = 0; i < rn->nslots; i++)
    if (rn->slots[i].pid == 0 && !slot_assign(rn, &rn->slots[i])) return;
}

/* The unit s->next is over: hand its result on. */
static void slot_report(runner *rn, slot *s, rec *r) {
  r->recheck = s->recheck;
  /* Any failure explains the leak: a failed run may well leave memory behind. */
  if (s->recheck && !r->ok) s->leak_found = true;
  rn->on_result(rn->ctx, r);
  s->next++;
  s->started_ns = now_ns();
}

/* A recheck found no run that leaks or fails alone: the leak needs several
 * runs in one process (state kept across runs); blame the range's first unit. */
static void recheck_unexplained(runner *rn, uint64_t lo, uint64_t hi) {
  rec r;
  rec_init(&r, lo, REC_RESULT);
  char d[200];
  snprintf(d, sizeof(d), "the runs from %s seed %llu to %s seed %llu leak in one process, none alone",
           unit_scn(rn->p, lo)->name, (unsigned long long)unit_seed(rn->p, lo),
           unit_scn(rn->p, hi - 1)->name, (unsigned long long)unit_seed(rn->p, hi - 1));
  rec_fail(&r, "leak", d);
  r.recheck = 1;
  rn->on_result(rn->ctx, &r);
}

static void runner_recheck(runner *rn, slot *s, const rec *r) {
  if (s->recheck) return; /* its runs are checked one by one already */
  if (rn->nrechecks < JOBS_MAX) {
    rn->rechecks[rn->nrechecks++] = (range){r->unit, r->unit_end};
    return;
  }
  /* Full (ranges go to free slots first, so only a storm of leaks fills it):
   * report the range as it is. */
  recheck_unexplained(rn, r->unit, r->unit_end);
}

static void slot_on_record(runner *rn, slot *s, rec *r) {
  if (r->type == REC_LEAKED) {
    runner_recheck(rn, s, r);
    return;
  }
  if (r->unit != s->next) {
    fprintf(stderr, "shsim: a child reported unit %llu, expected %llu (ignored)\n",
            (unsigned long long)r->unit, (unsigned long long)s->next);
    return;
  }
  if (r->type != REC_RESULT) {
    s->held = *r;
    s->held_valid = true;
    return;
  }
  slot_report(rn, s, r);
}

static void slot_read_records(runner *rn, slot *s) {
  ssize_t n = read(s->rec_fd, s->rbuf + s->rlen, sizeof(s->rbuf) - s->rlen);
  if (n < 0 && errno == EINTR) return;
  if (n <= 0) {
    close_fd(&s->rec_fd);
    return;
  }
  s->rlen += (size_t)n;
  if (s->rlen < sizeof(rec)) return;
  rec r;
  memcpy(&r, s->rbuf, sizeof(r));
  s->rlen = 0;
  slot_on_record(rn, s, &r);
}

static void tail_append(slot *s, const char *buf, size_t n) {
  if (n >= TAIL_BYTES) {
    buf += n - TAIL_BYTES;
    n = TAIL_BYTES;
  }
  if (s->tlen + n > TAIL_BYTES) {
    size_t drop = s->tlen + n - TAIL_BYTES;
    memmove(s->tail, s->tail + drop, s->tlen - drop);
    s->tlen -= drop;
  }
  memcpy(s->tail + s->tlen, buf, n);
  s->tlen += n;
}

static void slot_read_stderr(runner *rn, slot *s) {
  char buf[4096];
  ssize_t n = read(s->err_fd, buf, sizeof(buf));
  if (n < 0 && errno == EINTR) return;
  if (n <= 0) {
    close_fd(&s->err_fd);
    return;
  }
  if (rn->echo_stderr && write(STDERR_FILENO, buf, (size_t)n) < 0) rn->echo_stderr = false;
  tail_append(s, buf, (size_t)n);
}

/* The most telling line of the child's last stderr output: the last one naming
 * a failed assertion or a sanitizer report, else the last non-empty one. */
static void tail_pick(const slot *s, char *out, size_t cap) {
  static const char *const keys[] = {"Assertion", "runtime error:", "SUMMARY: ", "ERROR: "};
  char text[TAIL_BYTES + 1];
  memcpy(text, s->tail, s->tlen);
  text[s->tlen] = '\0';
  const char *best = NULL;
  for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]) && best == NULL; k++) {
    for (const char *h = strstr(text, keys[k]); h != NULL; h = strstr(h + 1, keys[k])) best = h;
  }
  size_t end = s->tlen;
  while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == ' ')) end--;
  text[end] = '\0';
  if (best == NULL || best >= text + end) best = text + end;
  /* Back to the start of the line it is in. */
  while (best > text && best[-1] != '\n') best--;
  size_t len = strcspn(best, "\n");
  snprintf(out, cap, "%.*s", (int)len, best);
}

static const char *signal_name(int sig) {
  const char *n = sigabbrev_np(sig);
  return n != NULL ? n : "?";
}

/* out = a, or "a: b", or b; truncated to cap. */
static void join(char *out, size_t cap, const char *a, const char *b) {
  size_t n = 0;
  const char *parts[3] = {a, a[0] != '\0' && b[0] != '\0' ? ": " : "", b};
  for (size_t i = 0; i < 3; i++) {
    size_t len = strnlen(parts[i], cap - 1 - n);
    memcpy(out + n, parts[i], len);
    n += len;
  }
  out[n] = '\0';
}

/* A sanitizer report in the child's last stderr output. */
static bool tail_has_sanitizer_report(const slot *s) {
  static const char *const marks[] = {"Sanitizer", "runtime error:"};
  for (size_t k = 0; k < sizeof(marks) / sizeof(marks[0]); k++)
    if (memmem(s->tail, s->tlen, marks[k], strlen(marks[k])) != NULL) return true;
  return false;
}

/* The kind of a death no handler reported, from the wait status. */
static const char *death_kind(const runner *rn, const slot *s, int status, char *why, size_t cap) {
  if (s->killed) {
    snprintf(why, cap, "no result after %llu s of real time: killed",
             (unsigned long long)rn->a->timeout_s);
    return "hang";
  }
  /* gcc links UBSan's runtime apart from ASan's, and its deaths do not call
   * the callback ASan's runtime holds: the report itself tells. */
  bool sanitizer = tail_has_sanitizer_report(s);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    snprintf(why, cap, "SIG%s (%s)", signal_name(sig), strsignal(sig));
    return sanitizer ? "sanitizer" : sig == SIGABRT ? "assert" : "crash";
  }
  snprintf(why, cap, "exited with status %d before reporting", WEXITSTATUS(status));
  return sanitizer ? "sanitizer" : "exit";
}

/* The child died before reporting unit s->next: tell why from what it left. */
static void slot_classify(const runner *rn, const slot *s, int status, rec *r) {
  if (s->held_valid && s->held.type == REC_LAST) {
    /* Its last record said what happened; a sanitizer's detail is on stderr. */
    *r = s->held;
    if (r->detail[0] == '\0') tail_pick(s, r->detail, sizeof(r->detail));
    return;
  }
  rec_init(r, s->next, REC_RESULT);
  if (s->held_valid) {
    r->rep = s->held.rep;
    r->real_ns = s->held.real_ns;
  }
  char why[96], line[200] = "";
  snprintf(r->kind, sizeof(r->kind), "%s", death_kind(rn, s, status, why, sizeof(why)));
  if (!s->killed) tail_pick(s, line, sizeof(line));
  join(r->detail, sizeof(r->detail), why, line);
}

/* Both pipes are at EOF: the child is gone or going. */
static void slot_reap(runner *rn, slot *s) {
  int status = 0;
  while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR) {
  }
  s->pid = 0;
  if (s->next < s->child_end) {
    rec r;
    slot_classify(rn, s, status, &r);
    slot_report(rn, s, &r);
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "shsim: a child died after reporting all its runs (status 0x%x)\n", status);
  }
  /* The rest of the range on a fresh child. */
  if (s->next < s->end) slot_spawn(rn, s, s->next, s->end);
  else if (s->recheck && !s->leak_found) recheck_unexplained(rn, s->range_lo, s->end);
}

/* A run past the timeout is asked (SIGUSR1) to send its figures and die,
 * then killed outright if it is still there a grace period later. */
static void runner_watchdog(runner *rn) {
  const uint64_t grace_ns = 1000000000ull;
  uint64_t now = now_ns();
  for (size_t i = 0; i < rn->nslots; i++) {
    slot *s = &rn->slots[i];
    if (s->pid == 0) continue;
    if (s->killed) {
      if (now - s->killed_ns >= grace_ns) kill(s->pid, SIGKILL);
    } else if (now - s->started_ns >= rn->a->timeout_s * 1000000000ull) {
      kill(s->pid, SIGUSR1);
      s->killed = true;
      s->killed_ns = now;
    }
  }
}

/* Waits up to TICK_MS for output of any child and handles it. */
static void runner_poll(runner *rn) {
  struct pollfd pfd[2 * JOBS_MAX];
  slot *owner[2 * JOBS_MAX];
  nfds_t n = 0;
  for (size_t i = 0; i < rn->nslots; i++) {
    slot *s = &rn->slots[i];
    if (s->pid == 0) continue;
    int fds[2] = {s->rec_fd, s->err_fd};
    for (size_t k = 0; k < 2; k++) {
      if (fds[k] < 0) continue;
      pfd[n] = (struct pollfd){.fd = fds[k], .events = POLLIN};
      owner[n++] = s;
    }
  }
  int ready = poll(pfd, n, TICK_MS);
  if (ready < 0 && errno != EINTR) runner_die(rn, "poll", errno);
  for (nfds_t k = 0; k < n && ready > 0; k++) {
    if (pfd[k].revents == 0) continue;
    slot *s = owner[k];
    if (pfd[k].fd == s->rec_fd) slot_read_records(rn, s);
    else slot_read_stderr(rn, s);
  }
  for (size_t i = 0; i < rn->nslots; i++) {
    slot *s = &rn->slots[i];
    if (s->pid != 0 && s->rec_fd < 0 && s->err_fd < 0) slot_reap(rn, s);
  }
}

static bool runner_busy(const runner *rn) {
  for (size_t i = 0; i < rn->nslots; i++)
    if (rn->slots[i].pid != 0) return true;
  return false;
}

/* Runs every unit of the plan; on_result sees each exactly once, and then
 * the leaks a recheck finds (rec.recheck set; only sweeps recheck). The loop
 * ends because every unit ends: reported, or its child dies, or the
 * watchdog kills it. */
static void runner_run(runner *rn) {
  rn->slots = calloc(rn->nslots, sizeof(slot));
  if (rn->slots == NULL) runner_die(rn, "calloc", ENOMEM);
  for (size_t i = 0; i < rn->nslots; i++) {
    rn->slots[i].rec_fd = -1;
    rn->slots[i].err_fd = -1;
  }
  for (;;) {
    runner_fill(rn);
    if (!runner_busy(rn)) break;
    runner_poll(rn);
    runner_watchdog(rn);
    if (rn->on_tick != NULL) rn->on_tick(rn->ctx);
  }
  free(rn->slots);
  rn->slots = NULL;
}

/* ---- list ------------------------------------------------------------------------------- */

static int cmd_list(const args *a) {
  size_t n = sh_scenario_count();
  for (size_t i = 0; i < n; i++) {
    const sh_scenario *sc = sh_scenario_at(i);
    if (visible(sc)) {
      printf("%-28s %s\n", sc->name, sc->summary);
    } else if (a->all && sc->expect != NULL) {
      printf("%-28s %s [hidden: expects FAIL:%s]\n", sc->name, sc->summary, sc->expect);
    } else if (a->all) {
      printf("%-28s %s [hidden]\n", sc->name, sc->summary);
    }
  }
  return 0;
}

/* ---- run -------------------------------------------------------------------------------- */

static void run_keep(void *ctx, const rec *r) { *(rec *)ctx = *r; }

/* The simulator opens the trace file inside the run, where a bad path would
 * look like a failed setup: try it first. */
static int trace_path_check(const char *path) {
  if (path == NULL) return 0;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    fprintf(stderr, "shsim: cannot write the trace to %s: %s\n", path, strerror(err));
    return -err;
  }
  close(fd);
  return 0;
}

/* One simulation of the plan's first unit, in a child: its record. */
static rec run_unit0(const args *a, const plan *p, bool quiet) {
  rec r;
  rec_init(&r, 0, REC_RESULT);
  rec_fail(&r, "exit", "no result");
  runner rn = {.a = a, .p = p, .nslots = 1, .chunk = 1, .echo_stderr = !quiet, .leak_each = !quiet,
               .on_result = run_keep, .ctx = &r};
  runner_run(&rn);
  return r;
}

static int cmd_run(const args *a, const plan *p) {
  if (trace_path_check(a->sim.trace_path) != 0) return 2;
  rec r = run_unit0(a, p, false);
  const sh_scenario *sc = p->scs[0];
  if (!r.ok) fprintf(stderr, "shsim: %s seed %llu: FAIL:%s: %s\n", sc->name,
                     (unsigned long long)p->seeds.lo, r.kind, r.detail);
  if (a->sim.trace_path != NULL) fprintf(stderr, "shsim: trace in %s\n", a->sim.trace_path);
  printf("scenario=%s seed=%llu result=%s%s hash=0x%016llx steps=%llu vtime_ns=%llu msgs=%llu\n",
         sc->name, (unsigned long long)p->seeds.lo, r.ok ? "ok" : "FAIL:", r.ok ? "" : r.kind,
         (unsigned long long)r.rep.hash, (unsigned long long)r.rep.steps,
         (unsigned long long)r.rep.vtime_ns, (unsigned long long)r.msgs);
  return r.ok ? 0 : 1;
}

/* "shsim CMD NAME --seed N --strategy S" and the options given that shape
 * the run and that CMD accepts. */
/* How shsim was invoked (argv[0]), so that printed commands can be pasted. */
static const char *prog = "shsim";

static void print_command(const args *a, const char *cmd, const char *name, uint64_t seed,
                          unsigned mask) {
  printf("%s %s %s --seed %llu --strategy %s", prog, cmd, name, (unsigned long long)seed,
         sh_sim_strategy_name(a->sim.strategy));
  for (size_t i = 0; i < NOPTS; i++) {
    if (!opts[i].replay || a->given[i] == NULL || !(opts[i].cmds & mask)) continue;
    printf(" %s%s%s", opts[i].name, a->given[i][0] != '\0' ? " " : "", a->given[i]);
  }
}

/* ---- shrink ----------------------------------------------------------------------------- */

typedef struct shrink_ctx {
  args *a;
  const plan *p;
  const char *kind; /* the original failure's */
} shrink_ctx;

/* A replay of schedule c[0..n) in a child: does it fail the same way? */
static bool shrink_fails(void *ctx, const sh_sim_choice *c, size_t n) {
  shrink_ctx *k = ctx;
  k->a->sim.schedule = c;
  k->a->sim.schedule_len = n;
  rec r = run_unit0(k->a, k->p, true);
  return !r.ok && strcmp(r.kind, k->kind) == 0;
}

/* Runs the seed once, recording its schedule in a temporary file. */
static int shrink_record(args *a, const plan *p, rec *r, sh_sim_choice **c, size_t *n) {
  const char *dir = getenv("TMPDIR");
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/shsim-schedule-XXXXXX", dir != NULL ? dir : "/tmp");
  int fd = mkstemp(path);
  if (fd < 0) return -errno;
  close(fd);
  a->record_path = path;
  *r = run_unit0(a, p, true);
  a->record_path = NULL;
  int rc = r->ok ? 0 : schedule_load(path, c, n);
  unlink(path);
  return rc;
}

static void shrink_print(const sh_sim_choice *c, size_t n, uint32_t workers) {
  for (size_t i = 0; i < n && i < 40; i++)
    printf("  step %llu: %s %s %u\n", (unsigned long long)c[i].step,
           c[i].forced ? "then" : "preempt, run", c[i].to == workers ? "the outside fiber" : "worker",
           c[i].to == workers ? 0 : c[i].to);
  if (n > 40) printf("  ... (%zu more)\n", n - 40);
}

static int cmd_shrink(args *a, const plan *p) {
  const sh_scenario *sc = p->scs[0];
  rec r;
  sh_sim_choice *c = NULL;
  size_t n = 0;
  int rc = shrink_record(a, p, &r, &c, &n);
  if (rc != 0) {
    fprintf(stderr, "shsim: recording the schedule failed: %s\n", strerror(-rc));
    return 2;
  }
  if (r.ok) {
    printf("shsim: %s seed %llu passes: nothing to shrink\n", sc->name,
           (unsigned long long)p->seeds.lo);
    return 0;
  }
  printf("shsim: %s seed %llu: FAIL:%s with %zu scheduling choices; shrinking\n", sc->name,
         (unsigned long long)p->seeds.lo, r.kind, n);
  fflush(stdout);
  shrink_ctx k = {.a = a, .p = p, .kind = r.kind};
  uint64_t t0 = now_ns();
  uint32_t trials = 0;
  size_t m = sh_sim_shrink(c, n, shrink_fails, &k, (uint32_t)a->max_trials, &trials);
  bool again = shrink_fails(&k, c, m); /* the result replays as a failure */
  char about[160], out[PATH_MAX];
  snprintf(about, sizeof(about), "scenario=%s seed=%llu fails with FAIL:%s", sc->name,
           (unsigned long long)p->seeds.lo, r.kind);
  snprintf(out, sizeof(out), "%s", a->out_path != NULL ? a->out_path : "");
  if (a->out_path == NULL)
    snprintf(out, sizeof(out), "%s-%llu.schedule", sc->name, (unsigned long long)p->seeds.lo);
  rc = again ? schedule_save(out, c, m, about) : -EPROTO;
  printf("shsim: %zu -> %zu choices in %u replays (%.1f s)%s\n", n, m, trials,
         (double)(now_ns() - t0) / 1e9, trials >= a->max_trials ? ", trial budget spent" : "");
  shrink_print(c, m, a->workers != 0 ? a->workers : sc->workers != 0 ? sc->workers : 2);
  free(c);
  if (rc != 0) {
    fprintf(stderr, "shsim: %s\n", again ? "cannot write the schedule" : "the shrunk schedule no longer fails");
    return 1;
  }
  /* The strategy too: its bookkeeping (PCT's priorities) runs in a replay. */
  printf("replay: ");
  print_command(a, "run", sc->name, p->seeds.lo, CMD_RUN);
  printf(" --schedule %s\n", out);
  return 0;
}

/* ---- sweep ------------------------------------------------------------------------------ */

typedef struct tally {
  uint64_t runs, fails, msgs, real_ns, vtime_ns;
} tally;

typedef struct failure {
  size_t scn; /* failures are listed by scenario, then seed */
  uint64_t seed;
  char kind[32];
  char detail[256];
} failure;

typedef struct sweep {
  const args *a;
  const plan *p;
  tally per[SCN_MAX];
  failure *fails; /* the first FAILURES_KEPT */
  size_t nkept;
  uint64_t nfails, done;
  bool tty;
  uint64_t started_ns, drawn_ns;
} sweep;

static void progress_bar(sweep *sw, bool force) {
  uint64_t now = now_ns();
  if (!force && now - sw->drawn_ns < TICK_MS * 1000000ull) return;
  sw->drawn_ns = now;
  enum { WIDTH = 40 };
  size_t fill = (size_t)(sw->done * WIDTH / sw->p->nunits);
  char bar[WIDTH + 1];
  for (size_t i = 0; i < WIDTH; i++) bar[i] = i < fill ? '#' : '.';
  bar[WIDTH] = '\0';
  fprintf(stderr, "\r[%s] %llu/%llu runs, %llu failed, %.1f s", bar, (unsigned long long)sw->done,
          (unsigned long long)sw->p->nunits, (unsigned long long)sw->nfails,
          (double)(now - sw->started_ns) / 1e9);
}

static void sweep_tick(void *ctx) {
  sweep *sw = ctx;
  if (sw->tty) progress_bar(sw, false);
}

static void sweep_fail(sweep *sw, tally *t, const rec *r) {
  t->fails++;
  sw->nfails++;
  if (sw->nkept == FAILURES_KEPT) return;
  failure *f = &sw->fails[sw->nkept++];
  f->scn = unit_scn_index(sw->p, r->unit);
  f->seed = unit_seed(sw->p, r->unit);
  snprintf(f->kind, sizeof(f->kind), "%s", r->kind);
  snprintf(f->detail, sizeof(f->detail), "%s", r->detail);
}

static void sweep_result(void *ctx, const rec *r) {
  sweep *sw = ctx;
  size_t si = unit_scn_index(sw->p, r->unit);
  tally *t = &sw->per[si];
  if (r->recheck) {
    /* A run counted already (as ok: it ran with others); only its leak is news. */
    if (!r->ok && strcmp(r->kind, "leak") == 0) sweep_fail(sw, t, r);
    return;
  }
  t->runs++;
  t->msgs += r->msgs;
  t->real_ns += r->real_ns;
  t->vtime_ns += r->rep.vtime_ns;
  sw->done++;
  if (!r->ok) sweep_fail(sw, t, r);
  /* Not a terminal (a log): a line at each tenth of the way. */
  if (!sw->tty && sw->done * 10 / sw->p->nunits != (sw->done - 1) * 10 / sw->p->nunits)
    fprintf(stderr, "%llu/%llu runs, %llu failed, %.1f s\n", (unsigned long long)sw->done,
            (unsigned long long)sw->p->nunits, (unsigned long long)sw->nfails,
            (double)(now_ns() - sw->started_ns) / 1e9);
}

/* 1234567 -> "1.23M", 1.5 -> "1.5": figures span orders of magnitude. */
static void fmt_si(double v, char *out, size_t cap) {
  static const char suffix[] = " kMGT";
  size_t k = 0;
  while (v >= 1000.0 && k + 1 < sizeof(suffix) - 1) {
    v /= 1000.0;
    k++;
  }
  if (k > 0) snprintf(out, cap, "%.2f%c", v, suffix[k]);
  else snprintf(out, cap, v < 100.0 ? "%.3g" : "%.0f", v);
}

static void tally_add(tally *sum, const tally *t) {
  sum->runs += t->runs;
  sum->fails += t->fails;
  sum->msgs += t->msgs;
  sum->real_ns += t->real_ns;
  sum->vtime_ns += t->vtime_ns;
}

/* msgs/s: messages delivered per second of real time; virt:real: virtual
 * time simulated per unit of real time. */
static void table_row(const char *name, int w, const tally *t) {
  double real_s = (double)t->real_ns / 1e9;
  char rate[32] = "-", ratio[32] = "-", msgs[32];
  fmt_si((double)t->msgs, msgs, sizeof(msgs));
  if (real_s > 0) {
    fmt_si((double)t->msgs / real_s, rate, sizeof(rate));
    fmt_si((double)t->vtime_ns / (double)t->real_ns, ratio, sizeof(ratio));
  }
  printf("%-*s %8llu %8llu %10s %10s %11.1f %10s\n", w, name, (unsigned long long)t->runs,
         (unsigned long long)t->fails, msgs, rate, t->runs ? real_s * 1e3 / (double)t->runs : 0.0,
         ratio);
}

static void sweep_table(const sweep *sw) {
  int w = 8;
  for (size_t i = 0; i < sw->p->nscs; i++) {
    int len = (int)strlen(sw->p->scs[i]->name);
    if (len > w) w = len;
  }
  printf("%-*s %8s %8s %10s %10s %11s %10s\n", w, "scenario", "seeds", "failed", "msgs", "msgs/s",
         "ms/run", "virt:real");
  tally total = {0};
  for (size_t i = 0; i < sw->p->nscs; i++) {
    const tally *t = &sw->per[i];
    table_row(sw->p->scs[i]->name, w, t);
    tally_add(&total, t);
  }
  if (sw->p->nscs > 1) table_row("total", w, &total);
}

static int by_scenario_seed(const void *x, const void *y) {
  const failure *a = x, *b = y;
  if (a->scn != b->scn) return a->scn < b->scn ? -1 : 1;
  return (a->seed > b->seed) - (a->seed < b->seed);
}

/* The command that replays a failed run: the options that shape a run. */
static void print_replay(const sweep *sw, const failure *f) {
  const char *name = sw->p->scs[f->scn]->name;
  print_command(sw->a, "run", name, f->seed, CMD_RUN);
  printf("\n    FAIL:%s: %s\n    to shrink its schedule: ", f->kind, f->detail);
  print_command(sw->a, "shrink", name, f->seed, CMD_SHRINK);
  printf("\n");
}

static void sweep_failures(sweep *sw) {
  if (sw->nfails == 0) return;
  qsort(sw->fails, sw->nkept, sizeof(failure), by_scenario_seed);
  printf("\n%llu failed run%s (replay each with the command shown):\n",
         (unsigned long long)sw->nfails, sw->nfails == 1 ? "" : "s");
  for (size_t i = 0; i < sw->nkept; i++) print_replay(sw, &sw->fails[i]);
  if (sw->nfails > sw->nkept)
    printf("(%llu more not listed)\n", (unsigned long long)(sw->nfails - sw->nkept));
}

/* Units per child: enough that forking is a small part of a child's life,
 * few enough that the children finish together. */
static uint64_t chunk_size(const plan *p, size_t nslots) {
  uint64_t c = p->nunits / ((uint64_t)nslots * 8);
  return c < 1 ? 1 : c > CHUNK_MAX ? CHUNK_MAX : c;
}

static int cmd_sweep(const args *a, const plan *p) {
  sweep *sw = calloc(1, sizeof(*sw));
  failure *fails = calloc(FAILURES_KEPT, sizeof(failure));
  if (sw == NULL || fails == NULL) {
    fprintf(stderr, "shsim: out of memory\n");
    free(sw);
    free(fails);
    return 2;
  }
  *sw = (sweep){.a = a, .p = p, .fails = fails, .tty = isatty(STDERR_FILENO) == 1,
                .started_ns = now_ns()};
  size_t nslots = a->jobs < p->nunits ? (size_t)a->jobs : (size_t)p->nunits;
  runner rn = {.a = a, .p = p, .nslots = nslots, .chunk = chunk_size(p, nslots),
               .on_result = sweep_result, .on_tick = sweep_tick, .ctx = sw};
  runner_run(&rn);
  if (sw->tty) {
    progress_bar(sw, true);
    fputc('\n', stderr);
  }
  printf("strategy %s, seeds %llu..%llu, %zu job%s, %.2f s\n", sh_sim_strategy_name(a->sim.strategy),
         (unsigned long long)p->seeds.lo, (unsigned long long)p->seeds.hi, nslots,
         nslots == 1 ? "" : "s", (double)(now_ns() - sw->started_ns) / 1e9);
  sweep_table(sw);
  sweep_failures(sw);
  int status = sw->nfails != 0 ? 1 : 0;
  free(fails);
  free(sw);
  return status;
}

int main(int argc, char **argv) {
  if (argc > 0 && argv[0] != NULL && argv[0][0] != '\0') prog = argv[0];
  args a;
  int rc = parse_args(argc, argv, &a);
  if (rc != 0) return rc > 0 ? 0 : 2;
  if (a.cmd == CMD_LIST) return cmd_list(&a);
  plan p;
  if (plan_make(&a, &p) != 0) return 2;
  sh_sim_choice *loaded = NULL;
  if (a.schedule_path != NULL) {
    size_t n;
    rc = schedule_load(a.schedule_path, &loaded, &n);
    if (rc != 0) {
      fprintf(stderr, "shsim: cannot read the schedule %s: %s\n", a.schedule_path, strerror(-rc));
      return 2;
    }
    a.sim.schedule = loaded;
    a.sim.schedule_len = n;
  }
  rc = a.cmd == CMD_SHRINK ? cmd_shrink(&a, &p) : a.cmd == CMD_RUN ? cmd_run(&a, &p)
                                                                   : cmd_sweep(&a, &p);
  free(loaded);
  return rc;
}
