/*
 * The fuzz and merge commands (fuzz.h).
 */
#include "fuzz.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "campaign_run.h"
#include "pool.h"
#include "runner.h"

#define PROGRESS_MS 100    /* the progress line's redraw period, at most */
#define BUDGET_CHUNK_MAX 4 /* units per child under a time budget: it stops soon after */

typedef struct fuzz {
  const args *a;
  const unit_plan *p;
  campaign_run cr;
  uint64_t done;
  bool tty;
  uint64_t drawn_ns;
} fuzz;

static double since_s(const fuzz *fz) { return (double)(pool_now_ns() - fz->cr.started_ns) / 1e9; }

static void progress(fuzz *fz, FILE *f, const char *start, const char *end) {
  double s = since_s(fz);
  fprintf(f, "%s%llu/%llu runs, %.0f runs/s, %llu failed, %.1f s%s", start,
          (unsigned long long)fz->done, (unsigned long long)fz->p->nunits,
          s > 0 ? (double)fz->done / s : 0.0, (unsigned long long)fz->cr.c.nfails, s, end);
}

static void fuzz_tick(void *ctx) {
  fuzz *fz = ctx;
  uint64_t now = pool_now_ns();
  if (!fz->tty || now - fz->drawn_ns < PROGRESS_MS * 1000000ull) return;
  fz->drawn_ns = now;
  progress(fz, stderr, "\r", "  ");
}

static void fuzz_result(void *ctx, const unit_rec *r) {
  fuzz *fz = ctx;
  campaign_run_result(&fz->cr, r);
  if (r->recheck) return;
  fz->done++;
  /* Not a terminal (a log): a line at each tenth of the way. */
  uint64_t n = fz->p->nunits;
  if (!fz->tty && fz->done * 10 / n != (fz->done - 1) * 10 / n) progress(fz, stderr, "", "\n");
}

static void fuzz_header(const args *a, const unit_plan *p, size_t nslots) {
  printf("fuzz %s, seeds %llu..%llu", a->target, (unsigned long long)p->seeds.lo,
         (unsigned long long)p->seeds.hi);
  if (a->shard_n > 1)
    printf(", shard %llu/%llu", (unsigned long long)a->shard_i, (unsigned long long)a->shard_n);
  printf(", options drawn per seed, %zu job%s", nslots, nslots == 1 ? "" : "s");
  if (a->time_budget_s != 0) printf(", time budget %llu s", (unsigned long long)a->time_budget_s);
  printf("\n");
  fflush(stdout);
}

static int fuzz_run(fuzz *fz) {
  const args *a = fz->a;
  const unit_plan *p = fz->p;
  size_t nslots = a->jobs < p->nunits ? (size_t)a->jobs : (size_t)p->nunits;
  fuzz_header(a, p, nslots);
  if (nslots == 0) return 0; /* a shard past the range's end */
  runner rn = {.a = a, .p = p, .nslots = nslots, .chunk = runner_chunk_size(p, nslots),
               .on_result = fuzz_result, .on_tick = fuzz_tick, .ctx = fz};
  campaign_run_setup(&fz->cr, &rn);
  if (a->time_budget_s != 0) {
    rn.deadline_ns = fz->cr.started_ns + a->time_budget_s * 1000000000ull;
    if (rn.chunk > BUDGET_CHUNK_MAX) rn.chunk = BUDGET_CHUNK_MAX;
  }
  int rc = runner_run(&rn);
  if (fz->tty) progress(fz, stderr, "\r", "\n");
  return rc;
}

int fuzz_cmd(const args *a, const unit_plan *p) {
  fuzz *fz = calloc(1, sizeof(*fz));
  if (fz == NULL) {
    fprintf(stderr, "shsim: out of memory\n");
    return 2;
  }
  fz->a = a;
  fz->p = p;
  fz->tty = isatty(STDERR_FILENO) == 1;
  if (campaign_run_init(&fz->cr, a, p, "fuzz") != 0) {
    free(fz);
    return 2;
  }
  int rc = campaign_run_finish(&fz->cr, fuzz_run(fz));
  campaign_run_print_stop(&fz->cr);
  campaign_print(&fz->cr.c);
  int status = campaign_run_status(&fz->cr, rc);
  campaign_run_free(&fz->cr);
  free(fz);
  return status;
}
