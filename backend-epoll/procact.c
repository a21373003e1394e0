/*
 * Clusters of processes (proc.h): the launcher thread and the acts it
 * runs. Every act (a boot, a crash, a stop, a restart, a calm, the
 * cluster's end) runs on this one thread, in order of time, whether a
 * caller asked for it now (and waits for its result) or queued it for
 * later (sh_node_act_at, a restart's delayed boot): the thread that
 * spawned a node is the one whose end would kill it, and one thread makes
 * the acts' order plain. It sleeps in poll on the nodes' pidfds and an
 * eventfd, until its next act is due: no polling while idle.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/check.h"
#include "proc.h"

#define L sh_proc_l

static void wake(void) {
  uint64_t one = 1;
  ssize_t w = write(L.wake, &one, sizeof one);
  (void)w; /* an eventfd at its limit is awake already */
}

/* ---- the queue --------------------------------------------------------------------- */

static int queue(uint64_t at, int kind, uint32_t node, int64_t value, sh_proc_waiter *w) {
  if (w == NULL && L.ntimed == SH_NODE_MAX_ACTS) return -ENOSPC;
  if (w != NULL && L.nq - L.ntimed == SH_PROC_WAITERS) return -EAGAIN;
  L.ntimed += w == NULL;
  uint32_t i = L.nq;
  while (i > 0 && L.q[i - 1].at > at) i--;
  memmove(&L.q[i + 1], &L.q[i], (L.nq - i) * sizeof(L.q[0]));
  L.q[i] = (sh_proc_act){.at = at, .seq = L.seq++, .kind = kind, .node = node, .value = value,
                         .w = w};
  L.nq++;
  wake();
  return 0;
}

/* Drops every queued act but those callers wait for (a calm and a stop
 * run after what was asked before them). */
static void drop_queued(void) {
  uint32_t j = 0;
  for (uint32_t i = 0; i < L.nq; i++)
    if (L.q[i].w != NULL) L.q[j++] = L.q[i];
  L.nq = j;
  L.ntimed = 0;
  for (uint32_t n = 1; n <= L.n; n++) L.node[n].pending_boot = false;
}

/* ---- one act ------------------------------------------------------------------------ */

static int crash(uint32_t n) {
  sh_proc_node *d = &L.node[n];
  if (d->pid == 0) return -EALREADY;
  d->killed = true;
  (void)sh_proc_signal(n, SIGKILL);
  return sh_proc_wait_end(n, -1);
}

static int stop(uint32_t n) {
  sh_proc_node *d = &L.node[n];
  if (d->pid == 0) return -EALREADY;
  d->stopping = true;
  (void)sh_proc_signal(n, SIGTERM);
  if (sh_proc_wait_end(n, SH_PROC_STOP_MS) == 0) return 0;
  /* Past the bound: ended the hard way, still counted a stop. */
  if (d->pid == 0) return 0;
  d->killed = true;
  (void)sh_proc_signal(n, SIGKILL);
  sh_proc_wait_end(n, -1);
  return -ETIMEDOUT;
}

static int restart(uint32_t n, int64_t delay_ms, bool wiped) {
  sh_proc_node *d = &L.node[n];
  if (d->pid != 0 || d->pending_boot) return -EBUSY;
  if (delay_ms < 0 || delay_ms > INT64_MAX / 2000000) return -EINVAL;
  if (wiped) {
    char path[320];
    snprintf(path, sizeof path, "%s/%s.state", L.m->dir, L.m->node[n].name);
    unlink(path);
  }
  if (delay_ms == 0) return sh_proc_spawn(n);
  int rc = queue(sh_proc_now() + (uint64_t)delay_ms * 1000000u, SH_PROC_BOOT, n, 0, NULL);
  if (rc == 0) d->pending_boot = true;
  return rc;
}

static int calm(void) {
  drop_queued();
  int rc = 0;
  for (uint32_t n = 1; n <= L.n; n++) {
    if (L.node[n].pid != 0) continue;
    int b = sh_proc_spawn(n);
    if (b != 0 && rc == 0) rc = b;
  }
  return rc;
}

static int stop_all(void) {
  drop_queued();
  int rc = 0;
  for (uint32_t n = 1; n <= L.n; n++) {
    int s = stop(n);
    if (s != 0 && s != -EALREADY && rc == 0) rc = s;
  }
  for (uint32_t n = 1; n <= L.n && rc == 0; n++)
    if (L.node[n].faults != 0) rc = -EIO;
  return rc;
}

static int run_act(const sh_proc_act *a) {
  switch (a->kind) {
  case SH_ACT_CRASH: return crash(a->node);
  case SH_ACT_STOP: return stop(a->node);
  case SH_ACT_RESTART: return restart(a->node, a->value, false);
  case SH_ACT_RESTART_WIPED: return restart(a->node, a->value, true);
  case SH_ACT_HEAL_ALL: return 0;
  case SH_PROC_BOOT:
    L.node[a->node].pending_boot = false;
    return L.node[a->node].pid == 0 ? sh_proc_spawn(a->node) : -EBUSY;
  case SH_PROC_CALM: return calm();
  case SH_PROC_STOP_ALL: {
    /* The thread's last act: nothing queued behind it runs (an act asked
     * meanwhile finds the cluster ended). */
    L.quit = true;
    return stop_all();
  }
  default: return -ENOTSUP;
  }
}

/* ---- the thread --------------------------------------------------------------------- */

/* Sleeps until the next act is due, a node ends or a caller wakes it. */
static void sleep_until_due(void) {
  struct pollfd p[SH_NODE_MAX + 1];
  nfds_t k = 0;
  p[k++] = (struct pollfd){.fd = L.wake, .events = POLLIN};
  for (uint32_t n = 1; n <= L.n; n++)
    if (L.node[n].pidfd >= 0) p[k++] = (struct pollfd){.fd = L.node[n].pidfd, .events = POLLIN};
  int timeout = -1;
  if (L.nq != 0) {
    uint64_t now = sh_proc_now(), at = L.q[0].at;
    timeout = at <= now ? 0 : (int)((at - now + 999999u) / 1000000u);
  }
  pthread_mutex_unlock(&L.mu);
  int r = poll(p, k, timeout);
  if (r > 0 && (p[0].revents & POLLIN) != 0) {
    uint64_t v;
    ssize_t got = read(L.wake, &v, sizeof v);
    (void)got;
  }
  pthread_mutex_lock(&L.mu);
}

static void *launcher_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&L.mu);
  /* Bounded by the cluster: it ends at quit (sh_node_stop_all). */
  while (!L.quit) {
    sh_proc_reap();
    if (L.nq != 0 && L.q[0].at <= sh_proc_now()) {
      sh_proc_act a = L.q[0];
      memmove(&L.q[0], &L.q[1], (L.nq - 1) * sizeof(L.q[0]));
      L.nq--;
      L.ntimed -= a.w == NULL;
      int rc = run_act(&a);
      if (a.w != NULL) {
        a.w->rc = rc;
        a.w->done = true;
        pthread_cond_broadcast(&L.cv);
      }
      continue;
    }
    sleep_until_due();
  }
  /* No node outlives its cluster's thread (it would die unreaped), and
   * acts asked for while the cluster ended find no cluster. */
  sh_proc_kill_all();
  for (uint32_t i = 0; i < L.nq; i++)
    if (L.q[i].w != NULL) {
      L.q[i].w->rc = -ENOTSUP;
      L.q[i].w->done = true;
    }
  L.nq = L.ntimed = 0;
  pthread_cond_broadcast(&L.cv);
  pthread_mutex_unlock(&L.mu);
  return NULL;
}

/* ---- for callers ---------------------------------------------------------------------- */

/* Runs an act on the launcher now and waits for it; under mu. */
int sh_proc_act_wait(int kind, uint32_t node, int64_t value) {
  if (!L.live || L.quit || (L.ending && kind != SH_PROC_STOP_ALL)) return -ENOTSUP;
  sh_proc_waiter w = {0};
  int rc = queue(0, kind, node, value, &w);
  if (rc != 0) return rc;
  /* Bounded: the launcher runs every act it is given. */
  while (!w.done) pthread_cond_wait(&L.cv, &L.mu);
  return w.rc;
}

int sh_proc_act_later(uint64_t at, int kind, uint32_t node, int64_t value) {
  return L.live && !L.quit && !L.ending ? queue(at, kind, node, value, NULL) : -ENOTSUP;
}

/* A cluster's start, under mu: its launcher thread. */
int sh_proc_cluster_start(void) {
  L.wake = L.wake >= 0 ? L.wake : eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (L.wake < 0) return -errno;
  L.quit = L.ending = false;
  L.nq = L.ntimed = 0;
  L.start_ns = sh_proc_now();
  sigset_t all, old;
  sigfillset(&all);
  /* The launcher takes no signal: the program's handlers run elsewhere. */
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = -pthread_create(&L.thread, NULL, launcher_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc == 0) L.live = true;
  return rc;
}

/* The cluster's end, under mu: every node stopped, the thread joined.
 * A second caller meanwhile waits for the first one's end. */
int sh_proc_cluster_end(void) {
  if (!L.live) return -ENOTSUP;
  if (L.ending) {
    /* Bounded: the first caller joins the thread and clears live. */
    while (L.live) pthread_cond_wait(&L.cv, &L.mu);
    return 0;
  }
  L.ending = true;
  int rc = sh_proc_act_wait(SH_PROC_STOP_ALL, 0, 0);
  L.quit = true;
  wake();
  pthread_t t = L.thread;
  pthread_mutex_unlock(&L.mu);
  pthread_join(t, NULL);
  pthread_mutex_lock(&L.mu);
  L.live = L.ending = false;
  pthread_cond_broadcast(&L.cv);
  return rc;
}
