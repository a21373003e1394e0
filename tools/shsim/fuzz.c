/*
 * The fuzz and merge commands (fuzz.h).
 */
#include "fuzz.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "campaign.h"
#include "pool.h"
#include "runner.h"
#include "swarm.h"

#define PROGRESS_MS 100    /* the progress line's redraw period, at most */
#define BUDGET_CHUNK_MAX 4 /* units per child under a time budget: it stops soon after */

typedef struct fuzz {
  const args *a;
  const unit_plan *p;
  campaign c;
  uint64_t done;
  bool tty;
  uint64_t started_ns, drawn_ns;
} fuzz;

static double since_s(const fuzz *fz) { return (double)(pool_now_ns() - fz->started_ns) / 1e9; }

static void progress(fuzz *fz, FILE *f, const char *start, const char *end) {
  double s = since_s(fz);
  fprintf(f, "%s%llu/%llu runs, %.0f runs/s, %llu failed, %.1f s%s", start,
          (unsigned long long)fz->done, (unsigned long long)fz->p->nunits,
          s > 0 ? (double)fz->done / s : 0.0, (unsigned long long)fz->c.nfails, s, end);
}

static void fuzz_tick(void *ctx) {
  fuzz *fz = ctx;
  uint64_t now = pool_now_ns();
  if (!fz->tty || now - fz->drawn_ns < PROGRESS_MS * 1000000ull) return;
  fz->drawn_ns = now;
  progress(fz, stderr, "\r", "  ");
}

static void add_failure(fuzz *fz, const unit_rec *r) {
  campaign_failure f;
  memset(&f, 0, sizeof(f));
  const char *name = unit_scn(fz->p, r->unit)->name;
  snprintf(f.scenario, sizeof(f.scenario), "%s", name);
  f.seed = unit_seed(fz->p, r->unit);
  snprintf(f.kind, sizeof(f.kind), "%s", r->kind);
  snprintf(f.detail, sizeof(f.detail), "%s", r->detail);
  char *cmd = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&cmd, &len);
  if (m != NULL) {
    swarm_fprint_command(m, fz->a, name, f.seed);
    fclose(m);
    snprintf(f.command, sizeof(f.command), "%s", cmd != NULL ? cmd : "");
  }
  free(cmd);
  campaign_add(&fz->c, &f);
}

static void fuzz_result(void *ctx, const unit_rec *r) {
  fuzz *fz = ctx;
  if (r->recheck) {
    /* A run counted already (as ok: it ran with others); only its leak is news. */
    if (!r->ok && strcmp(r->kind, "leak") == 0) add_failure(fz, r);
    return;
  }
  fz->done++;
  if (!r->ok) add_failure(fz, r);
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

static void fuzz_run(fuzz *fz) {
  const args *a = fz->a;
  const unit_plan *p = fz->p;
  size_t nslots = a->jobs < p->nunits ? (size_t)a->jobs : (size_t)p->nunits;
  fuzz_header(a, p, nslots);
  if (nslots == 0) return; /* a shard past the range's end */
  runner rn = {.a = a, .p = p, .nslots = nslots, .chunk = runner_chunk_size(p, nslots),
               .on_result = fuzz_result, .on_tick = fuzz_tick, .ctx = fz};
  if (a->time_budget_s != 0) {
    rn.deadline_ns = fz->started_ns + a->time_budget_s * 1000000000ull;
    if (rn.chunk > BUDGET_CHUNK_MAX) rn.chunk = BUDGET_CHUNK_MAX;
  }
  runner_run(&rn);
  if (fz->tty) progress(fz, stderr, "\r", "\n");
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
  fz->started_ns = pool_now_ns();
  campaign_init(&fz->c, a->target);
  fuzz_run(fz);
  fz->c.runs = fz->done;
  fz->c.seconds = since_s(fz);
  if (fz->done < p->nunits)
    printf("time budget spent: %llu of %llu runs done\n", (unsigned long long)fz->done,
           (unsigned long long)p->nunits);
  campaign_print(&fz->c);
  int status = fz->c.nfails != 0 ? 1 : 0;
  int rc = a->json_path != NULL ? campaign_write_json(&fz->c, a->json_path) : 0;
  if (rc != 0) {
    fprintf(stderr, "shsim: cannot write %s: %s\n", a->json_path, strerror(-rc));
    status = 2;
  }
  campaign_free(&fz->c);
  free(fz);
  return status;
}

int fuzz_merge_cmd(const args *a) {
  campaign c;
  campaign_init(&c, "");
  for (int i = 0; i < a->nfiles; i++) {
    int rc = campaign_read_json(&c, a->files[i]);
    if (rc != 0) {
      fprintf(stderr, "shsim: %s: %s\n", a->files[i],
              rc == -EINVAL ? "not a fuzz summary" : strerror(-rc));
      campaign_free(&c);
      return 2;
    }
  }
  printf("merged %d summar%s\n", a->nfiles, a->nfiles == 1 ? "y" : "ies");
  campaign_print(&c);
  int status = c.nfails != 0 ? 1 : 0;
  campaign_free(&c);
  return status;
}
