/*
 * The machinery of the bounded-mailbox cases (bounded_cases.h), part two:
 * the driver D, which reacts to what C, H and the producers report as its
 * case's plan says, and running a case: a fresh system, the actors
 * spawned, the run, and bounded_end, with which every case ends (shutdown,
 * then the system's accounting: asks == asks_resolved, sent == delivered +
 * replies_unknown + dropped_stopped, no pooled object outstanding), and
 * the checks of a consumer's log and a mailbox's figures. Part one (the
 * rig, its messages and actors) is bounded_rig.h.
 */
#ifndef TESTS_BOUNDED_DRIVER_H
#define TESTS_BOUNDED_DRIVER_H

#include "bounded_rig.h"

/* ---- the driver D ------------------------------------------------------------- */

struct driver { sh_actor base; rig *r; int queued, done; };
typedef struct d_locals { sh_future *f[D_MAXF]; int nf; } d_locals;
enum { D_DONE = 1 };

static int driver_init(sh_actor *self, void *arg) {
  ((driver *)self)->r = arg;
  return 0;
}

static void d_keep(d_locals *l, sh_future *f) {
  CHECK(l->nf < D_MAXF);
  if (l->nf < D_MAXF) l->f[l->nf++] = f;
}

/* Fills C's mailbox `kind` (sh_notice_try / sh_ask_try) until it refuses;
 * the asks' futures go to l. Returns the refused message, still ours
 * (NULL if none was refused: the bound was not kept). */
static sh_msg *d_fill(driver *d, sh_stack *st, sh_msg_kind kind) {
  rig *r = d->r;
  int k = bkind(kind);
  for (int i = 0; i <= B_FILL_MAX; i++) {
    sh_msg *m = k ? b_ask(B_FILL_FROM, i) : b_notice(B_FILL_FROM, i);
    sh_future *f = NULL;
    int rc = k ? sh_ask_try(st, r->c, m, SH_FOREVER, &f) : sh_notice_try(r->c, m);
    if (rc == -EAGAIN) {
      r->fill_refused[k]++;
      return m;
    }
    CHECK(rc == 0);
    if (rc != 0) {
      sh_msg_free(m);
      return NULL;
    }
    r->filled[k]++;
    if (f != NULL) d_keep(sh_stack_locals(st), f);
  }
  return NULL;
}

/* The driver's futures completed: their outcomes and replies. */
static void d_collect(driver *d, sh_stack *st) {
  rig *r = d->r;
  d_locals *l = sh_stack_locals(st);
  r->d_nf = l->nf;
  for (int i = 0; i < l->nf; i++) {
    r->d_err[i] = sh_future_error(l->f[i]);
    const num_reply *rep = sh_future_reply(l->f[i], num_reply);
    r->d_val[i] = rep != NULL ? rep->v : -1;
  }
}

/* The end of a driver stack that waits for its futures. */
static sh_yield d_wait_all(driver *d, sh_stack *st) {
  if (((d_locals *)sh_stack_locals(st))->nf > 0) return sh_suspend(st, D_DONE);
  th_done(&d->base);
  return sh_return(st, NULL);
}

static sh_yield d_finish(driver *d, sh_stack *st) {
  d_collect(d, st);
  th_done(&d->base);
  return sh_return(st, NULL);
}

static sh_yield d_notice(sh_actor *self, sh_stack *st) {
  driver *d = (driver *)self;
  const driver_plan *plan = d->r->plan;
  const sh_msg *m = sh_stack_msg(st);
  if (sh_msg_is(m, &b_go_type)) return plan->go(d, st);
  const b_report *rep = (const b_report *)m;
  CHECK(sh_msg_is(m, &b_report_type));
  if (rep->kind == R_HELD) return plan->held(d, st);
  if (rep->kind == R_QUEUED) {
    d->queued++;
    if (plan->queued != NULL) plan->queued(d, rep->from);
  } else if (rep->kind == R_DONE) {
    d->done++;
    if (plan->done != NULL) plan->done(d, rep->from);
  }
  return sh_return(st, NULL);
}

static const sh_actor_class driver_class = {
    .name = "b_driver", .size = sizeof(driver), .locals_size = sizeof(d_locals),
    .init = driver_init, .notice = d_notice};

/* ---- running a case -------------------------------------------------------------- */

/* The system of the case running, until bounded_end takes it down; a
 * failed case leaves it to bounded_teardown (the simulator runs one system
 * at a time: the next case needs this one gone). */
static sh_system *bounded_sys;

/* A fresh system of B_WORKERS workers whose run ends after `goal` th_done. */
static sh_system *b_system(int goal) {
  bounded_sys = th_env(B_WORKERS, goal);
  return bounded_sys;
}

static const sh_addr *b_spawn(sh_system *sys, const sh_actor_class *c, void *arg, uint32_t w) {
  return th_spawn_on(sys, c, arg, w % B_WORKERS);
}

/* C with the given capacities, on worker 0. */
static void b_spawn_consumer(sh_system *sys, rig *r, uint32_t notice_cap, uint32_t ask_cap) {
  r->cls[0] = consumer_class(notice_cap, ask_cap);
  r->c = b_spawn(sys, &r->cls[0], &(ccfg){r, 0}, 0); /* the init hook copies it */
}

static void b_spawn_producers(sh_system *sys, rig *r) {
  for (int i = 0; i < r->np; i++) {
    pcfg pc = {r, i};
    r->p[i] = b_spawn(sys, &producer_class, &pc, (uint32_t)i + 1);
  }
}

/* H on worker 1, D on worker 2, and the HOLD barrier sent to C first. */
static void b_spawn_hold(sh_system *sys, rig *r, const driver_plan *plan) {
  r->h = b_spawn(sys, &holder_class, NULL, 1);
  if (plan != NULL) {
    r->plan = plan;
    r->d = b_spawn(sys, &driver_class, r, 2);
  }
  assert_int_equal(sh_notice(r->c, b_new(&b_hold_type, -1, 0)), 0);
}

/* Starts the system; returns when the goal was reached (exit code 0). */
static void b_run(sh_system *sys) { th_run(sys); }

/* Shuts down and frees the system, then checks its accounting. */
static sh_stats bounded_end(sh_system *sys) {
  bounded_sys = NULL;
  return th_end_exact(sys);
}

static void assert_log(const c_log *lg, const int *want, int n) {
  for (int i = 0; i < lg->n && i < n; i++)
    if (lg->e[i] != want[i]) fprintf(stderr, "log[%d] = %d, want %d\n", i, lg->e[i], want[i]);
  assert_int_equal(lg->n, n);
  for (int i = 0; i < n; i++) assert_int_equal(lg->e[i], want[i]);
  assert_int_equal(lg->order_errors, 0);
}

static void assert_box(const sh_mailbox_stats *s, uint32_t cap, uint32_t depth, uint32_t waiting,
                       uint64_t suspended, uint64_t refused) {
  assert_int_equal(s->capacity, cap);
  assert_int_equal(s->depth, depth);
  assert_int_equal(s->waiting, waiting);
  assert_int_equal(s->suspended, suspended);
  assert_int_equal(s->refused, refused);
}

static void c_stats(const rig *r, sh_msg_kind kind, sh_mailbox_stats *out) {
  assert_int_equal(sh_mailbox_stats_get(r->c, 0, kind, out), 0);
}

#endif
