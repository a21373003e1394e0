/*
 * The commands on replay files (replaycmd.h).
 */
#include "replaycmd.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool.h"
#include "runner.h"

/* ---- replay ------------------------------------------------------------------------------ */

static bool file_ok(const char *path, const replay_file *f) {
  if (!f->has_header || f->run.scenario == NULL) {
    fprintf(stderr, "shsim: %s names no scenario (a plain schedule: use shsim run NAME --seed N "
                    "--schedule %s)\n", path, path);
    return false;
  }
  if (f->format > REPLAYFILE_FORMAT) {
    fprintf(stderr, "shsim: %s is in format %u; this shsim reads format %d at most\n", path,
            f->format, REPLAYFILE_FORMAT);
    return false;
  }
  if (f->binary != replayfile_binary())
    fprintf(stderr, "shsim: warning: %s was recorded by another binary (0x%016llx, this is "
                    "0x%016llx): the replay may diverge\n", path, (unsigned long long)f->binary,
            (unsigned long long)replayfile_binary());
  if (f->unknown != NULL)
    fprintf(stderr, "shsim: warning: %s: key '%s' unknown to this shsim, ignored: the replay "
                    "may diverge\n", path, f->unknown);
  return true;
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
  if (!file_ok(path, f)) {
    replayfile_free(f);
    return 2;
  }
  const char *trace = a->sim.trace_path;
  a->sim = f->run.o;
  a->sim.trace_path = trace;
  a->sim.schedule = f->c;
  a->sim.schedule_len = f->n;
  a->workers = f->run.workers;
  a->target = f->run.scenario;
  a->seeds = (args_seed_range){f->run.o.seed, f->run.o.seed};
  a->exact = true;
  /* Fault injection is an option like any other, carried as its text. */
  if (f->run.faults != NULL && args_set_option(a, "--faults", f->run.faults) == -ENOENT)
    fprintf(stderr, "shsim: warning: this shsim has no --faults: faults=%s ignored: the replay "
                    "may diverge\n", f->run.faults);
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

void replaycmd_after_run(const args *a, const replay_file *f, const unit_rec *r) {
  replay_outcome now = outcome_of(r);
  if (a->record_path != NULL) {
    int rc = replayfile_add_outcome(a->record_path, &now);
    if (rc != 0) fprintf(stderr, "shsim: cannot complete %s: %s\n", a->record_path, strerror(-rc));
    else fprintf(stderr, "shsim: replay file in %s\n", a->record_path);
  }
  if (f == NULL) return;
  const replay_outcome *was = &f->outcome;
  if (!was->known) {
    printf("replay: the file records no result to compare with\n");
    return;
  }
  if (was->ok == now.ok && strcmp(was->kind, now.kind) == 0 && was->hash == now.hash) {
    printf("replay matches the recording (hash 0x%016llx)\n", (unsigned long long)now.hash);
    return;
  }
  char x[80], y[80];
  result_words(x, sizeof(x), now.ok, now.kind, now.hash);
  result_words(y, sizeof(y), was->ok, was->kind, was->hash);
  printf("replay DIVERGED: %s vs recorded %s\n", x, y);
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
  k->last = runner_run_first(k->a, k->p, true);
  return !k->last.ok && strcmp(k->last.kind, k->kind) == 0;
}

/* Runs the seed once, recording its replay file in a temporary file. */
static int shrink_record(args *a, const unit_plan *p, unit_rec *r, replay_file *f) {
  const char *dir = getenv("TMPDIR");
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/shsim-replay-XXXXXX", dir != NULL ? dir : "/tmp");
  int fd = mkstemp(path);
  if (fd < 0) return -errno;
  close(fd);
  a->record_path = path;
  *r = runner_run_first(a, p, true);
  a->record_path = NULL;
  size_t line;
  int rc = r->ok ? 0 : replayfile_load(path, f, &line);
  unlink(path);
  return rc;
}

static void shrink_print(const sh_sim_choice *c, size_t n, uint32_t workers) {
  for (size_t i = 0; i < n && i < 40; i++) {
    if (c[i].kind == SH_SIM_FAULT) {
      printf("  step %llu: fault point %08x fires\n", (unsigned long long)c[i].step, c[i].to);
      continue;
    }
    printf("  step %llu: %s %s %u\n", (unsigned long long)c[i].step,
           c[i].kind == SH_SIM_FORCED ? "then" : "preempt, run",
           c[i].to == workers ? "the outside fiber" : "worker", c[i].to == workers ? 0 : c[i].to);
  }
  if (n > 40) printf("  ... (%zu more)\n", n - 40);
}

/* Shrinks f's decisions; writes the result (if it still fails) to out. */
static int shrink_file(shrink_ctx *k, replay_file *f, const char *out) {
  uint64_t t0 = pool_now_ns();
  uint32_t trials = 0;
  size_t n = f->n;
  size_t m = sh_sim_shrink(f->c, n, shrink_fails, k, (uint32_t)k->a->max_trials, &trials);
  bool again = shrink_fails(k, f->c, m); /* the result replays as a failure */
  replay_outcome o = outcome_of(&k->last);
  int rc = again ? replayfile_save(out, &f->run, f->c, m, &o) : -EPROTO;
  printf("shsim: %zu -> %zu decisions in %u replays (%.1f s)%s\n", n, m, trials,
         (double)(pool_now_ns() - t0) / 1e9,
         trials >= k->a->max_trials ? ", trial budget spent" : "");
  shrink_print(f->c, m, f->run.workers != 0 ? f->run.workers : k->p->scs[0]->workers != 0 ? k->p->scs[0]->workers : 2);
  if (rc != 0)
    fprintf(stderr, "shsim: %s\n", again ? "cannot write the replay file" : "the shrunk decisions no longer fail");
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
  printf("shsim: %s seed %llu: FAIL:%s with %zu decisions; shrinking\n", sc->name,
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
