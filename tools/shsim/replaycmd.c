/*
 * The commands on replay files (replaycmd.h).
 */
#include "replaycmd.h"

#include <errno.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "determinism.h"
#include "pool.h"
#include "runner.h"

/* ---- replay ------------------------------------------------------------------------------ */

static bool file_ok(const args *a, const char *path, const replay_file *f) {
  if (!f->has_header || f->run.scenario == NULL) {
    fprintf(stderr, "shsim: %s names no scenario (a plain schedule: use shsim run NAME --seed N "
                    "--schedule %s)\n", path, path);
    return false;
  }
  if (f->format != REPLAYFILE_FORMAT) {
    fprintf(stderr, "shsim: %s is in format %u; this shsim reads format %d only (%s): record the "
                    "run again with this shsim\n", path, f->format, REPLAYFILE_FORMAT,
            f->format < REPLAYFILE_FORMAT ? "format 1 holds no drawn values, so its replay "
                                            "cannot be exact" : "it is newer");
    return false;
  }
  if (f->incomplete) {
    fprintf(stderr, "shsim: %s: the run made more decisions than the simulator records (4 M): "
                    "it cannot be replayed\n", path);
    return false;
  }
  if (!replayfile_whole(f)) {
    fprintf(stderr, "shsim: %s ends before its last decision (%s): its writer was killed, or "
                    "the file was cut; it cannot replay that run\n", path,
            f->has_declared ? "fewer decisions than its decisions= line says"
                            : "no decisions= line after them");
    return false;
  }
  if (f->binary != replayfile_binary()) {
    fprintf(stderr, "shsim: %s was recorded by another binary (0x%016llx; this one is 0x%016llx: "
                    "another build, library version or scenario table), and a replay is exact "
                    "only on the binary that recorded it%s\n", path,
            (unsigned long long)f->binary, (unsigned long long)replayfile_binary(),
            a->any_binary ? "; replaying anyway (--any-binary)" : ": refused (--any-binary "
                                                                  "replays it all the same)");
    if (!a->any_binary) return false;
  }
  if (f->unknown != NULL)
    fprintf(stderr, "shsim: warning: %s: key '%s' unknown to this shsim, ignored: the replay "
                    "may diverge\n", path, f->unknown);
  return true;
}

/* The replay's own record goes to a temporary file unless --record names
 * one: the comparison reads it back. Removed after the comparison, or at
 * exit if shsim leaves before it (a bad --trace path, a usage error). */
static char replay_tmp[PATH_MAX];

static void remove_replay_tmp(void) {
  if (replay_tmp[0] != '\0') unlink(replay_tmp);
  replay_tmp[0] = '\0';
}

static int temp_file(char *path, size_t size) {
  const char *dir = getenv("TMPDIR");
  snprintf(path, size, "%s/shsim-replay-XXXXXX", dir != NULL ? dir : "/tmp");
  int fd = mkstemp(path);
  if (fd < 0) return -errno;
  close(fd);
  return 0;
}

int replaycmd_load(args *a, replay_file *f) {
  const char *path = a->target;
  size_t line;
  int rc = replayfile_load(path, f, &line);
  if (rc != 0) {
    fprintf(stderr, "shsim: cannot read the replay file %s (line %zu): %s\n", path, line,
            strerror(-rc));
    return 2;
  }
  if (!file_ok(a, path, f)) {
    replayfile_free(f);
    return 2;
  }
  const char *trace = a->sim.trace_path;
  a->sim = f->run.o;
  a->sim.trace_path = trace;
  a->sim.schedule = f->c;
  a->sim.schedule_len = f->n;
  a->sim.replay = 1; /* a file with no decision replays a run that chose nothing */
  a->workers = f->run.workers;
  a->target = f->run.scenario;
  a->seeds = (args_seed_range){f->run.o.seed, f->run.o.seed};
  a->exact = true;
  if (a->record_path == NULL && f->has_context) {
    if ((rc = temp_file(replay_tmp, sizeof(replay_tmp))) != 0) {
      fprintf(stderr, "shsim: cannot make a temporary file: %s\n", strerror(-rc));
      replayfile_free(f);
      return 2;
    }
    a->record_path = replay_tmp;
    atexit(remove_replay_tmp);
  }
  /* Fault injection is an option like any other, carried as its text. */
  if (f->run.faults != NULL && args_set_option(a, "--faults", f->run.faults) == -ENOENT)
    fprintf(stderr, "shsim: warning: this shsim has no --faults: faults=%s ignored: the replay "
                    "may diverge\n", f->run.faults);
  return 0;
}

/* Workers as a run has them: 0 given is the scenario's own, else 2. */
static uint32_t workers_of(const sh_scenario *sc, uint32_t given) {
  return given != 0 ? given : sc->workers != 0 ? sc->workers : 2;
}

/* The header key of the first option in which the file's run differs from
 * the command line's, or NULL. Compared as the runs have them: the file
 * holds the options as configured (the scenario's bounds applied), the
 * command line as given. */
static const char *options_differ(const args *a, const replay_file *f) {
  const sh_sim_options *x = &f->run.o, *y = &a->sim;
  const char *fy = args_given(a, "--faults");
  const sh_scenario *sc = sh_scenario_find(a->target);
  if (strcmp(f->run.scenario, a->target) != 0 || sc == NULL) return "scenario";
  if (x->seed != a->seeds.lo) return "seed";
  if (workers_of(sc, f->run.workers) != workers_of(sc, a->workers)) return "workers";
  if (x->max_steps != sh_scenario_max_steps(sc, y->max_steps)) return "max_steps";
  if (x->strategy != y->strategy) return "strategy";
  if (x->switch_permille != y->switch_permille) return "switch_permille";
  if (x->pct_depth != y->pct_depth || x->pct_steps != y->pct_steps) return "pct_depth/pct_steps";
  if (x->stale_permille != y->stale_permille) return "stale_permille";
  if (x->atomic_points != y->atomic_points) return "atomic_points";
  if ((f->run.faults == NULL) != (fy == NULL) ||
      (fy != NULL && strcmp(f->run.faults, fy) != 0))
    return "faults";
  return NULL;
}

int replaycmd_schedule(args *a, replay_file *f) {
  size_t line;
  int rc = replayfile_load(a->schedule_path, f, &line);
  if (rc != 0) {
    fprintf(stderr, "shsim: cannot read the schedule %s (line %zu): %s\n", a->schedule_path,
            line, strerror(-rc));
    return 2;
  }
  const char *key = NULL;
  if (f->has_header && (!file_ok(a, a->schedule_path, f) || (key = options_differ(a, f)) != NULL)) {
    if (key != NULL)
      fprintf(stderr, "shsim: %s was recorded with other options than this command line's (%s "
                      "differs): its decisions would not replay that run; use shsim replay %s\n",
              a->schedule_path, key, a->schedule_path);
    replayfile_free(f);
    return 2;
  }
  a->sim.schedule = f->c;
  a->sim.schedule_len = f->n;
  a->sim.replay = 1;
  return 0;
}

static replay_outcome outcome_of(const unit_rec *r) {
  replay_outcome o = {.known = true, .ok = r->ok, .hash = r->rep.hash, .steps = r->rep.steps};
  snprintf(o.kind, sizeof(o.kind), "%s", r->ok ? "" : r->kind);
  return o;
}

static void result_words(char *buf, size_t size, bool ok, const char *kind, uint64_t hash) {
  snprintf(buf, size, "%s%s hash 0x%016llx", ok ? "ok" : "FAIL:", ok ? "" : kind,
           (unsigned long long)hash);
}

/* The replay's record against the file's, decision by decision: true if
 * the same; else where they part, to d. */
static bool same_record(const replay_file *f, const char *path, char *d, size_t size) {
  replay_file g;
  size_t line;
  if (replayfile_load(path, &g, &line) != 0 || !g.has_context) {
    snprintf(d, size, "the replay's own record could not be read back");
    return false;
  }
  det_log was = {.c = f->c, .x = f->x, .n = f->n,
                 .rep = {.hash = f->outcome.hash, .steps = f->outcome.steps}};
  det_log now = {.c = g.c, .x = g.x, .n = g.n,
                 .rep = {.hash = f->outcome.hash, .steps = f->outcome.steps}};
  bool same = det_diff(&was, &now, d, size);
  replayfile_free(&g);
  return same;
}

bool replaycmd_after_run(const args *a, const replay_file *f, const unit_rec *r) {
  replay_outcome now = outcome_of(r);
  bool mine = a->record_path == replay_tmp;
  if (a->record_path != NULL && !mine) {
    int rc = replayfile_add_outcome(a->record_path, &now);
    if (rc != 0) fprintf(stderr, "shsim: cannot complete %s: %s\n", a->record_path, strerror(-rc));
    else fprintf(stderr, "shsim: replay file in %s\n", a->record_path);
  }
  if (f == NULL) return false;
  const replay_outcome *was = &f->outcome;
  char where[400] = "";
  bool same_run = !f->has_context || a->record_path == NULL ||
                  same_record(f, a->record_path, where, sizeof(where));
  if (mine) remove_replay_tmp();
  if (!was->known) {
    printf("replay: the file records no result to compare with\n");
    return !same_run;
  }
  if (same_run && was->ok == now.ok && strcmp(was->kind, now.kind) == 0 && was->hash == now.hash) {
    printf("replay matches the recording (hash 0x%016llx)\n", (unsigned long long)now.hash);
    return false;
  }
  char x[80], y[80];
  result_words(x, sizeof(x), now.ok, now.kind, now.hash);
  result_words(y, sizeof(y), was->ok, was->kind, was->hash);
  printf("replay DIVERGED: %s vs recorded %s\n", x, y);
  if (where[0] != '\0')
    printf("replay DIVERGED where (first run: the recording; second: this replay): %s\n", where);
  return true;
}

/* ---- shrink ------------------------------------------------------------------------------ */

typedef struct shrink_ctx {
  args *a;
  const unit_plan *p;
  const char *kind; /* the original failure's */
  unit_rec last;    /* the last replay's */
} shrink_ctx;

/* A replay of decisions c[0..n) in a child: does it fail the same way? */
static bool shrink_fails(void *ctx, const sh_sim_choice *c, size_t n) {
  shrink_ctx *k = ctx;
  k->a->sim.schedule = c;
  k->a->sim.schedule_len = n;
  k->a->sim.replay = 1; /* n may be 0: a run that chooses nothing */
  k->last = runner_run_first(k->a, k->p, true);
  return !k->last.ok && strcmp(k->last.kind, k->kind) == 0;
}

/* Runs the seed once, recording its replay file in a temporary file. */
static int shrink_record(args *a, const unit_plan *p, unit_rec *r, replay_file *f) {
  char path[PATH_MAX];
  int rc = temp_file(path, sizeof(path));
  if (rc != 0) return rc;
  a->record_path = path;
  *r = runner_run_first(a, p, true);
  a->record_path = NULL;
  size_t line;
  rc = r->ok ? 0 : replayfile_load(path, f, &line);
  unlink(path);
  return rc;
}

/* One decision in words, for people; a draw is the nth of its stream. */
static void choice_words(char *buf, size_t size, const sh_sim_choice *c, uint32_t workers,
                         uint64_t nth) {
  unsigned long long step = (unsigned long long)c->step;
  switch (c->kind) {
  case SH_SIM_FAULT:
    snprintf(buf, size, "step %llu: fault point %08x fires", step, c->to);
    return;
  case SH_SIM_STALE:
    snprintf(buf, size, "step %llu: weak load %u reads a stale value", step, c->to);
    return;
  case SH_SIM_DRAW:
    snprintf(buf, size, "draw %llu of %s: %llu", (unsigned long long)nth,
             c->to == SH_SIM_STREAM_SCENARIO ? "the scenario" : c->to == SH_SIM_STREAM_NET
                                                                   ? "the network" : "a stream",
             (unsigned long long)c->value);
    return;
  default:
    snprintf(buf, size, "step %llu: %s %s %u", step,
             c->kind == SH_SIM_FORCED ? "then" : "preempt, run",
             c->to == workers ? "the outside fiber" : "worker", c->to == workers ? 0 : c->to);
  }
}

static void shrink_print(FILE *out, const char *prefix, const sh_sim_choice *c, size_t n,
                         uint32_t workers, size_t max) {
  char w[128];
  uint64_t drawn[SH_SIM_STREAMS] = {0};
  for (size_t i = 0; i < n && i < max; i++) {
    bool draw = c[i].kind == SH_SIM_DRAW && c[i].to < SH_SIM_STREAMS;
    choice_words(w, sizeof(w), &c[i], workers, draw ? drawn[c[i].to]++ : 0);
    fprintf(out, "%s%s\n", prefix, w);
  }
  if (n > max) fprintf(out, "%s... (%zu more)\n", prefix, n - max);
}

static size_t count_kind(const sh_sim_choice *c, size_t n, uint32_t kind) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += c[i].kind == kind;
  return k;
}

/* The shrunk run's whole record is the replay file (an exact replay,
 * decision by decision); the choices the failure needs follow it as
 * comments. */
static int shrink_write(shrink_ctx *k, const sh_sim_choice *c, size_t m, const char *out,
                        uint32_t workers) {
  k->a->record_path = out;
  bool again = shrink_fails(k, c, m); /* the result replays as a failure */
  k->a->record_path = NULL;
  if (!again) return -EPROTO;
  replay_outcome o = outcome_of(&k->last);
  int rc = replayfile_add_outcome(out, &o);
  FILE *f = rc == 0 ? fopen(out, "ae") : NULL;
  if (f == NULL) return rc != 0 ? rc : -errno;
  fprintf(f, "# shrunk: the failure needs these %zu choices (the decisions above are the\n"
             "# whole run they make, replayed exactly):\n", m);
  shrink_print(f, "#   ", c, m, workers, SIZE_MAX);
  return fclose(f) == 0 ? 0 : -errno;
}

/* Shrinks f's decisions; writes the result (if it still fails) to out. */
static int shrink_file(shrink_ctx *k, replay_file *f, const char *out) {
  uint64_t t0 = pool_now_ns();
  uint32_t trials = 0;
  size_t n = f->n, draws = count_kind(f->c, n, SH_SIM_DRAW);
  size_t m = sh_sim_shrink(f->c, n, shrink_fails, k, (uint32_t)k->a->max_trials, &trials);
  uint32_t workers = f->run.workers != 0 ? f->run.workers
                     : k->p->scs[0]->workers != 0 ? k->p->scs[0]->workers : 2;
  int rc = shrink_write(k, f->c, m, out, workers);
  printf("shsim: %zu -> %zu choices (%zu -> %zu of them values drawn) in %u replays (%.1f s)%s\n",
         n, m, draws, count_kind(f->c, m, SH_SIM_DRAW), trials,
         (double)(pool_now_ns() - t0) / 1e9,
         trials >= k->a->max_trials ? ", trial budget spent" : "");
  shrink_print(stdout, "  ", f->c, m, workers, 40);
  if (rc != 0)
    fprintf(stderr, "shsim: %s\n", rc == -EPROTO ? "the shrunk choices no longer fail"
                                                   : "cannot write the replay file");
  return rc;
}

int replaycmd_shrink(args *a, const unit_plan *p) {
  const sh_scenario *sc = p->scs[0];
  unit_rec r;
  replay_file f = {0};
  int rc = shrink_record(a, p, &r, &f);
  if (rc != 0) {
    fprintf(stderr, "shsim: recording the run failed: %s\n", strerror(-rc));
    return 2;
  }
  if (r.ok) {
    printf("shsim: %s seed %llu passes: nothing to shrink\n", sc->name,
           (unsigned long long)p->seeds.lo);
    return 0;
  }
  printf("shsim: %s seed %llu: FAIL:%s with %zu choices; shrinking\n", sc->name,
         (unsigned long long)p->seeds.lo, r.kind, f.n);
  fflush(stdout);
  shrink_ctx k = {.a = a, .p = p, .kind = r.kind};
  char out[PATH_MAX];
  if (a->out_path != NULL) snprintf(out, sizeof(out), "%s", a->out_path);
  else snprintf(out, sizeof(out), "%s-%llu.replay", sc->name, (unsigned long long)p->seeds.lo);
  rc = shrink_file(&k, &f, out);
  replayfile_free(&f);
  if (rc != 0) return 1;
  printf("replay: %s replay %s\n", a->prog, out);
  return 0;
}
