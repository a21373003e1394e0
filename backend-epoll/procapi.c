/*
 * <stackhouse/cluster.h> off the simulator: a cluster of processes on
 * loopback (proc.h). The calls check their arguments as the simulator's
 * do, then hand the act to the launcher thread (procact.c). A cluster
 * starts at its first sh_node_add (its mapping, its directory of persisted
 * files, its thread) and ends at sh_node_stop_all; its counts stay
 * readable until the next cluster's first add.
 *
 * Cuts, drift and jumps need the simulator's network and clocks: -ENOTSUP
 * here (sh_node_is_cut answers 0: nothing is cut).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/check.h"
#include "nodespec.h"
#include "proc.h"

#define L sh_proc_l

/* Calls come from the launching program, not from its nodes. */
static int caller_ok(void) { return sh_proc_self != 0 ? -EPERM : 0; }

/* A node (1..) by name, or -ENOENT / -EINVAL; under mu. */
static int node_of(const char *name) {
  if (name == NULL) return -EINVAL;
  for (uint32_t n = 1; n <= L.n; n++)
    if (strcmp(L.m->node[n].name, name) == 0) return (int)n;
  return -ENOENT;
}

/* ---- declaring a node ---------------------------------------------------------------- */

/* The spec's shape, and (taken) against the nodes of the cluster. A
 * process's workers have no bound of the simulator's. */
static int spec_check(const sh_node_spec *sp, bool taken) {
  if (!sh_nodespec_ok(sp, UINT32_MAX)) return -EINVAL;
  for (uint32_t n = 1; taken && L.m != NULL && n <= L.n; n++)
    if (strcmp(L.m->node[n].name, sp->name) == 0 || L.m->node[n].ip == sp->ip) return -EEXIST;
  return L.n == SH_NODE_MAX ? -ENOSPC : 0;
}

static void node_free(sh_proc_node *d) {
  /* A node's end closed its pidfd; one left open is a node never reaped. */
  SH_ASSERT(d->pidfd <= 0 || d->pid == 0);
  if (d->pidfd > 0) close(d->pidfd);
  for (int i = 0; d->argv != NULL && i < d->argc; i++) free(d->argv[i]);
  free(d->argv);
  memset(d, 0, sizeof(*d));
  d->pidfd = -1;
}

/* Forgets the last cluster: its table, its files, what its nodes told
 * and nobody heard (an event names its node by slot, and the slots are
 * about to be the new cluster's). Under mu, not live: no node is left. */
static void cluster_forget(void) {
  for (uint32_t n = 1; n <= L.n; n++) node_free(&L.node[n]);
  L.n = 0;
  if (L.m == NULL) return;
  atomic_store_explicit(&L.m->n, 0, memory_order_release);
  sh_proc_ring_lock(L.m);
  L.m->head = L.m->tail;
  L.m->lost = 0;
  pthread_mutex_unlock(&L.m->mu);
}

static void dir_remove(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL) return;
  char path[320];
  /* Bounded by the directory: a state file per node, and their .new. */
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

/* A program that ends without sh_node_stop_all: its nodes die with it
 * (PR_SET_PDEATHSIG), its directory goes here. */
static void at_exit(void) {
  if (!L.live || L.m == NULL) return;
  /* Killed first: a node's persist meanwhile would leave the directory. */
  for (uint32_t n = 1; n <= L.n; n++)
    if (L.node[n].pid != 0) (void)sh_proc_signal(n, SIGKILL);
  dir_remove(L.m->dir);
}

/* A new cluster, under mu: the mapping (once per process), a directory. */
static int cluster_begin(void) {
  if (L.m == NULL) {
    int rc = sh_proc_map_make(&L.m, &L.fd);
    if (rc != 0) return rc;
    atomic_store_explicit(&sh_proc_shared, L.m, memory_order_release);
    atexit(at_exit);
  }
  cluster_forget();
  const char *tmp = getenv("TMPDIR");
  snprintf(L.m->dir, sizeof(L.m->dir), "%s/stackhouse-cluster-XXXXXX",
           tmp != NULL && tmp[0] != '\0' && strlen(tmp) < 200 ? tmp : "/tmp");
  if (mkdtemp(L.m->dir) == NULL) return -errno;
  int rc = sh_proc_cluster_start();
  if (rc != 0) dir_remove(L.m->dir);
  return rc;
}

/* Slot n from the spec (the argv copied); 0 or -errno. */
static int slot_fill(uint32_t n, const sh_node_spec *sp) {
  sh_proc_slot *s = &L.m->node[n];
  sh_proc_node *d = &L.node[n];
  memset(s, 0, sizeof(*s));
  node_free(d);
  snprintf(s->name, sizeof(s->name), "%s", sp->name);
  s->ip = sp->ip;
  s->lo = 127u << 24 | L.m->net << 16 | n;
  s->argc = sp->argc;
  s->workers = sp->workers != 0 ? sp->workers : 2;
  s->has_config = sp->config != NULL;
  if (sp->config != NULL) s->config = *sp->config;
  s->has_init = sp->init != NULL;
  int rc = sh_proc_locate((const void *)sp->entry, &s->entry);
  if (rc == 0 && sp->init != NULL) rc = sh_proc_locate((const void *)sp->init, &s->init);
  if (rc != 0) return -EINVAL;
  d->argv = calloc((size_t)sp->argc + 1, sizeof(char *));
  if (d->argv == NULL) return -ENOMEM;
  for (int i = 0; i < sp->argc; i++) {
    d->argv[i] = strdup(sp->argv[i]);
    if (d->argv[i] == NULL) return -ENOMEM;
    d->argc = i + 1;
  }
  return 0;
}

int sh_node_add(const sh_node_spec *sp) {
  int rc = caller_ok();
  if (rc != 0) return rc;
  pthread_mutex_lock(&L.mu);
  /* A bad spec starts no cluster. */
  if (!L.live) rc = spec_check(sp, false);
  if (rc == 0 && !L.live) rc = cluster_begin();
  if (rc == 0) rc = spec_check(sp, true);
  uint32_t n = L.n + 1;
  if (rc == 0) rc = slot_fill(n, sp);
  if (rc == 0) {
    L.n = n;
    /* Published before its boot: its peers' and its own maps know it. */
    atomic_store_explicit(&L.m->n, n, memory_order_release);
    rc = sh_proc_act_wait(SH_ACT_RESTART, n, 0);
    if (rc != 0) atomic_store_explicit(&L.m->n, --L.n, memory_order_release);
  }
  if (rc != 0 && n <= SH_NODE_MAX) node_free(&L.node[n]);
  pthread_mutex_unlock(&L.mu);
  return rc;
}

/* ---- acts ------------------------------------------------------------------------------ */

/* act's node, resolved; under mu. */
static int resolve(const sh_node_act *act, uint32_t *node) {
  if (act == NULL) return -EINVAL;
  switch (act->kind) {
  case SH_ACT_HEAL_ALL: *node = 0; return 0;
  case SH_ACT_CRASH:
  case SH_ACT_STOP:
  case SH_ACT_RESTART:
  case SH_ACT_RESTART_WIPED: {
    int n = node_of(act->node);
    if (n < 0) return n;
    *node = (uint32_t)n;
    return 0;
  }
  case SH_ACT_CUT:
  case SH_ACT_HEAL:
  case SH_ACT_DRIFT:
  case SH_ACT_JUMP: return -ENOTSUP;
  }
  return -EINVAL;
}

int sh_node_act_now(const sh_node_act *act) {
  int rc = caller_ok();
  if (rc != 0) return rc;
  pthread_mutex_lock(&L.mu);
  uint32_t n;
  rc = resolve(act, &n);
  if (rc == 0) rc = sh_proc_act_wait((int)act->kind, n, act->value);
  pthread_mutex_unlock(&L.mu);
  return rc;
}

int sh_node_act_at(int64_t at_ms, const sh_node_act *act) {
  int rc = caller_ok();
  if (rc != 0) return rc;
  if (at_ms < 0 || (uint64_t)at_ms > UINT64_MAX / 2000000u) return -EINVAL;
  pthread_mutex_lock(&L.mu);
  uint32_t n;
  rc = resolve(act, &n);
  if (rc == 0)
    rc = sh_proc_act_later(L.start_ns + (uint64_t)at_ms * 1000000u, (int)act->kind, n, act->value);
  pthread_mutex_unlock(&L.mu);
  return rc;
}

static int act1(sh_node_act_kind kind, const char *name, int64_t value) {
  sh_node_act a = {.kind = kind, .node = name, .value = value};
  return sh_node_act_now(&a);
}

int sh_node_crash(const char *name) { return act1(SH_ACT_CRASH, name, 0); }
int sh_node_stop(const char *name) { return act1(SH_ACT_STOP, name, 0); }
int sh_node_restart(const char *name, int64_t delay_ms, unsigned flags) {
  if ((flags & ~SH_NODE_WIPED) != 0) return -EINVAL;
  return act1((flags & SH_NODE_WIPED) != 0 ? SH_ACT_RESTART_WIPED : SH_ACT_RESTART, name,
              delay_ms);
}

static int whole(int kind) {
  int rc = caller_ok();
  if (rc != 0) return rc;
  pthread_mutex_lock(&L.mu);
  rc = sh_proc_act_wait(kind, 0, 0);
  pthread_mutex_unlock(&L.mu);
  return rc;
}

/* Without a cluster there is nothing to calm, as in a simulation without
 * nodes. */
int sh_node_calm(void) {
  int rc = whole(SH_PROC_CALM);
  return rc == -ENOTSUP ? 0 : rc;
}

int sh_node_stop_all(void) {
  int rc = caller_ok();
  if (rc != 0) return rc;
  pthread_mutex_lock(&L.mu);
  rc = sh_proc_cluster_end();
  if (rc != -ENOTSUP) dir_remove(L.m->dir);
  pthread_mutex_unlock(&L.mu);
  /* Without a cluster there is nothing to stop. */
  return rc == -ENOTSUP ? 0 : rc;
}

/* ---- what the simulator alone does -------------------------------------------------- */

int sh_node_cut(const char *from, const char *to) { return (void)from, (void)to, -ENOTSUP; }
int sh_node_heal(const char *from, const char *to) { return (void)from, (void)to, -ENOTSUP; }
void sh_node_heal_all(void) {}
int sh_node_drift(const char *name, int32_t ppm) { return (void)name, (void)ppm, -ENOTSUP; }
int sh_node_jump(const char *name, int64_t delta_ms) {
  return (void)name, (void)delta_ms, -ENOTSUP;
}

/* Whether `name` is "main" or a node of the shared table (node code
 * included: a node process has no launcher's table). */
static bool known(const char *name) {
  sh_proc_shm *m = atomic_load_explicit(&sh_proc_shared, memory_order_acquire);
  if (strcmp(name, "main") == 0) return true;
  uint32_t n = m != NULL ? atomic_load_explicit(&m->n, memory_order_acquire) : 0;
  for (uint32_t k = 1; k <= n && k <= SH_NODE_MAX; k++)
    if (strcmp(m->node[k].name, name) == 0) return true;
  return false;
}

int sh_node_is_cut(const char *from, const char *to) {
  if (from == NULL || to == NULL || strcmp(from, "*") == 0 || strcmp(to, "*") == 0) return -EINVAL;
  return known(from) && known(to) ? 0 : -ENOENT;
}

/* ---- counts ----------------------------------------------------------------------------- */

int sh_node_up(const char *name) {
  pthread_mutex_lock(&L.mu);
  int n = node_of(name);
  int rc = n < 0 ? n : L.node[n].pid != 0;
  pthread_mutex_unlock(&L.mu);
  return rc;
}

int sh_node_life(const char *name, uint32_t boot, uint64_t *began_ns, uint64_t *ended_ns) {
  pthread_mutex_lock(&L.mu);
  int n = node_of(name), rc = n < 0 ? n : 0;
  if (rc == 0) {
    const sh_proc_node *d = &L.node[n];
    if (boot == 0 || boot > d->boots || d->boots - boot >= SH_PROC_LIVES) rc = -ENOENT;
    if (rc == 0 && began_ns != NULL) *began_ns = d->lives[(boot - 1) % SH_PROC_LIVES].began;
    if (rc == 0 && ended_ns != NULL) *ended_ns = d->lives[(boot - 1) % SH_PROC_LIVES].ended;
  }
  pthread_mutex_unlock(&L.mu);
  return rc;
}

int sh_node_stats_get(const char *name, sh_node_stats *out) {
  if (name == NULL || out == NULL) return -EINVAL;
  pthread_mutex_lock(&L.mu);
  int n = node_of(name);
  if (n > 0) {
    const sh_proc_node *d = &L.node[n];
    *out = (sh_node_stats){.boots = d->boots, .crashes = d->crashes, .stops = d->stops,
                           .faults = d->faults};
  }
  pthread_mutex_unlock(&L.mu);
  return n < 0 ? n : 0;
}
