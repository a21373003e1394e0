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
  int rc = -posix_spawn(&pid, "/proc/self/exe", NULL, &at, argv, env);
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

static void ended(uint32_t n, int status) {
  sh_proc_node *d = &L.node[n];
  d->lives[(d->boots - 1) % SH_PROC_LIVES].ended = sh_proc_now();
  bool sig = WIFSIGNALED(status);
  /* A SIGTERM the launcher sent is its stop, whatever ended the node then
   * (spawned with SIGTERM blocked, a node takes it gracefully). */
  bool asked = sig && ((WTERMSIG(status) == SIGKILL && d->killed) ||
                       (WTERMSIG(status) == SIGTERM && d->stopping));
  /* A stop first: one past its bound ends with the launcher's SIGKILL too. */
  if (d->stopping) {
    d->stops++;
  } else if (sig && WTERMSIG(status) == SIGKILL && d->killed) {
    d->crashes++;
  }
  if (sig && !asked) {
    d->faults++;
    fprintf(stderr, "stackhouse: node %s (pid %d) died of signal %d (%s)\n", L.m->node[n].name,
            d->pid, WTERMSIG(status), strsignal(WTERMSIG(status)));
  } else if (!sig && WEXITSTATUS(status) != 0) {
    d->faults++;
    fprintf(stderr, "stackhouse: node %s (pid %d) exited with %d\n", L.m->node[n].name, d->pid,
            WEXITSTATUS(status));
  }
  close(d->pidfd);
  d->pidfd = -1;
  d->pid = 0;
}

void sh_proc_reap(void) {
  for (uint32_t n = 1; n <= L.n; n++) {
    sh_proc_node *d = &L.node[n];
    int status;
    if (d->pid != 0 && waitpid(d->pid, &status, WNOHANG) == d->pid) ended(n, status);
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
  int status;
  /* Only the launcher thread reaps: the node is still ours. */
  if (d->pid == pid && waitpid(pid, &status, 0) == pid) ended(n, status);
  return 0;
}

/* Before main, in every program that can launch a cluster (this object is
 * linked wherever sh_node_add is): a node process runs its node and never
 * returns; any other goes on to its main. */
__attribute__((constructor)) static void sh_proc_node_boot(int argc, char **argv) {
  if (getenv(SH_PROC_ENV) != NULL) sh_proc_child_main(argc, argv);
}
