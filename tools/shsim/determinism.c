/*
 * The determinism check (determinism.h).
 */
#include "determinism.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A malloc'd copy of n items of size sz (NULL for none, or out of memory). */
static void *copy_of(const void *p, size_t n, size_t sz) {
  void *c = n > 0 ? malloc(n * sz) : NULL;
  if (c != NULL) memcpy(c, p, n * sz);
  return c;
}

int det_keep(det_log *l) {
  const sh_sim_choice *c;
  const sh_sim_decision_context *x;
  const sh_sim_point *pt;
  memset(l, 0, sizeof(*l));
  sh_sim_report_get(&l->rep);
  l->n = sh_sim_schedule(&c);
  sh_sim_schedule_context(&x);
  l->npt = sh_sim_points(&pt);
  l->c = copy_of(c, l->n, sizeof(*c));
  l->x = copy_of(x, l->n, sizeof(*x));
  l->pt = copy_of(pt, l->npt, sizeof(*pt));
  if ((l->n > 0 && (l->c == NULL || l->x == NULL)) || (l->npt > 0 && l->pt == NULL)) {
    det_free(l);
    return -ENOMEM;
  }
  return 0;
}

void det_free(det_log *l) {
  free(l->c);
  free(l->x);
  free(l->pt);
  memset(l, 0, sizeof(*l));
}

static const char *kind_name(uint32_t kind) {
  static const char *const names[] = {"preempt", "forced", "fault", "stale", "draw"};
  return kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "?";
}

static bool same_decision(const sh_sim_choice *a, const sh_sim_decision_context *ax,
                          const sh_sim_choice *b, const sh_sim_decision_context *bx) {
  bool where = ax->where == bx->where ||
               (ax->where != NULL && bx->where != NULL && strcmp(ax->where, bx->where) == 0);
  return where && a->step == b->step && a->to == b->to && a->kind == b->kind;
}

/* "step S forced to 3 at park" */
static void decision_words(char *buf, size_t size, const sh_sim_choice *c,
                           const sh_sim_decision_context *x) {
  if (c->kind == SH_SIM_DRAW) {
    snprintf(buf, size, "a draw of stream %u: %llu", c->to, (unsigned long long)c->value);
    return;
  }
  snprintf(buf, size, "step %llu %s %s %u at %s", (unsigned long long)c->step, kind_name(c->kind),
           c->kind == SH_SIM_FAULT ? "point" : "to fiber", c->to,
           x->where != NULL ? x->where : "a fault point");
}

/* Decision i of both runs is the first that differs (i < both counts). */
static void differs_at(const det_log *f, size_t i, const sh_sim_choice *c,
                       const sh_sim_decision_context *x, char *d, size_t size) {
  char a[96], b[96];
  decision_words(a, sizeof(a), &f->c[i], &f->x[i]);
  decision_words(b, sizeof(b), &c[i], &x[i]);
  snprintf(d, size, "decision %zu differs: %s, then %s (trace hash 0x%016llx both)", i, a, b,
           (unsigned long long)x[i].hash);
}

static const char *where_or(const char *w) { return w != NULL ? w : "?"; }

/* The first scheduling point where the runs' hashes part, to d; false if
 * the points kept do not show it. */
static bool points_part(const det_log *f, char *d, size_t size) {
  const sh_sim_point *pt;
  size_t n = sh_sim_points(&pt), common = n < f->npt ? n : f->npt;
  for (size_t k = 0; k < common; k++) {
    if (pt[k].hash == f->pt[k].hash) continue;
    char from[96] = "the start";
    if (k > 0)
      snprintf(from, sizeof(from), "step %llu at %s", (unsigned long long)pt[k - 1].step,
               where_or(pt[k - 1].where));
    snprintf(d, size,
             "same decisions so far, but the trace hash parts between %s and step %llu at %s "
             "(then at %s): 0x%016llx, then 0x%016llx",
             from, (unsigned long long)pt[k].step, where_or(f->pt[k].where),
             where_or(pt[k].where), (unsigned long long)f->pt[k].hash,
             (unsigned long long)pt[k].hash);
    return true;
  }
  return false;
}

/* The hashes part between decision i - 1 (or the start) and step `to`. */
static void hashes_part(uint64_t h1, uint64_t h2, const det_log *f, size_t i, uint64_t to,
                        char *d, size_t size) {
  if (points_part(f, d, size)) return;
  char from[112] = "the start";
  if (i > 0) decision_words(from, sizeof(from), &f->c[i - 1], &f->x[i - 1]);
  snprintf(d, size,
           "same decisions, but the trace hash parts between %s and step %llu (a delivery or "
           "trace point differs): 0x%016llx, then 0x%016llx",
           from, (unsigned long long)to, (unsigned long long)h1, (unsigned long long)h2);
}

/* Compares run b with run a (a's points, if kept, against the current
 * process's): true if they are the same run; else where they part, to d. */
bool det_diff(const det_log *f, const det_log *b, char *d, size_t size) {
  const sh_sim_choice *c = b->c;
  const sh_sim_decision_context *x = b->x;
  size_t n = b->n, common = n < f->n ? n : f->n;
  for (size_t i = 0; i < common; i++) {
    if (x[i].hash != f->x[i].hash) {
      hashes_part(f->x[i].hash, x[i].hash, f, i, c[i].step, d, size);
      return false;
    }
    if (!same_decision(&f->c[i], &f->x[i], &c[i], &x[i])) {
      differs_at(f, i, c, x, d, size);
      return false;
    }
  }
  if (n != f->n) {
    snprintf(d, size, "the first run made %zu decisions, the second %zu: equal for the first %zu",
             f->n, n, common);
    return false;
  }
  if (b->rep.hash == f->rep.hash && b->rep.steps == f->rep.steps) return true;
  hashes_part(f->rep.hash, b->rep.hash, f, n, b->rep.steps, d, size);
  return false;
}

bool det_same(const det_log *f, char *d, size_t size) {
  det_log now = {0};
  sh_sim_report_get(&now.rep);
  const sh_sim_choice *c;
  const sh_sim_decision_context *x;
  now.n = sh_sim_schedule(&c);
  sh_sim_schedule_context(&x);
  now.c = (sh_sim_choice *)c;
  now.x = (sh_sim_decision_context *)x;
  return det_diff(f, &now, d, size);
}
