/*
 * shsim: runs scenarios on the deterministic simulator. See `shsim --help`.
 *
 * Every simulation runs in a forked child (runner.h), so that whatever goes
 * wrong in it (a failure the simulator detects, a failed invariant, an
 * assert, a crash, a sanitizer report, a hang) ends as one classified result
 * instead of taking the runner down or hanging it.
 *
 * This tool is not simulated code: it may read the real clock, fork and poll.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "campaign_run.h"
#include "explore.h"
#include "fuzz.h"
#include "merge.h"
#include "pool.h"
#include "report.h"
#include "replaycmd.h"
#include "runner.h"
#include "unit.h"

#define FAILURES_KEPT 1000 /* failures listed after a sweep */
#define PROGRESS_MS 100    /* the progress bar's redraw period, at most */

/* ---- list ------------------------------------------------------------------------------- */

static int cmd_list(const args *a) {
  size_t n = sh_scenario_count();
  for (size_t i = 0; i < n; i++) {
    const sh_scenario *sc = sh_scenario_at(i);
    /* [net]: fuzz draws network weather for it (SH_SCN_NET). */
    const char *net = sc->flags & SH_SCN_NET ? " [net]" : "";
    if (unit_visible(sc)) {
      printf("%-28s %s%s\n", sc->name, sc->summary, net);
    } else if (a->all && sc->expect != NULL) {
      printf("%-28s %s%s [hidden: expects FAIL:%s]\n", sc->name, sc->summary, net, sc->expect);
    } else if (a->all) {
      printf("%-28s %s%s [hidden]\n", sc->name, sc->summary, net);
    }
  }
  return 0;
}

/* ---- run -------------------------------------------------------------------------------- */

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

/* rf: the replay file run (NULL: a plain run). */
static int cmd_run(const args *a, const unit_plan *p, const replay_file *rf) {
  if (trace_path_check(a->sim.trace_path) != 0) return 2;
  unit_rec r = runner_run_first(a, p, false);
  const sh_scenario *sc = p->scs[0];
  if (!r.ok) fprintf(stderr, "shsim: %s seed %llu: FAIL:%s: %s\n", sc->name,
                     (unsigned long long)p->seeds.lo, r.kind, r.detail);
  if (a->sim.trace_path != NULL) fprintf(stderr, "shsim: trace in %s\n", a->sim.trace_path);
  report_run_line(sc, p->seeds.lo, &r);
  if (replaycmd_after_run(a, rf, &r)) return 3;
  return r.ok ? 0 : 1;
}

/* ---- sweep ------------------------------------------------------------------------------ */

typedef struct sweep {
  const args *a;
  const unit_plan *p;
  campaign_run cr; /* the groups, the summaries, --out */
  report_tally per[UNIT_SCN_MAX];
  report_failure *fails; /* the first FAILURES_KEPT */
  size_t nkept;
  uint64_t nfails, done;
  bool tty;
  uint64_t started_ns, drawn_ns;
  int status; /* the exit status */
} sweep;

static void progress_bar(sweep *sw, bool force) {
  uint64_t now = pool_now_ns();
  if (!force && now - sw->drawn_ns < PROGRESS_MS * 1000000ull) return;
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

static void sweep_fail(sweep *sw, report_tally *t, const unit_rec *r) {
  t->fails++;
  sw->nfails++;
  if (sw->nkept == FAILURES_KEPT) return;
  report_failure *f = &sw->fails[sw->nkept++];
  f->scn = unit_scn_index(sw->p, r->unit);
  f->seed = unit_seed(sw->p, r->unit);
  snprintf(f->kind, sizeof(f->kind), "%s", r->kind);
  snprintf(f->detail, sizeof(f->detail), "%s", r->detail);
}

static void sweep_result(void *ctx, const unit_rec *r) {
  sweep *sw = ctx;
  campaign_run_result(&sw->cr, r);
  size_t si = unit_scn_index(sw->p, r->unit);
  report_tally *t = &sw->per[si];
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
            (double)(pool_now_ns() - sw->started_ns) / 1e9);
}

static void sweep_run(sweep *sw) {
  const args *a = sw->a;
  const unit_plan *p = sw->p;
  size_t nslots = a->jobs < p->nunits ? (size_t)a->jobs : (size_t)p->nunits;
  runner rn = {.a = a, .p = p, .nslots = nslots, .chunk = runner_chunk_size(p, nslots),
               .on_result = sweep_result, .on_tick = sweep_tick, .ctx = sw};
  campaign_run_setup(&sw->cr, &rn);
  if (a->time_budget_s != 0) rn.deadline_ns = sw->started_ns + a->time_budget_s * 1000000000ull;
  int rc = nslots == 0 ? 0 : runner_run(&rn); /* none: a shard past the range's end */
  if (sw->tty && p->nunits > 0) {
    progress_bar(sw, true);
    fputc('\n', stderr);
  }
  rc = campaign_run_finish(&sw->cr, rc);
  campaign_run_print_stop(&sw->cr);
  report_sweep_table(a, p, nslots, pool_now_ns() - sw->started_ns, sw->per);
  report_failures(a, p, sw->fails, sw->nkept, sw->nfails);
  campaign_print_groups(&sw->cr.c);
  sw->status = campaign_run_status(&sw->cr, rc);
}

static int cmd_sweep(const args *a, const unit_plan *p) {
  sweep *sw = calloc(1, sizeof(*sw));
  report_failure *fails = calloc(FAILURES_KEPT, sizeof(report_failure));
  if (sw == NULL || fails == NULL) {
    fprintf(stderr, "shsim: out of memory\n");
    free(sw);
    free(fails);
    return 2;
  }
  /* Field by field: a compound literal of it would be a large stack temporary. */
  sw->a = a;
  sw->p = p;
  sw->fails = fails;
  sw->tty = isatty(STDERR_FILENO) == 1;
  sw->started_ns = pool_now_ns();
  int status = 2;
  if (campaign_run_init(&sw->cr, a, p, "sweep") == 0) {
    sweep_run(sw);
    status = sw->status;
  }
  campaign_run_free(&sw->cr);
  free(fails);
  free(sw);
  return status;
}

int main(int argc, char **argv) {
  args a;
  int rc = args_parse(argc, argv, &a);
  if (rc != 0) return rc > 0 ? 0 : 2;
  if (a.cmd == ARGS_CMD_LIST) return cmd_list(&a);
  if (a.cmd == ARGS_CMD_MERGE) return merge_cmd(&a);
  /* Every run would fail its setup (sim.h): one clear line instead. */
  if (sh_sim_fiu_tools() != NULL) {
    fprintf(stderr, "shsim: %s; %s\n", sh_sim_fiu_tools(), SH_SIM_FIU_ADVICE);
    return 2;
  }
  replay_file rf = {0};
  if (a.cmd == ARGS_CMD_REPLAY && (rc = replaycmd_load(&a, &rf)) != 0) return rc;
  if (a.schedule_path != NULL && (rc = replaycmd_schedule(&a, &rf)) != 0) return rc;
  unit_plan p;
  rc = unit_plan_make(&a, &p) != 0                  ? 2
       : a.cmd == ARGS_CMD_SHRINK                   ? replaycmd_shrink(&a, &p)
       : a.cmd == ARGS_CMD_REPLAY                   ? cmd_run(&a, &p, &rf)
       : a.cmd == ARGS_CMD_RUN                      ? cmd_run(&a, &p, NULL)
       : a.cmd == ARGS_CMD_FUZZ                     ? fuzz_cmd(&a, &p)
       : a.cmd == ARGS_CMD_EXPLORE                  ? explore_cmd(&a, &p)
                                                    : cmd_sweep(&a, &p);
  replayfile_free(&rf);
  return rc;
}
