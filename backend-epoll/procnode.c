/*
 * Clusters of processes (proc.h): the launcher's nodes. A node is declared
 * once (its slot in the shared mapping, its argv kept here) and booted by
 * posix_spawn of the program's own image (/proc/self/exe) with the node's
 * argv and SH_NODE_RUN naming its slot; the constructor below, in every
 * program that can launch a cluster, turns such a process into the node.
 * Spawns happen on the launcher thread only (procact.c): a node dies with
 * the thread that spawned it (PR_SET_PDEATHSIG), so that thread lives as
 * long as the cluster.
 *
 * A node's end is read from its pidfd: a SIGKILL the launcher sent is a
 * crash, an exit after its SIGTERM a stop, an exit of its own the end of
 * its program; a death by any other signal (an abort, a sanitizer's
 * report, a segfault) or an exit with a status other than 0 (a sanitizer's
 * exit code, the program's own report of failure) is a fault, reported on
 * stderr and counted.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/check.h"
#include "proc.h"

extern char **environ;

sh_proc_launcher sh_proc_l = {.mu = PTHREAD_MUTEX_INITIALIZER,
                              .cv = PTHREAD_COND_INITIALIZER,
                              .fd = -1,
                              .wake = -1};
#define L sh_proc_l

uint64_t sh_proc_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- a boot ---------------------------------------------------------------------------- */

/* environ and SH_NODE_RUN, for slot n; freed by the caller (one block). */
static char **node_env(uint32_t n) {
  size_t k = 0;
  while (environ != NULL && environ[k] != NULL) k++;
  char **env = malloc((k + 2) * sizeof(char *) + 64);
  if (env == NULL) return NULL;
  char *run = (char *)(env + k + 2);
  snprintf(run, 64, "%s=%d:%u:%ld", SH_PROC_ENV, L.fd, n, (long)getpid());
  size_t j = 0;
  for (size_t i = 0; i < k; i++)
    if (strncmp(environ[i], SH_PROC_ENV "=", sizeof(SH_PROC_ENV)) != 0) env[j++] = environ[i];
  env[j++] = run;
  env[j] = NULL;
  return env;
}

int sh_proc_spawn(uint32_t n) {
  sh_proc_node *d = &L.node[n];
  SH_ASSERT(d->pid == 0);
  char **env = node_env(n);
  if (env == NULL) return -ENOMEM;
  /* A node's argv is the exec's; with none, a placeholder argv[0]. */
  char *none[] = {L.m->node[n].name, NULL};
  char **argv = d->argc > 0 ? d->argv : none;
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  /* Whatever the launcher's thread blocks or ignores, not the node; but
   * SIGTERM blocked from the exec on: a stop that comes while the node
   * still starts waits for its waiter (a graceful stop, its stop hooks
   * run) instead of killing it half-started (a fault). */
  posix_spawnattr_setsigmask(&at, &term);
  posix_spawnattr_setsigdefault(&at, &term);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  atomic_store_explicit(&L.m->node[n].boot, d->boots + 1, memory_order_relaxed);
  pid_t pid;
  /* Stamped before the exec: the node may tell before this thread runs
   * again, and its life holds all it tells. */
  uint64_t began = sh_proc_now();
  /* The mapping's memfd is close-on-exec (no other program the launcher
   * runs gets it): a dup2 onto itself in the node clears that. */
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, L.fd, L.fd);
  int rc = -posix_spawn(&pid, "/proc/self/exe", &fa, &at, argv, env);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  free(env);
  if (rc != 0) return rc;
  int fd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (fd < 0) {
    rc = -errno;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return rc;
  }
  d->pid = pid;
  d->pidfd = fd;
  d->stopping = d->killed = false;
  d->boots++;
  d->lives[(d->boots - 1) % SH_PROC_LIVES].began = began;
  d->lives[(d->boots - 1) % SH_PROC_LIVES].ended = 0;
  return 0;
}

/* ---- an end ---------------------------------------------------------------------------- */

/* Node n ended: killed by signal `sig` (0: it exited with `code`; -1:
 * nobody can tell, its status taken by another reaper). */
static void ended(uint32_t n, int sig, int code) {
  sh_proc_node *d = &L.node[n];
  d->lives[(d->boots - 1) % SH_PROC_LIVES].ended = sh_proc_now();
  /* A SIGTERM the launcher sent is its stop, whatever ended the node then
   * (spawned with SIGTERM blocked, a node takes it gracefully). */
  bool asked = sig < 0 || (sig == SIGKILL && d->killed) || (sig == SIGTERM && d->stopping);
  /* A stop first: one past its bound ends with the launcher's SIGKILL too. */
  if (d->stopping) {
    d->stops++;
  } else if (d->killed && (sig == SIGKILL || sig < 0)) {
    d->crashes++;
  }
  if (sig > 0 && !asked) {
    d->faults++;
    fprintf(stderr, "stackhouse: node %s (pid %d) died of signal %d (%s)\n", L.m->node[n].name,
            d->pid, sig, strsignal(sig));
  } else if (sig == 0 && code != 0) {
    d->faults++;
    fprintf(stderr, "stackhouse: node %s (pid %d) exited with %d\n", L.m->node[n].name, d->pid,
            code);
  }
  close(d->pidfd);
  d->pidfd = -1;
  d->pid = 0;
}

/* Reaps node n through its pidfd (never a pid another process may have
 * by now): true once it ended. ECHILD: a reaper of the program's own
 * (or SIGCHLD ignored) took its status first. */
static bool collect(uint32_t n, int flags) {
  sh_proc_node *d = &L.node[n];
  siginfo_t si;
  memset(&si, 0, sizeof si);
  int r;
  do r = waitid(P_PIDFD, (id_t)d->pidfd, &si, WEXITED | flags);
  while (r < 0 && errno == EINTR);
  if (r < 0) {
    if (errno != ECHILD) return false;
    ended(n, -1, 0);
    return true;
  }
  if (si.si_pid == 0) return false; /* WNOHANG: still running */
  if (si.si_code == CLD_EXITED)
    ended(n, 0, si.si_status);
  else
    ended(n, si.si_status, 0);
  return true;
}

void sh_proc_reap(void) {
  for (uint32_t n = 1; n <= L.n; n++)
    if (L.node[n].pid != 0) (void)collect(n, WNOHANG);
}

int sh_proc_signal(uint32_t n, int sig) {
  sh_proc_node *d = &L.node[n];
  if (d->pidfd < 0) return -ESRCH;
  return syscall(SYS_pidfd_send_signal, d->pidfd, sig, NULL, 0) == 0 ? 0 : -errno;
}

void sh_proc_kill_all(void) {
  for (uint32_t n = 1; n <= L.n; n++) {
    sh_proc_node *d = &L.node[n];
    if (d->pid == 0) continue;
    d->killed = true;
    (void)sh_proc_signal(n, SIGKILL);
    (void)collect(n, 0);
  }
}

int sh_proc_wait_end(uint32_t n, int64_t ms) {
  sh_proc_node *d = &L.node[n];
  int fd = d->pidfd, pid = d->pid;
  pthread_mutex_unlock(&L.mu);
  struct pollfd p = {.fd = fd, .events = POLLIN};
  int r;
  do r = poll(&p, 1, (int)ms);
  while (r < 0 && errno == EINTR);
  pthread_mutex_lock(&L.mu);
  if (r <= 0) return -ETIMEDOUT;
  /* Only the launcher thread reaps: the node is still this one. */
  if (d->pid == pid) (void)collect(n, 0);
  return 0;
}

/* Before main, in every program that can launch a cluster (this object is
 * linked wherever sh_node_add is): a node process runs its node and never
 * returns; any other goes on to its main. */
__attribute__((constructor)) static void sh_proc_node_boot(int argc, char **argv) {
  if (getenv(SH_PROC_ENV) != NULL) sh_proc_child_main(argc, argv);
}
