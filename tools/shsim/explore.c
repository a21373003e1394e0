/*
 * The explore command (explore.h).
 *
 * A run is a scenario, a seed (which draws the run's options as fuzz does:
 * swarm.h) and a choice sequence. The campaign starts with a free run of
 * each (scenario, seed) of the plan; from then on, one run in FRESH_EVERY
 * is a free run of a new seed, and the others replay a mutant of a corpus
 * entry's sequence with that entry's seed. A run whose coverage has
 * something no earlier run had (an edge's hit count in a new AFL bucket, a
 * sometimes-point reached) joins the corpus with its recorded sequence.
 *
 * The mutations work on what a replay follows: the schedule's decisions,
 * anchored by their step, and the values drawn, anchored by their place in
 * their stream. A span of decisions dropped, a preemption inserted a few
 * steps after a decision, a switch sent to another fiber, a value drawn
 * changed, the sequence cut short. A mutant replays its sequence, then goes
 * on as a free run (sh_sim_options.replay_then_free); its record, kept
 * whole, replays it exactly.
 *
 * Runs go in batches of BATCH, on --jobs children as a sweep's do (a child
 * runs a chunk of them, so forking costs little): each run writes its
 * coverage into its own slot of a mapping shared with this process and its
 * sequence into its own replay file, read back here. A batch is chosen
 * before it runs and its results are taken in slot order, whatever order
 * the children finished in; everything the campaign decides comes from its
 * own splitmix64 stream seeded by the plan's first seed, so a campaign on
 * the same binary is the same campaign, on any number of jobs.
 */
#include "explore.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "campaign_run.h"
#include "mutate.h"
#include "pool.h"
#include "replayfile.h"
#include "runner.h"
#include "swarm.h"

#define BATCH 16
#define CORPUS_MAX 1024
/* A corpus entry keeps at most this many of its run's decisions: a longer
 * run is kept as its prefix (a mutant of it replays that, then runs free). */
#define ENTRY_CHOICES_MAX (1u << 15)
/* The corpus's decisions, all entries together, at most (16 bytes each:
 * 64 MiB); past it, random entries make room. */
#define CORPUS_CHOICES_MAX (1u << 22)
#define FRESH_EVERY 4                /* one run in this many is a new seed's */
#define RUNS_DEFAULT 2000
#define PROGRESS_MS 1000

typedef struct entry {
  uint32_t scn;
  uint64_t seed;
  sh_sim_choice *c;
  size_t n;
} entry;

/* One run of a batch: its scenario, seed and the sequence it replays (c
 * NULL: a free run), and where its replay file goes. */
typedef struct slot {
  uint32_t scn;
  uint64_t seed;
  sh_sim_choice *c;
  size_t n;
  char path[PATH_MAX];
  bool done;   /* its result came */
  unit_rec r;
} slot;

typedef struct explorer {
  const args *a;
  const unit_plan *p;
  args_batch hooks;
  sh_sim_coverage *cov; /* BATCH of them, shared with the children */
  slot slots[BATCH];
  sh_sim_choice *scratch[BATCH]; /* the mutants' sequences */
  char dir[PATH_MAX];            /* the slots' replay files */
  uint8_t seen[SH_SIM_EDGES]; /* the AFL buckets each edge reached */
  uint8_t seen_states[SH_SIM_STATES]; /* and each pair of message states */
  uint64_t reached_at[SH_SIM_SOMETIMES_MAX]; /* the first run (1-based) to reach it, 0: none */
  entry corpus[CORPUS_MAX];
  size_t ncorpus;
  size_t corpus_choices; /* the decisions all entries hold */
  uint64_t x; /* the campaign's stream */
  uint64_t runs, fresh, mutants, kept, unkept, edges, states, next_seed, started_ns, drawn_ns;
  bool failed;
  bool stopped; /* by SIGINT or SIGTERM */
  unit_rec fail;
  uint32_t fail_scn;
  uint64_t fail_seed;
  char fail_path[PATH_MAX];
} explorer;

static uint64_t below(explorer *ex, uint64_t n) { return mutate_below(&ex->x, n); }

/* ---- coverage ------------------------------------------------------------------- */

/* AFL's hit-count buckets: 1, 2, 3, 4-7, 8-15, 16-31, 32-127, 128+. */
static uint8_t bucket(uint8_t v) {
  return v == 0 ? 0 : v <= 2 ? v : v == 3 ? 4 : v < 8 ? 8 : v < 16 ? 16 : v < 32 ? 32 : v < 128 ? 64
                                                                                                : 128;
}

/* Whether hits[0..n) has a count in a bucket seen[] lacks; records it, and
 * counts in *nonzero the entries seen for the first time. */
static bool fresh_map(uint8_t *seen, const uint8_t *hits, uint32_t n, uint64_t *nonzero) {
  bool any = false;
  for (uint32_t e = 0; e < n; e++) {
    uint8_t b = bucket(hits[e]);
    if ((b & ~seen[e]) == 0) continue;
    *nonzero += seen[e] == 0;
    seen[e] |= b;
    any = true;
  }
  return any;
}

/* Whether the last run reached something new; records it. */
static bool fresh_coverage(explorer *ex, const sh_sim_coverage *cov) {
  bool any = fresh_map(ex->seen, cov->edges, SH_SIM_EDGES, &ex->edges);
  any |= fresh_map(ex->seen_states, cov->states, SH_SIM_STATES, &ex->states);
  const sh_sim_sometimes *pts;
  size_t n = sh_sim_sometimes_points(&pts);
  for (size_t i = 0; i < n; i++) {
    if (cov->sometimes[i] == 0 || ex->reached_at[i] != 0) continue;
    ex->reached_at[i] = ex->runs;
    any = true;
  }
  return any;
}

/* ---- a batch ----------------------------------------------------------------------- */

/* In the child, before unit u of a batch: the slot's scenario and seed. */
static void batch_pick(void *ctx, uint64_t u, const struct sh_scenario **sc, uint64_t *seed) {
  explorer *ex = ctx;
  const slot *s = &ex->slots[u];
  *sc = ex->p->scs[s->scn];
  *seed = s->seed;
}

/* In the child, its options drawn: the sequence, the file, the coverage slot. */
static void batch_options(void *ctx, uint64_t u, sh_sim_options *o, const char **record_path) {
  explorer *ex = ctx;
  const slot *s = &ex->slots[u];
  o->schedule = s->c;
  o->schedule_len = s->n;
  o->replay = s->c != NULL;
  o->replay_then_free = s->c != NULL; /* the mutated prefix, then the strategy */
  *record_path = s->path;
  /* Cleared here, not only before the batch: a leak recheck runs the slot again. */
  memset(&ex->cov[u], 0, sizeof(ex->cov[u]));
  sh_sim_coverage_attach(&ex->cov[u]);
}

static void batch_result(void *ctx, const unit_rec *r) {
  explorer *ex = ctx;
  if (r->unit >= BATCH) return;
  /* A leak recheck (sanitizer builds) reruns one slot: a leak it finds is
   * that run's failure; anything else it says was said already. */
  if (r->recheck && (r->ok || strcmp(r->kind, "leak") != 0)) return;
  ex->slots[r->unit].r = *r;
  ex->slots[r->unit].done = true;
}

/* Runs slots[0..k) on the children: 0, or -EINTR when a signal stopped it. */
static int run_batch(explorer *ex, size_t k) {
  args a = *ex->a;
  a.cmd = ARGS_CMD_FUZZ; /* each seed draws its options as fuzz's do */
  a.batch = &ex->hooks;
  a.record_path = ex->slots[0].path; /* replaced per unit; set, so contexts are kept */
  unit_plan plan = {.nscs = 1, .seeds = {1, k}, .first = 1, .stride = 1, .nseeds = k, .nunits = k};
  plan.scs[0] = ex->p->scs[0];
  memset(ex->cov, 0, k * sizeof(*ex->cov));
  for (size_t i = 0; i < k; i++) {
    /* No file of an earlier batch may pass for this run's. */
    unlink(ex->slots[i].path);
    ex->slots[i].done = false;
  }
  size_t jobs = a.jobs < k ? (size_t)a.jobs : k;
  runner rn = {.a = &a, .p = &plan, .nslots = jobs, .chunk = (k + jobs - 1) / jobs,
               .on_result = batch_result, .ctx = ex, .stop = &campaign_run_stop};
  return runner_run(&rn);
}

/* The slot's replay file, read, if it is its run's (scenario and seed). */
static bool load_own(const explorer *ex, const slot *s, replay_file *f) {
  size_t line;
  if (replayfile_load(s->path, f, &line) != 0) return false;
  if (f->has_header && f->run.scenario != NULL &&
      strcmp(f->run.scenario, ex->p->scs[s->scn]->name) == 0 && f->run.o.seed == s->seed)
    return true;
  replayfile_free(f);
  return false;
}

/* True if the run joined the corpus. */
static bool keep(explorer *ex, const slot *s) {
  replay_file f = {0};
  if (!load_own(ex, s, &f)) return false;
  size_t n = f.n < ENTRY_CHOICES_MAX ? f.n : ENTRY_CHOICES_MAX;
  sh_sim_choice *c = f.c != NULL ? malloc((n + 1) * sizeof(*c)) : NULL;
  if (c != NULL) { /* else out of memory: the corpus just does not grow */
    memcpy(c, f.c, n * sizeof(*c));
    /* Full (in entries or decisions): random entries make room, at most
     * all of them (the last moves into the place of the one let go). */
    while (ex->ncorpus > 0 &&
           (ex->ncorpus == CORPUS_MAX || ex->corpus_choices + n > CORPUS_CHOICES_MAX)) {
      size_t j = (size_t)below(ex, ex->ncorpus);
      ex->corpus_choices -= ex->corpus[j].n;
      free(ex->corpus[j].c);
      ex->corpus[j] = ex->corpus[--ex->ncorpus];
    }
    size_t i = ex->ncorpus++;
    ex->corpus_choices += n;
    ex->corpus[i] = (entry){s->scn, s->seed, c, n};
    ex->kept++;
  }
  replayfile_free(&f);
  return c != NULL;
}

/* rename, or a copy where src and dst are on two filesystems (TMPDIR on a
 * tmpfs). 0 or -errno. */
static int move_file(const char *src, const char *dst) {
  if (rename(src, dst) == 0) return 0;
  if (errno != EXDEV) return -errno;
  int in = open(src, O_RDONLY | O_CLOEXEC), rc = 0;
  int out = in < 0 ? -1 : open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  char buf[1 << 16];
  ssize_t r = out < 0 ? -1 : 0;
  /* Bounded by the file's size: each pass copies a block or ends. */
  while (out >= 0 && (r = read(in, buf, sizeof(buf))) > 0)
    if (write(out, buf, (size_t)r) != r) r = -1;
  if (in < 0 || out < 0 || r < 0) rc = -errno;
  if (in >= 0) close(in);
  if (out >= 0 && close(out) != 0 && rc == 0) rc = -errno;
  if (rc == 0) unlink(src);
  return rc;
}

static void failed(explorer *ex, const slot *s) {
  ex->failed = true;
  ex->fail = s->r;
  ex->fail_scn = s->scn;
  ex->fail_seed = s->seed;
  const char *dir = ex->a->out_path != NULL ? ex->a->out_path : ".";
  snprintf(ex->fail_path, sizeof(ex->fail_path), "%s/explore-%s-%llu-run%llu.replay", dir,
           ex->p->scs[s->scn]->name, (unsigned long long)s->seed, (unsigned long long)ex->runs);
  replay_outcome o = {.known = true, .ok = false, .hash = s->r.rep.hash, .steps = s->r.rep.steps};
  snprintf(o.kind, sizeof(o.kind), "%s", s->r.kind);
  replay_file f = {0};
  bool own = load_own(ex, s, &f);
  if (own) replayfile_free(&f);
  int rc = !own ? -ENOENT : replayfile_add_outcome(s->path, &o);
  if (rc == 0) rc = move_file(s->path, ex->fail_path);
  if (rc != 0) {
    fprintf(stderr, "shsim: no replay file kept for the failure (%s): %s\n", ex->fail_path,
            strerror(-rc));
    ex->fail_path[0] = '\0';
  }
}

/* The results of slots[0..k) in order: coverage, corpus, the first failure. */
static void take_batch(explorer *ex, size_t k) {
  for (size_t i = 0; i < k && !ex->failed; i++) {
    slot *s = &ex->slots[i];
    ex->runs++;
    if (!s->done) { /* the pool lost it */
      unit_rec_init(&s->r, i, UNIT_REC_LAST);
      unit_rec_fail(&s->r, "exit", "no result");
    }
    if (fresh_coverage(ex, &ex->cov[i]) && !keep(ex, s)) ex->unkept++;
    if (!s->r.ok) failed(ex, s);
  }
}

/* ---- the campaign ------------------------------------------------------------------ */

static bool out_of_budget(const explorer *ex, uint64_t budget) {
  if (ex->runs >= budget) return true;
  uint64_t t = ex->a->time_budget_s;
  return t != 0 && pool_now_ns() - ex->started_ns >= t * 1000000000ull;
}

static void progress(explorer *ex, bool last) {
  uint64_t now = pool_now_ns();
  if (!last && now - ex->drawn_ns < PROGRESS_MS * 1000000ull) return;
  ex->drawn_ns = now;
  if (isatty(STDERR_FILENO) != 1) return;
  fprintf(stderr, "\r%llu runs, corpus %zu, %llu edges%s", (unsigned long long)ex->runs,
          ex->ncorpus, (unsigned long long)ex->edges, last ? "\n" : "");
}

/* Slot i: a free run of scenario scn's seed. */
static void set_free(explorer *ex, size_t i, uint32_t scn, uint64_t seed) {
  slot *s = &ex->slots[i];
  s->scn = scn;
  s->seed = seed;
  s->c = NULL;
  s->n = 0;
}

/* Slot i: a fresh seed or a corpus entry's mutant (one in FRESH_EVERY fresh). */
static void set_next(explorer *ex, size_t i) {
  if (ex->ncorpus == 0 || below(ex, FRESH_EVERY) == 0) {
    set_free(ex, i, (uint32_t)below(ex, ex->p->nscs), ex->next_seed++);
    return;
  }
  const entry *e = &ex->corpus[below(ex, ex->ncorpus)];
  slot *s = &ex->slots[i];
  s->scn = e->scn;
  s->seed = e->seed;
  s->c = ex->scratch[i];
  s->n = mutate_sequence(&ex->x, e->c, e->n, s->c);
  ex->mutants++;
}

static void explore_campaign(explorer *ex, uint64_t budget) {
  const unit_plan *p = ex->p;
  /* The plan's runs first, but at most a quarter of the budget: the rest
   * is the exploration's. */
  uint64_t first = p->nunits < budget / FRESH_EVERY ? p->nunits : budget / FRESH_EVERY;
  if (first == 0) first = 1;
  /* Fresh seeds go on after the plan's range (those the cap left out may
   * come up later as fresh ones). */
  ex->next_seed = p->seeds.hi + 1;
  uint64_t u = 0;
  while (!ex->failed && !ex->stopped && !out_of_budget(ex, budget)) {
    size_t k = budget - ex->runs < BATCH ? (size_t)(budget - ex->runs) : BATCH;
    for (size_t i = 0; i < k; i++, u++) {
      if (u < first)
        set_free(ex, i, (uint32_t)unit_scn_index(p, u), unit_seed(p, u));
      else
        set_next(ex, i);
    }
    if (run_batch(ex, k) != 0 || campaign_run_stop != 0) {
      ex->stopped = true; /* a signal: the batch's results are not all there */
      break;
    }
    take_batch(ex, k);
    progress(ex, false);
  }
}

static void report(const explorer *ex) {
  double s = (double)(pool_now_ns() - ex->started_ns) / 1e9;
  printf("explore: %llu runs (%llu of new seeds, %llu mutants) in %.1f s, %.0f runs/s; "
         "corpus %zu (%llu kept)\n",
         (unsigned long long)ex->runs, (unsigned long long)(ex->runs - ex->mutants),
         (unsigned long long)ex->mutants, s, s > 0 ? (double)ex->runs / s : 0.0, ex->ncorpus,
         (unsigned long long)ex->kept);
  if (ex->unkept != 0)
    printf("  %llu runs with new coverage could not join the corpus (their replay file was "
           "not read, or memory ran out)\n", (unsigned long long)ex->unkept);
  if (ex->stopped)
    printf("  stopped by %s\n", campaign_run_stop == SIGINT ? "SIGINT" : "SIGTERM");
  printf("message states: %llu\n", (unsigned long long)ex->states);
  if (sh_sim_coverage_edges_compiled())
    printf("edges: %llu\n", (unsigned long long)ex->edges);
  else
    printf("edges: none recorded: this shsim was not built for them (make explore builds one "
           "that is)\n");
  const sh_sim_sometimes *pts;
  size_t n = sh_sim_sometimes_points(&pts), got = 0;
  for (size_t i = 0; i < n; i++) got += ex->reached_at[i] != 0;
  printf("sometimes-points: %zu of %zu reached\n", got, n);
  for (size_t i = 0; i < n; i++) {
    if (ex->reached_at[i] != 0)
      printf("  reached (run %llu)  %s (%s:%d)\n", (unsigned long long)ex->reached_at[i],
             pts[i].what, pts[i].file, pts[i].line);
    else
      printf("  NEVER reached  %s (%s:%d)\n", pts[i].what, pts[i].file, pts[i].line);
  }
}

static void report_failure(const explorer *ex) {
  const char *name = ex->p->scs[ex->fail_scn]->name;
  printf("FAIL:%s at run %llu: %s seed %llu (%s)\n", ex->fail.kind,
         (unsigned long long)ex->runs, name, (unsigned long long)ex->fail_seed, ex->fail.detail);
  if (ex->fail_path[0] == '\0') return;
  printf("  replay: %s replay %s\n  shrink: ", ex->a->prog, ex->fail_path);
  swarm_fprint_as(stdout, ex->a, "shrink", ARGS_CMD_SHRINK, name, ex->fail_seed);
  printf(" --schedule %s\n", ex->fail_path);
}

static int setup(explorer *ex) {
  ex->hooks = (args_batch){.pick = batch_pick, .options = batch_options, .ctx = ex};
  ex->cov = mmap(NULL, BATCH * sizeof(*ex->cov), PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  bool ok = ex->cov != MAP_FAILED;
  for (size_t i = 0; i < BATCH && ok; i++)
    ok = (ex->scratch[i] = malloc((ENTRY_CHOICES_MAX + MUTANT_SLACK) * sizeof(sh_sim_choice))) != NULL;
  const char *tmp = getenv("TMPDIR");
  snprintf(ex->dir, sizeof(ex->dir), "%s/shsim-explore-XXXXXX", tmp != NULL ? tmp : "/tmp");
  if (!ok || mkdtemp(ex->dir) == NULL) {
    fprintf(stderr, "shsim: explore cannot start: %s\n", strerror(errno));
    ex->dir[0] = '\0';
    return -1;
  }
  for (size_t i = 0; i < BATCH; i++) {
    int n = snprintf(ex->slots[i].path, sizeof(ex->slots[i].path), "%.*s/%zu.replay",
                     PATH_MAX - 16, ex->dir, i);
    if (n <= 0 || n >= PATH_MAX) {
      fprintf(stderr, "shsim: explore cannot start: TMPDIR's path is too long\n");
      return -1;
    }
  }
  ex->started_ns = pool_now_ns();
  return 0;
}

static void teardown(explorer *ex) {
  for (size_t i = 0; i < BATCH && ex->dir[0] != '\0'; i++) unlink(ex->slots[i].path);
  if (ex->dir[0] != '\0') rmdir(ex->dir);
  if (ex->cov != NULL && ex->cov != MAP_FAILED) munmap(ex->cov, BATCH * sizeof(*ex->cov));
  for (size_t i = 0; i < ex->ncorpus; i++) free(ex->corpus[i].c);
  for (size_t i = 0; i < BATCH; i++) free(ex->scratch[i]);
}

int explore_cmd(const args *a, const unit_plan *p) {
  explorer *ex = calloc(1, sizeof(*ex));
  if (ex == NULL) {
    fprintf(stderr, "shsim: out of memory\n");
    return 2;
  }
  ex->a = a;
  ex->p = p;
  campaign_run_install_stop();
  ex->x = p->seeds.lo;
  int status = 2;
  if (setup(ex) == 0) {
    /* A time budget alone bounds the campaign by time. */
    explore_campaign(ex, a->runs != 0 ? a->runs : a->time_budget_s != 0 ? UINT64_MAX : RUNS_DEFAULT);
    progress(ex, true);
    report(ex);
    if (ex->failed) report_failure(ex);
    status = ex->stopped ? 128 + (int)campaign_run_stop : ex->failed ? 1 : 0;
  }
  teardown(ex);
  free(ex);
  return status;
}
