/*
 * Nodes of a cluster simulation (node.h, <stackhouse/cluster.h>): the
 * table of nodes, their clocks, boots, crashes, stops and persisted state.
 * The acts' queue, the nemesis fiber and the cuts are in nodeact.c; a
 * node's declaration and its persisted state in nodeadd.c.
 *
 * A node boots on a thread fiber of its own (its main), which runs
 * sh_run(config, entry, argc, argv) as a process's main would: the system
 * it makes is the node's (platsys.c), and every fiber of it, and every
 * thread it starts, belongs to the node. Allocations made while a node's
 * fiber runs are charged to it (nodemem.c), so that a crash can free them.
 *
 * A crash, made on a fiber of the simulation's own (never on the node's),
 * finds every fiber of the node switched out at a scheduling point: their
 * stacks are freed and their slots emptied without running another line of
 * theirs; the fake network forgets the node's sockets without a word to
 * their peers (net.c); the simulator's models forget what they knew of the
 * node's memory; then that memory is freed.
 *
 * Clocks. Node n's clock is piecewise linear in true time t: from base
 * (base_true, base_local) on, local = base_local + (t - base_true) *
 * (1e6 + ppm) / 1e6, in 128-bit arithmetic. A drift change or a jump
 * starts a new piece at now; with |ppm| < 1e6 a clock only goes backwards
 * by a jump.
 */
#include "node.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stackhouse/cluster.h>

#include "base/check.h"
#include "memmodel.h"
#include "model.h"
#include "net.h"
#include "nodeint.h"
#include "nodespec.h"
#include "nodemem.h"

static sh_simrun *const S = &sh_simrun_state;

sh_simnodes sh_simnodes_state;
#define X sh_simnodes_state

/* ---- clocks ---------------------------------------------------------------------- */

uint64_t sh_simnode_local(uint32_t n, uint64_t t) {
  if (n == 0 || n > X.n) return t;
  const sh_simnode *d = &X.node[n];
  if (d->ppm == 0 && d->base_true == d->base_local) return t;
  uint64_t dt = t > d->base_true ? t - d->base_true : 0;
  unsigned __int128 x = (unsigned __int128)dt * (uint64_t)(1000000 + d->ppm) / 1000000u;
  return d->base_local + (uint64_t)x;
}

uint64_t sh_sim_clock_ns(void) { return sh_simnode_local(sh_simnode_cur(), S->now); }

uint64_t sh_simnode_true(uint32_t n, uint64_t local) {
  if (n == 0 || n > X.n || local == SH_PLAT_NO_DEADLINE) return local;
  const sh_simnode *d = &X.node[n];
  if (d->ppm == 0 && d->base_true == d->base_local) return local;
  if (local <= d->base_local) return d->base_true;
  /* The earliest t whose reading is at least `local`: rounded up. */
  unsigned __int128 num = (unsigned __int128)(local - d->base_local) * 1000000u;
  uint64_t rate = (uint64_t)(1000000 + d->ppm);
  unsigned __int128 dt = (num + rate - 1) / rate;
  if (dt >= SH_PLAT_NO_DEADLINE - d->base_true) return SH_PLAT_NO_DEADLINE - 1;
  return d->base_true + (uint64_t)dt;
}

/* The true time of `local` on a piece (base_true, base_local, ppm). */
static uint64_t piece_true(uint64_t bt, uint64_t bl, int32_t ppm, uint64_t local) {
  if (local <= bl) return bt;
  unsigned __int128 num = (unsigned __int128)(local - bl) * 1000000u;
  uint64_t rate = (uint64_t)(1000000 + ppm);
  return bt + (uint64_t)((num + rate - 1) / rate);
}

uint64_t sh_sim_true_of_ns(uint64_t local) {
  uint32_t n = sh_simnode_cur();
  if (n == 0 || n > X.n) return local;
  const sh_simnode *d = &X.node[n];
  if (local >= d->base_local) return sh_simnode_true(n, local);
  /* An earlier piece's reading: the latest piece that began at or before it. */
  uint32_t kept = d->npast < SH_SIMNODE_PIECES ? d->npast : SH_SIMNODE_PIECES;
  for (uint32_t i = 1; i <= kept; i++) {
    uint32_t k = (d->npast - i) % SH_SIMNODE_PIECES;
    if (d->past[k].base_local <= local)
      return piece_true(d->past[k].base_true, d->past[k].base_local, d->past[k].ppm, local);
  }
  return d->base_true; /* older than what is kept: its piece's start bounds it */
}

/* A new piece of node d's clock from now on. */
static void clock_rebase(sh_simnode *d, uint32_t n) {
  uint32_t k = d->npast++ % SH_SIMNODE_PIECES;
  d->past[k].base_true = d->base_true;
  d->past[k].base_local = d->base_local;
  d->past[k].ppm = d->ppm;
  uint64_t l = sh_simnode_local(n, S->now);
  d->base_true = S->now;
  d->base_local = l;
}

int sh_simnode_drift(uint32_t n, int32_t ppm) {
  sh_simnode *d = &X.node[n];
  int32_t bound = d->max_drift_ppm;
  if (ppm > bound || ppm < -bound) return -ERANGE;
  clock_rebase(d, n);
  d->ppm = ppm;
  /* Sleepers' deadlines were turned into true time at the old rate: they
   * wake and sleep again on the new one (a spurious wake, allowed). */
  sh_simnode_wake_all(n);
  char what[48];
  snprintf(what, sizeof(what), "drift %d ppm", (int)ppm);
  sh_simnode_note(n, what);
  return 0;
}

int sh_simnode_jump(uint32_t n, int64_t delta_ns) {
  sh_simnode *d = &X.node[n];
  uint64_t l = sh_simnode_local(n, S->now);
  /* Checked first: a refused jump leaves the clock's history alone. A
   * reading stays within a quarter of the range (the wall clock adds its
   * epoch to it). */
  if ((delta_ns < 0 && (uint64_t)-delta_ns > l) ||
      (delta_ns > 0 && (uint64_t)delta_ns > UINT64_MAX / 4 - l))
    return -ERANGE;
  clock_rebase(d, n);
  d->base_local += (uint64_t)delta_ns;
  char what[48];
  snprintf(what, sizeof(what), "clock jump %lld ms", (long long)(delta_ns / 1000000));
  sh_simnode_note(n, what);
  /* Sleepers' deadlines were on the old reading: they wake at once and
   * look at the new one (a spurious wake, which every waiter allows). */
  sh_simnode_wake_all(n);
  return 0;
}

/* ---- the table --------------------------------------------------------------------- */

sh_plat *sh_simnode_plat(uint32_t n) { return n >= 1 && n <= X.n ? X.node[n].plat : NULL; }

void sh_simnode_plat_set(uint32_t n, sh_plat *p) {
  SH_ASSERT(n >= 1 && n <= X.n);
  X.node[n].plat = p;
  if (p == NULL) X.node[n].up = false; /* its system is gone: nothing to stop */
}

void sh_simnode_started(sh_plat *p) {
  sh_simnode *d = &X.node[p->node];
  d->up = true;
  if (S->trace == NULL) return;
  char process[48];
  snprintf(process, sizeof(process), "node %s", d->name);
  for (uint32_t w = 0; w < p->nworkers; w++) {
    char name[64];
    snprintf(name, sizeof(name), "%s worker %u", d->name, w);
    (void)sh_simtrace_track_in(S->trace, p->fiber[w], name, p->node + 1, process);
  }
}

const char *sh_simnode_name(uint32_t n) { return n >= 1 && n <= X.n ? X.node[n].name : "main"; }

uint32_t sh_simnode_ip(uint32_t n) { return n >= 1 && n <= X.n ? X.node[n].ip : 0; }

uint32_t sh_simnode_cur(void) {
  const sh_simtab *t = S->tab;
  return t != NULL ? t->f[t->cur].node : 0;
}

uint32_t sh_simnode_by_ip(uint32_t ip) {
  for (uint32_t i = 1; i <= X.n; i++)
    if (X.node[i].ip == ip) return i;
  return 0;
}

uint32_t sh_simnode_find(const char *name) {
  if (name == NULL) return 0;
  for (uint32_t i = 1; i <= X.n; i++)
    if (strcmp(X.node[i].name, name) == 0) return i;
  return 0;
}

bool sh_simnode_is_up(uint32_t n) {
  return n == 0 || (n <= X.n && X.node[n].main != SH_SIMRUN_NO_FIBER);
}

void sh_simnode_wake_all(uint32_t n) {
  sh_simtab *t = S->tab;
  if (t == NULL) return;
  for (uint32_t i = 0; i < t->nfibers; i++) {
    sh_simrun_fiber *f = &t->f[i];
    if (f->node != n || f->deadline == SH_PLAT_NO_DEADLINE) continue;
    if (f->state == SH_SIMRUN_PARKED || f->state == SH_SIMRUN_BLOCKED) sh_simrun_make_runnable(f);
  }
  sh_simrun_recompute_deadline(t);
}

/* ---- boots ----------------------------------------------------------------------- */

static void node_main(void *arg) {
  sh_simnode *d = arg;
  sh_config cfg = sh_nodespec_config(d->has_config ? &d->config : NULL, d->workers);
  if (d->init != NULL) d->init();
  d->exit_code = sh_run(&cfg, d->entry, d->argc, d->argv);
}

int sh_simnode_boot(uint32_t n) {
  sh_simnode *d = &X.node[n];
  SH_ASSERT(d->main == SH_SIMRUN_NO_FIBER && d->plat == NULL);
  int rc = sh_simplat_thread_new(n, node_main, d, &d->main);
  if (rc != 0) {
    d->main = SH_SIMRUN_NO_FIBER;
    return rc;
  }
  d->boots++;
  d->lives[(d->boots - 1) % SH_SIMNODE_LIVES].began = S->now;
  d->lives[(d->boots - 1) % SH_SIMNODE_LIVES].ended = 0;
  d->up = false; /* until its workers start */
  sh_simnode_note(n, "boot");
  return 0;
}

/* d's current life ended now (its last end wins: a stop of a node whose
 * program already ended changes nothing). */
static void life_ends(sh_simnode *d) {
  if (d->boots == 0) return;
  uint64_t *e = &d->lives[(d->boots - 1) % SH_SIMNODE_LIVES].ended;
  if (*e == 0) *e = S->now;
}

int sh_node_life(const char *name, uint32_t boot, uint64_t *began_ns, uint64_t *ended_ns) {
  uint32_t n = sh_simnode_find(name);
  if (n == 0) return -ENOENT;
  const sh_simnode *d = &X.node[n];
  if (boot == 0 || boot > d->boots || d->boots - boot >= SH_SIMNODE_LIVES) return -ENOENT;
  if (began_ns != NULL) *began_ns = d->lives[(boot - 1) % SH_SIMNODE_LIVES].began;
  if (ended_ns != NULL) *ended_ns = d->lives[(boot - 1) % SH_SIMNODE_LIVES].ended;
  return 0;
}

/* Node n's program ended (its sh_run returned): whatever it still has
 * allocated it leaked, as a process that exits with blocks LeakSanitizer
 * would report. The run fails, naming it. */
static void check_ended(uint32_t n) {
  sh_simnet_check_node_closed(n);
  uint64_t left = sh_simnodemem_count(n);
  if (left == 0) return;
  char d[160];
  snprintf(d, sizeof(d), "node %s left %llu blocks (%llu bytes) allocated when its program ended",
           X.node[n].name, (unsigned long long)left,
           (unsigned long long)sh_simnodemem_bytes(n));
  sh_simrun_fail("leak", d);
}

/* A node whose main returned (stopped, or its program exited): its main's
 * slot is given back. */
static void reap(uint32_t n) {
  sh_simnode *d = &X.node[n];
  sh_simtab *t = S->tab;
  /* A stop under way joins the main itself. */
  if (d->main == SH_SIMRUN_NO_FIBER || t->f[d->main].state != SH_SIMRUN_DONE || d->stopping)
    return;
  sh_simplat_thread_wait(d->main);
  d->main = SH_SIMRUN_NO_FIBER;
  d->up = false;
  life_ends(d);
  check_ended(n);
}

void sh_simnode_reap_all(void) {
  for (uint32_t n = 1; n <= X.n; n++) reap(n);
}

/* Whether life `life` of node d, whose main is fiber m, still runs (not
 * ended, not crashed; a restart may give its new main the same slot). */
static bool main_runs(const sh_simnode *d, uint32_t m, uint32_t life) {
  return d->main == m && d->boots == life && S->tab->f[m].state != SH_SIMRUN_DONE;
}

/* The calling fiber (of the simulation's own) waits a while: until main m
 * ends (its joiner is woken by the end, or by a crash), or a virtual
 * millisecond passes (a second stopper, a system not started yet). */
static void wait_main(sh_simnode *d, uint32_t m, uint32_t life, bool join) {
  sh_simtab *t = S->tab;
  if (join) t->f[m].joiner = t->cur;
  sh_simrun_block(t, join ? SH_PLAT_NO_DEADLINE : S->now + 1000000u);
  sh_simrun_give_way("node_stop");
  if (join && d->main == m && d->boots == life) t->f[m].joiner = SH_SIMRUN_NO_FIBER;
}

int sh_simnode_stop(uint32_t n) {
  sh_simnode *d = &X.node[n];
  reap(n);
  if (d->main == SH_SIMRUN_NO_FIBER) return -EALREADY;
  uint32_t m = d->main, life = d->boots, calms = X.calms;
  /* Bounded, every loop here: the node's main ends once its system's
   * workers stopped (its program's own stop, bounded by the run's step
   * limit), or a crash ends it first. */
  if (d->stopping) { /* another fiber's stop is under way: it is the one */
    while (main_runs(d, m, life)) wait_main(d, m, life, false);
    return -EALREADY;
  }
  d->stopping = true;
  /* A system not started yet is waited for: its main starts it without waiting. */
  while (!d->up && main_runs(d, m, life)) wait_main(d, m, life, false);
  if (d->up && main_runs(d, m, life)) sh_system_exit((sh_system *)d->plat->ctx, 0);
  while (main_runs(d, m, life)) wait_main(d, m, life, true);
  if (d->main != m || d->boots != life) return -EALREADY; /* a crash took it meanwhile */
  d->stopping = false;
  sh_simplat_thread_wait(m);
  d->main = SH_SIMRUN_NO_FIBER;
  d->up = false;
  d->stops++;
  life_ends(d);
  check_ended(n);
  sh_simnode_note(n, "stop");
  /* The nemesis was calmed while this stop waited: every node is up again. */
  if (X.calms != calms) (void)sh_simnode_boot(n);
  return 0;
}

/* ---- crashes ------------------------------------------------------------------------- */

/* Freed node memory, for the models' purge. */
typedef struct span {
  uintptr_t lo, hi;
} span;

typedef struct spans {
  span *v;
  size_t n, cap;
} spans;

static void span_add(void *ptr, size_t size, void *ctx) {
  spans *s = ctx;
  if (s->n == s->cap) {
    size_t c = s->cap != 0 ? s->cap * 2 : 256;
    span *v = sh_simraw_realloc(s->v, c * sizeof(*v));
    if (v == NULL) return; /* the purge below then errs toward keeping entries */
    s->v = v;
    s->cap = c;
  }
  s->v[s->n++] = (span){(uintptr_t)ptr, (uintptr_t)ptr + (size != 0 ? size : 1)};
}

static int span_cmp(const void *a, const void *b) {
  const span *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static bool in_spans(const void *ctx, uintptr_t a) {
  const spans *s = ctx;
  size_t lo = 0, hi = s->n;
  /* Binary search: bounded by log2(n) passes. */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->v[mid].hi <= a)
      lo = mid + 1;
    else if (s->v[mid].lo > a)
      hi = mid;
    else
      return true;
  }
  return false;
}

/* Every fiber of node n is gone: stacks freed, slots emptied. */
static void fibers_gone(uint32_t n) {
  sh_simtab *t = S->tab;
  for (uint32_t i = 0; i < t->nfibers; i++) {
    sh_simrun_fiber *f = &t->f[i];
    if (f->node != n || f->state == SH_SIMRUN_FREE) continue;
    SH_ASSERT(i != t->cur); /* a node never crashes itself */
    /* A fiber of the simulation's own joining the node's main (a stop
     * under way) is woken: it finds the main gone. */
    if (f->joiner != SH_SIMRUN_NO_FIBER) sh_simrun_unblock(t, &t->f[f->joiner]);
    sh_simmodel_fiber_gone(i);
    sh_simtrace_track_end(S->trace, S->now, i);
    sh_fiber_destroy(&f->ctx);
    sh_simplat_slot_free(t, i);
  }
  sh_simrun_recompute_deadline(t);
}

/* Node n stops where it is: its fibers and sockets are gone. */
static void power_off(uint32_t n) {
  sh_simnode *d = &X.node[n];
  d->stopping = false; /* a stop under way finds the life gone */
  fibers_gone(n);
  sh_simnet_node_down(n);
  d->main = SH_SIMRUN_NO_FIBER;
  d->plat = NULL;
  d->up = false;
}

int sh_simnode_crash(uint32_t n) {
  sh_simnode *d = &X.node[n];
  reap(n);
  if (d->main == SH_SIMRUN_NO_FIBER) return -EALREADY;
  if (!sh_simnodemem_available()) return -ENOTSUP;
  sh_simnode_note(n, "crash");
  power_off(n);
  life_ends(d);
  d->crashes++;
  spans s = {0};
  sh_simnodemem_release(n, span_add, &s);
  qsort(s.v, s.n, sizeof(*s.v), span_cmp);
  sh_simmodel_forget(in_spans, &s);
  sh_simmem_forget_all();
  sh_simraw_free(s.v);
  return 0;
}

/* ---- the simulation's end ------------------------------------------------------------- */

void sh_simnode_free(sh_simnode *d) {
  for (int i = 0; i < d->argc; i++) sh_simraw_free(d->argv[i]);
  sh_simraw_free(d->argv);
  sh_simraw_free(d->blob);
  memset(d, 0, sizeof(*d));
}

void sh_simnode_end(void) {
  sh_simnode_acts_end();
  /* Nodes still up are powered off: the scenario's end is not theirs to
   * see (a scenario stops them first when it checks what they did). */
  for (uint32_t n = 1; n <= X.n; n++) {
    reap(n);
    if (X.node[n].main == SH_SIMRUN_NO_FIBER) continue;
    /* Without the allocation wraps its memory cannot be found: it is left
     * to the process (docs/cluster.md), the node's fibers go all the same. */
    if (sh_simnode_crash(n) == -ENOTSUP) power_off(n);
  }
  sh_simnode_keep_stats();
  for (uint32_t n = 1; n <= X.n; n++) sh_simnode_free(&X.node[n]);
  X.n = 0;
}

void sh_simnode_reset(void) {
  SH_ASSERT(X.n == 0); /* sh_simnode_end ran, or no node was ever added */
  memset(&X, 0, sizeof(X));
}
