/*
 * Campaigns' shared parts (campaign_run.h).
 */
#include "campaign_run.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <stackhouse/stackhouse.h>

#include "pool.h"
#include "replayfile.h"
#include "swarm.h"

#define OPTIONS_MAX 32 /* options recorded in a summary */

volatile sig_atomic_t campaign_run_stop;

static void on_stop(int sig) { campaign_run_stop = sig; }

/* SA_RESETHAND: a second Ctrl-C kills at once, should the first not do. No
 * SA_RESTART: the pool's poll returns and sees the flag. */
void campaign_run_install_stop(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_stop;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

static void describe(campaign_run *cr) {
  const args *a = cr->a;
  campaign_meta *m = &cr->c.meta;
  m->seeds_lo = a->seeds.lo;
  m->seeds_hi = a->seeds.hi;
  m->shard_i = a->shard_i;
  m->shard_n = a->shard_n;
  m->planned = cr->p->nunits;
  snprintf(m->binary, sizeof(m->binary), "0x%016llx", (unsigned long long)replayfile_binary());
  snprintf(m->version, sizeof(m->version), "%d.%d.%d", SH_VERSION_MAJOR, SH_VERSION_MINOR,
           SH_VERSION_PATCH);
  const char *names[OPTIONS_MAX], *values[OPTIONS_MAX];
  size_t n = args_run_options(a, names, values, OPTIONS_MAX), len = 0;
  for (size_t i = 0; i < n && len < sizeof(m->options); i++) {
    int k = snprintf(m->options + len, sizeof(m->options) - len, "%s %s\n", names[i], values[i]);
    if (k > 0) len += (size_t)k;
  }
}

int campaign_run_init(campaign_run *cr, const args *a, const unit_plan *p, const char *command) {
  memset(cr, 0, sizeof(*cr));
  cr->a = a;
  cr->p = p;
  cr->started_ns = pool_now_ns();
  campaign_init(&cr->c, command, a->target);
  describe(cr);
  campaign_run_install_stop();
  if (a->out_path == NULL) return 0;
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/failures.jsonl", a->out_path);
  if ((mkdir(a->out_path, 0777) != 0 && errno != EEXIST) || (cr->jsonl = fopen(path, "we")) == NULL) {
    int err = errno;
    fprintf(stderr, "shsim: --out %s: %s\n", a->out_path, strerror(err));
    return -err;
  }
  return 0;
}

void campaign_run_setup(const campaign_run *cr, runner *rn) {
  rn->stop = &campaign_run_stop;
  rn->record_dir = cr->a->out_path;
}

static void replay_command(const campaign_run *cr, const char *name, uint64_t seed, char *out, size_t cap) {
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  out[0] = '\0';
  if (m == NULL) return;
  if (strcmp(cr->c.meta.command, "fuzz") == 0) swarm_fprint_command(m, cr->a, name, seed);
  else args_fprint_command(m, cr->a, "run", name, seed, ARGS_CMD_RUN);
  fclose(m);
  snprintf(out, cap, "%s", text != NULL ? text : "");
  free(text);
}

/* failures.jsonl gets the line at once (flushed): a campaign killed by
 * SIGKILL keeps what it found until then. */
static void add_failure(campaign_run *cr, const unit_rec *r) {
  campaign_failure f;
  memset(&f, 0, sizeof(f));
  const char *name = unit_scn(cr->p, r->unit)->name;
  snprintf(f.scenario, sizeof(f.scenario), "%s", name);
  f.seed = unit_seed(cr->p, r->unit);
  snprintf(f.kind, sizeof(f.kind), "%s", r->kind);
  snprintf(f.detail, sizeof(f.detail), "%s", r->detail);
  replay_command(cr, name, f.seed, f.command, sizeof(f.command));
  campaign_add(&cr->c, &f);
  if (cr->jsonl == NULL) return;
  char replay[PATH_MAX];
  runner_replay_path(cr->a->out_path, name, f.seed, replay, sizeof(replay));
  campaign_put_failure(cr->jsonl, &f, r->replay_kept ? replay : NULL);
  fputc('\n', cr->jsonl);
  fflush(cr->jsonl);
}

void campaign_run_result(campaign_run *cr, const unit_rec *r) {
  if (!r->recheck) campaign_count_run(&cr->c, unit_scn(cr->p, r->unit)->name, (double)r->real_ns / 1e9);
  /* A recheck's run was counted already (as ok: it ran with others); only its leak is news. */
  if (!r->ok && (!r->recheck || strcmp(r->kind, "leak") == 0)) add_failure(cr, r);
}

static int write_one(int rc, const char *what, const char *path, int err) {
  if (err == 0) return rc;
  fprintf(stderr, "shsim: cannot write the %s %s: %s\n", what, path, strerror(-err));
  return 2;
}

int campaign_run_finish(campaign_run *cr, int runner_rc) {
  campaign *c = &cr->c;
  const args *a = cr->a;
  c->seconds = (double)(pool_now_ns() - cr->started_ns) / 1e9;
  if (runner_rc == -EINTR) snprintf(c->meta.stopped, sizeof(c->meta.stopped), "%s",
                                    campaign_run_stop == SIGINT ? "SIGINT" : "SIGTERM");
  else if (c->runs < c->meta.planned) snprintf(c->meta.stopped, sizeof(c->meta.stopped), "time budget");
  int rc = 0;
  if (a->json_path != NULL) rc = write_one(rc, "summary", a->json_path, campaign_write_json(c, a->json_path));
  if (a->junit_path != NULL)
    rc = write_one(rc, "JUnit report", a->junit_path, campaign_write_junit(c, a->junit_path, NULL));
  if (a->out_path != NULL) {
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/summary.json", a->out_path);
    rc = write_one(rc, "summary", path, campaign_write_json(c, path));
  }
  return rc;
}

void campaign_run_print_stop(const campaign_run *cr) {
  const campaign *c = &cr->c;
  const char *stopped = c->meta.stopped;
  if (stopped[0] == '\0') return;
  if (stopped[0] == 'S') printf("stopped by %s: ", stopped);
  else printf("time budget spent: ");
  printf("%llu of %llu runs done\n", (unsigned long long)c->runs, (unsigned long long)c->meta.planned);
}

void campaign_run_free(campaign_run *cr) {
  if (cr->jsonl != NULL) fclose(cr->jsonl);
  cr->jsonl = NULL;
  campaign_free(&cr->c);
}

int campaign_run_status(const campaign_run *cr, int finish_rc) {
  if (cr->c.meta.stopped[0] == 'S') return 128 + (int)campaign_run_stop;
  return finish_rc != 0 ? 2 : cr->c.nfails != 0 ? 1 : 0;
}
