/*
 * The units of a plan on a pool of children (runner.h).
 */
#include "runner.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "pool.h"
#include "replayfile.h"
#include "report.h"

#define CHUNK_MAX 32 /* units per child: a crash restarts at most this much */

typedef struct run_state run_state;

typedef enum job_phase {
  JOB_FREE,
  JOB_LIVE,
  JOB_AGAIN, /* its child died: the rest of its range waits for a fresh one */
} job_phase;

/* A range of units and the children that run it, one after the other. */
typedef struct job {
  run_state *st;
  job_phase phase;
  uint64_t next, end;  /* units [next, end) not reported yet */
  uint64_t child_end;  /* the child runs [next, child_end): a recheck runs one per child */
  bool leak_each;      /* leak check after each run (else once, after the last) */
  bool recheck;        /* rechecking a leaking range: only leaks are news */
  bool leak_found;     /* the recheck found one (kept across restarts in its range) */
  uint64_t range_lo;   /* the recheck's first unit */
  bool held_valid;
  unit_rec held;       /* a partial or last record, used when the child is gone */
  char rec_path[PATH_MAX]; /* with a record_dir: its children's replay file */
} job;

typedef struct range {
  uint64_t lo, hi;
} range;

struct run_state {
  const runner *rn;
  job *jobs;       /* rn->nslots: no more are live or waiting at once */
  uint64_t handed; /* units [0, handed) have gone to a job */
  range rechecks[POOL_JOBS_MAX]; /* leaking ranges to run again one by one, first */
  size_t nrechecks;
};

static void job_child(void *arg) {
  const job *j = arg;
  const runner *rn = j->st->rn;
  if (rn->record_dir == NULL) {
    child_run(rn->a, rn->p, j->next, j->child_end, j->leak_each);
    return;
  }
  /* The child records the replay file of a run that fails (its last). */
  args a = *rn->a;
  a.record_path = j->rec_path;
  a.record_failed_only = true;
  child_run(&a, rn->p, j->next, j->child_end, j->leak_each);
}

static void job_start(job *j, uint64_t begin, uint64_t end) {
  j->phase = JOB_LIVE;
  j->next = begin;
  j->end = end;
  /* A recheck runs each unit alone, so that a leak it finds is the unit's own
   * and `shsim run` reproduces it. */
  j->child_end = j->recheck ? begin + 1 : end;
  j->held_valid = false;
  /* A child that dies before it records must not leave another run's file. */
  if (j->st->rn->record_dir != NULL) unlink(j->rec_path);
}

static job *job_find(run_state *st, job_phase phase) {
  for (size_t i = 0; i < st->rn->nslots; i++)
    if (st->jobs[i].phase == phase) return &st->jobs[i];
  return NULL;
}

/* A fresh job: a leak recheck first, else a new chunk. */
static bool job_new(run_state *st, job *j) {
  if (st->nrechecks > 0) {
    range r = st->rechecks[--st->nrechecks];
    j->recheck = j->leak_each = true;
    j->leak_found = false;
    j->range_lo = r.lo;
    job_start(j, r.lo, r.hi);
    return true;
  }
  const unit_plan *p = st->rn->p;
  if (st->handed >= p->nunits) return false;
  if (st->rn->deadline_ns != 0 && pool_now_ns() >= st->rn->deadline_ns) return false;
  uint64_t end = st->handed + st->rn->chunk;
  if (end > p->nunits) end = p->nunits;
  j->recheck = false;
  j->leak_each = st->rn->leak_each;
  job_start(j, st->handed, end);
  st->handed = end;
  return true;
}

/* The pool has a free child: the rest of a job whose child died, else a new one. */
static bool runner_next(void *ctx, pool_job *pj) {
  run_state *st = ctx;
  job *j = job_find(st, JOB_AGAIN);
  if (j != NULL) {
    job_start(j, j->next, j->end);
  } else {
    j = job_find(st, JOB_FREE);
    if (j == NULL || !job_new(st, j)) return false;
  }
  *pj = (pool_job){.run = job_child, .arg = j};
  return true;
}

void runner_replay_path(const char *dir, const char *scenario, uint64_t seed, char *out, size_t cap) {
  snprintf(out, cap, "%s/%s-%llu.replay", dir, scenario, (unsigned long long)seed);
}

/* A failed run's replay file, kept under its name with its outcome, if it
 * is the file of that run (a child killed outright records nothing). */
/* --out: the failing run's replay file, if its child wrote one whole, goes
 * to DIR/NAME-SEED.replay with the outcome. True if kept; else no file of
 * that name is left (one of an earlier campaign would be taken for it). */
static bool keep_replay(job *j, const unit_rec *r) {
  const unit_plan *p = j->st->rn->p;
  const char *name = unit_scn(p, r->unit)->name;
  uint64_t seed = unit_seed(p, r->unit);
  replay_file f = {0};
  size_t line;
  bool ours = replayfile_load(j->rec_path, &f, &line) == 0 && f.run.scenario != NULL &&
              strcmp(f.run.scenario, name) == 0 && f.run.o.seed == seed &&
              replayfile_whole(&f);
  replayfile_free(&f);
  char dst[PATH_MAX];
  runner_replay_path(j->st->rn->record_dir, name, seed, dst, sizeof(dst));
  replay_outcome o = {.known = true, .ok = false, .hash = r->rep.hash, .steps = r->rep.steps};
  snprintf(o.kind, sizeof(o.kind), "%s", r->kind);
  if (ours && rename(j->rec_path, dst) == 0 && replayfile_add_outcome(dst, &o) == 0) return true;
  unlink(dst);
  fprintf(stderr, "shsim: %s seed %llu: no replay file kept\n", name, (unsigned long long)seed);
  return false;
}

/* The unit j->next is over: hand its result on. */
static void job_report(job *j, unit_rec *r) {
  if (!r->ok && j->st->rn->record_dir != NULL) r->replay_kept = keep_replay(j, r);
  r->recheck = j->recheck;
  /* Any failure explains the leak: a failed run may well leave memory behind. */
  if (j->recheck && !r->ok) j->leak_found = true;
  j->st->rn->on_result(j->st->rn->ctx, r);
  j->next++;
}

/* A recheck found no run that leaks or fails alone: the leak needs several
 * runs in one process (state kept across runs); blame the range's first unit. */
static void recheck_unexplained(run_state *st, uint64_t lo, uint64_t hi) {
  const unit_plan *p = st->rn->p;
  unit_rec r;
  unit_rec_init(&r, lo, UNIT_REC_RESULT);
  char d[200];
  snprintf(d, sizeof(d),
           "the runs from %s seed %llu to %s seed %llu leak in one process, none alone",
           unit_scn(p, lo)->name, (unsigned long long)unit_seed(p, lo), unit_scn(p, hi - 1)->name,
           (unsigned long long)unit_seed(p, hi - 1));
  unit_rec_fail(&r, "leak", d);
  r.recheck = 1;
  st->rn->on_result(st->rn->ctx, &r);
}

static void recheck_add(run_state *st, const job *j, const unit_rec *r) {
  if (j->recheck) return; /* its runs are checked one by one already */
  if (st->nrechecks < POOL_JOBS_MAX) {
    st->rechecks[st->nrechecks++] = (range){r->unit, r->unit_end};
    return;
  }
  /* Full (ranges go to free children first, so only a storm of leaks fills
   * it): report the range as it is. */
  recheck_unexplained(st, r->unit, r->unit_end);
}

/* A record from j's child. A unit's result is progress (its watchdog restarts). */
static bool runner_on_msg(void *ctx, void *arg, const void *msg) {
  run_state *st = ctx;
  job *j = arg;
  unit_rec r;
  memcpy(&r, msg, sizeof(r));
  if (r.type == UNIT_REC_LEAKED) {
    recheck_add(st, j, &r);
    return false;
  }
  if (r.unit != j->next) {
    fprintf(stderr, "shsim: a child reported unit %llu, expected %llu (ignored)\n",
            (unsigned long long)r.unit, (unsigned long long)j->next);
    return false;
  }
  if (r.type != UNIT_REC_RESULT) {
    j->held = r;
    j->held_valid = true;
    return false;
  }
  job_report(j, &r);
  return true;
}

static void runner_on_end(void *ctx, void *arg, const pool_end *end) {
  run_state *st = ctx;
  job *j = arg;
  if (j->next < j->child_end) {
    unit_rec r;
    report_classify(j->held_valid ? &j->held : NULL, j->next, st->rn->a->timeout_s, end, &r);
    job_report(j, &r);
  } else if (!WIFEXITED(end->status) || WEXITSTATUS(end->status) != 0) {
    fprintf(stderr, "shsim: a child died after reporting all its runs (status 0x%x)\n",
            end->status);
  }
  /* The rest of the range on a fresh child. */
  j->phase = j->next < j->end ? JOB_AGAIN : JOB_FREE;
  if (j->phase == JOB_FREE && j->recheck && !j->leak_found)
    recheck_unexplained(st, j->range_lo, j->end);
}

/* Stopped (SIGINT, SIGTERM): a failure j's child had reported whole (its
 * last record, sent as it ended) is reported; a run cut short is not. */
static void runner_on_stopped(void *ctx, void *arg) {
  (void)ctx;
  job *j = arg;
  if (j->phase == JOB_FREE || !j->held_valid || j->held.type != UNIT_REC_LAST ||
      j->held.ok || j->next >= j->child_end)
    return;
  unit_rec r = j->held;
  j->held_valid = false;
  job_report(j, &r);
}

static void runner_on_tick(void *ctx) {
  const runner *rn = ((run_state *)ctx)->rn;
  if (rn->on_tick != NULL) rn->on_tick(rn->ctx);
}

int runner_run(const runner *rn) {
  run_state st = {.rn = rn, .jobs = calloc(rn->nslots, sizeof(job))};
  const char *what = "calloc";
  int rc = -ENOMEM;
  if (st.jobs != NULL) {
    for (size_t i = 0; i < rn->nslots; i++) {
      st.jobs[i].st = &st;
      if (rn->record_dir != NULL)
        snprintf(st.jobs[i].rec_path, PATH_MAX, "%s/.job-%zu.replay", rn->record_dir, i);
    }
    pool_config c = {.jobs = rn->nslots,
                     .msg_size = sizeof(unit_rec),
                     .timeout_ns = rn->a->timeout_s * 1000000000ull,
                     .echo_stderr = rn->echo_stderr,
                     .next = runner_next,
                     .on_msg = runner_on_msg,
                     .on_end = runner_on_end,
                     .on_stopped = runner_on_stopped,
                     .on_tick = runner_on_tick,
                     .ctx = &st,
                     .stop = rn->stop};
    rc = pool_run(&c, &what);
    for (size_t i = 0; i < rn->nslots && rn->record_dir != NULL; i++) unlink(st.jobs[i].rec_path);
  }
  free(st.jobs);
  if (rc == -EINTR) return rc;
  if (rc != 0) {
    /* shsim could not go on: the pool has ended its children. */
    fprintf(stderr, "shsim: %s: %s\n", what != NULL ? what : "pool", strerror(-rc));
    exit(2);
  }
  return 0;
}

static void keep(void *ctx, const unit_rec *r) { *(unit_rec *)ctx = *r; }

unit_rec runner_run_first(const args *a, const unit_plan *p, bool quiet) {
  unit_rec r;
  unit_rec_init(&r, 0, UNIT_REC_RESULT);
  unit_rec_fail(&r, "exit", "no result");
  runner rn = {.a = a, .p = p, .nslots = 1, .chunk = 1, .echo_stderr = !quiet,
               .leak_each = !quiet, .on_result = keep, .ctx = &r};
  runner_run(&rn);
  return r;
}

/* Enough that forking is a small part of a child's life, few enough that the
 * children finish together. */
uint64_t runner_chunk_size(const unit_plan *p, size_t nslots) {
  uint64_t c = p->nunits / ((uint64_t)nslots * 8);
  return c < 1 ? 1 : c > CHUNK_MAX ? CHUNK_MAX : c;
}
