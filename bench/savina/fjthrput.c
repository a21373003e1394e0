/*
 * Savina's Fork-Join Throughput: a driver sends n messages to each of A
 * actors (round after round: one to each, n times); each actor does a small
 * computation per message (sv_fj_work). Messages: A x n. The run ends when
 * the last actor has had its n; the check: every computation was valid and
 * every actor got exactly n (counted again in its stop hook).
 *
 * Savina's benchmark sends from its main thread; here a driver actor sends,
 * as a stackhouse user would (a send from outside a worker allocates the
 * message with malloc, an actor's comes from its worker's pool).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common/specs.h"
#include "common/sv_sh.h"

typedef struct work_notice {
  sh_msg hdr;
  double theta;
} work_notice;
typedef struct go_notice {
  sh_msg hdr;
} go_notice;
SH_MSG_DEFINE(work_notice, SH_NOTICE, 0);
SH_MSG_DEFINE(go_notice, SH_NOTICE, 0);

typedef struct run_ctx {
  const sv_params *p;
  const sh_addr **workers;
  atomic_uint_fast64_t busy;  /* workers that did not get their n yet */
  atomic_uint_fast64_t wrong; /* workers with a bad count or result */
} run_ctx;

typedef struct worker {
  sh_actor base;
  run_ctx *run;
  uint64_t got;
  bool bad;
} worker;

static int worker_init(sh_actor *self, void *arg) {
  ((worker *)self)->run = arg;
  return 0;
}

static sh_yield worker_notice(sh_actor *self, sh_stack *st) {
  worker *w = (worker *)self;
  if (!(sv_fj_work(sh_stack_msg_as(st, work_notice)->theta) > 0)) w->bad = true;
  /* seq_cst (acq_rel would do): the last one's exit comes after every other worker's count. */
  if (++w->got == w->run->p->n && atomic_fetch_sub(&w->run->busy, 1) == 1)
    sh_system_exit(sh_actor_system(self), 0);
  return sh_return(st, NULL);
}

static void worker_stop(sh_actor *self) {
  worker *w = (worker *)self;
  if (w->bad || w->got != w->run->p->n) atomic_fetch_add(&w->run->wrong, 1);
}

static const sh_actor_class worker_class = {
    .name = "fj worker",
    .size = sizeof(worker),
    .init = worker_init,
    .stop = worker_stop,
    .notice = worker_notice,
};

static sh_yield driver_notice(sh_actor *self, sh_stack *st) {
  const run_ctx *r = ((worker *)self)->run;
  int rc = 0;
  for (uint64_t i = 0; i < r->p->n && rc == 0; i++)
    for (uint64_t a = 0; a < r->p->actors && rc == 0; a++)
      rc = sv_sh_notice(r->workers[a], work_notice, .theta = 37.2);
  if (rc != 0) sh_system_exit(sh_actor_system(self), rc);
  return sh_return(st, NULL);
}

static const sh_actor_class driver_class = {
    .name = "fj driver", /* a worker's fields: only its run is used */
    .size = sizeof(worker),
    .init = worker_init,
    .notice = driver_notice,
};

static int start(sh_system *sys, void *ctx) {
  run_ctx *r = ctx;
  int rc = 0;
  for (uint64_t a = 0; a < r->p->actors && rc == 0; a++)
    rc = sh_spawn(sys, &worker_class, r, 1, &r->workers[a]);
  const sh_addr *driver;
  if (rc == 0) rc = sh_spawn(sys, &driver_class, r, 1, &driver);
  if (rc == 0) rc = sv_sh_notice(driver, go_notice);
  return rc;
}

static int run(void *ctx, const sv_params *p, sv_sample *s) {
  (void)ctx;
  run_ctx r = {.p = p};
  atomic_init(&r.busy, p->actors);
  atomic_init(&r.wrong, 0);
  r.workers = calloc(p->actors, sizeof r.workers[0]);
  if (r.workers == NULL) return -ENOMEM;
  int rc = sv_sh_run(p, s, p->actors * p->n, start, &r);
  if (rc == 0 && atomic_load(&r.wrong) != 0) rc = -EPROTO;
  free(r.workers);
  return rc;
}

int main(int argc, char **argv) {
  sv_params p;
  sv_setup(&sv_fjthrput, argc, argv, &p);
  return sv_main(&p, "stackhouse", run, NULL);
}
