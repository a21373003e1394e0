/*
 * A node process of a cluster (proc.h): the program's image executed again
 * by its launcher with SH_NODE_RUN in its environment. A constructor sees
 * it before main and runs the node instead (main never runs): the slot's
 * init, then the entry with the node's argv in a system of its own, as
 * sh_run would, but with SIGTERM as the graceful stop (a thread waits for
 * it and exits the system with 0). What the node persists is a file in
 * the cluster's directory, replaced whole (written aside, synced, renamed)
 * so a SIGKILL mid-write leaves the last one.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <stdatomic.h>
#include <unistd.h>

#include "nodespec.h"
#include "proc.h"

/* ---- persisted state ---------------------------------------------------------------- */

static int state_path(char *buf, size_t cap, const char *suffix) {
  sh_proc_shm *m = atomic_load_explicit(&sh_proc_shared, memory_order_acquire);
  if (m == NULL || sh_proc_self == 0) return -ENOTSUP;
  int n = snprintf(buf, cap, "%s/%s.state%s", m->dir, m->node[sh_proc_self].name, suffix);
  return n > 0 && (size_t)n < cap ? 0 : -ENAMETOOLONG;
}

static int write_all(int fd, const void *data, size_t len) {
  const char *p = data;
  /* Bounded: each pass writes at least a byte or fails. */
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? -errno : -EIO;
    p += w;
    len -= (size_t)w;
  }
  return 0;
}

int sh_node_persist(const void *data, size_t len) {
  char path[320], tmp[320];
  int rc = state_path(path, sizeof path, "");
  if (rc == 0) rc = state_path(tmp, sizeof tmp, ".new");
  if (rc != 0) return rc;
  if (len > SH_NODE_PERSIST_MAX || (data == NULL && len != 0)) return -EINVAL;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return -errno;
  rc = write_all(fd, data, len);
  if (rc == 0 && fsync(fd) != 0) rc = -errno;
  if (close(fd) != 0 && rc == 0) rc = -errno;
  if (rc == 0 && rename(tmp, path) != 0) rc = -errno;
  if (rc != 0) unlink(tmp);
  return rc;
}

int64_t sh_node_recall(void *buf, size_t cap) {
  char path[320];
  int rc = state_path(path, sizeof path, "");
  if (rc != 0) return rc;
  if (buf == NULL && cap != 0) return -EINVAL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? 0 : -errno;
  off_t size = lseek(fd, 0, SEEK_END);
  int64_t out = size < 0 ? -errno : (int64_t)size;
  size_t want = size <= 0 ? 0 : (size_t)size < cap ? (size_t)size : cap;
  /* Bounded: each pass reads at least a byte or ends. */
  for (size_t got = 0; out >= 0 && got < want;) {
    ssize_t r = pread(fd, (char *)buf + got, want - got, (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      out = r < 0 ? -errno : -EIO;
      break;
    }
    got += (size_t)r;
  }
  close(fd);
  return out;
}

const char *sh_node_self(void) {
  sh_proc_shm *m = atomic_load_explicit(&sh_proc_shared, memory_order_acquire);
  if (m == NULL) return NULL;
  return sh_proc_self != 0 ? m->node[sh_proc_self].name : "";
}

/* ---- the node's run ------------------------------------------------------------------- */

/* Set once the node's system exited by itself: the waiter's next SIGTERM
 * (the node's own, to end it) is no stop. */
static atomic_bool node_over;

static void *term_waiter(void *arg) {
  sh_system *sys = arg;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  int sig;
  /* Returns at the first SIGTERM: the launcher's stop, or the end. */
  if (sigwait(&set, &sig) == 0 && !atomic_load_explicit(&node_over, memory_order_acquire))
    sh_system_exit(sys, 0);
  return NULL;
}

/* The node's system, as sh_run runs it; its exit status. */
static int run_node(const sh_proc_slot *d, const sh_actor_class *entry, int argc, char **argv) {
  sh_config cfg = sh_nodespec_config(d->has_config ? &d->config : NULL, d->workers);
  sh_system *sys;
  int rc = sh_system_new(&cfg, &sys);
  if (rc != 0) return 70;
  const sh_addr *a;
  rc = sh_spawn(sys, entry, NULL, 1, &a);
  if (rc == 0) {
    sh_args *args = sh_msg_new(sh_args, .argc = argc, .argv = argv);
    rc = args == NULL ? -ENOMEM : sh_notice(a, &args->hdr);
  }
  if (rc == 0) rc = sh_system_start(sys);
  pthread_t waiter;
  bool waiting = rc == 0 && pthread_create(&waiter, NULL, term_waiter, sys) == 0;
  if (rc == 0) rc = waiting ? sh_system_wait(sys) : -EAGAIN;
  if (waiting) {
    /* Release: the waiter reads the flag after its sigwait returns. */
    atomic_store_explicit(&node_over, true, memory_order_release);
    pthread_kill(waiter, SIGTERM);
    pthread_join(waiter, NULL);
  }
  sh_system_shutdown(sys);
  sh_system_free(sys);
  return rc < 0 ? 70 : rc & 0xff;
}

void sh_proc_child_main(int argc, char **argv) {
  const char *env = getenv(SH_PROC_ENV);
  int fd, slot;
  long ppid;
  if (sscanf(env, "%d:%d:%ld", &fd, &slot, &ppid) != 3 || slot < 1 || slot > SH_NODE_MAX) {
    fprintf(stderr, "stackhouse: a node process with a bad %s: %s\n", SH_PROC_ENV, env);
    _exit(70);
  }
  unsetenv(SH_PROC_ENV);
  /* The launcher's death ends its nodes (it spawned them from one thread
   * that lives as long as its cluster). */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != (pid_t)ppid) {
    fprintf(stderr, "stackhouse: %s names launcher %ld, not this process's parent: no node\n",
            SH_PROC_ENV, ppid);
    _exit(70);
  }
  sh_proc_shm *m = mmap(NULL, sizeof(sh_proc_shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) _exit(70);
  sh_proc_self = (uint32_t)slot;
  atomic_store_explicit(&sh_proc_shared, m, memory_order_release);
  const sh_proc_slot *d = &m->node[slot];
  const sh_actor_class *entry = sh_proc_resolve(&d->entry);
  void (*init)(void) = d->has_init ? (void (*)(void))sh_proc_resolve(&d->init) : NULL;
  if (entry == NULL || (d->has_init && init == NULL)) _exit(70);
  /* Blocked here, so every thread the node makes has it blocked too:
   * only the waiter takes it. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  if (init != NULL) init();
  /* The exec argv has the node's argv after one placeholder when argc 0. */
  int skip = argc - d->argc;
  exit(run_node(d, entry, d->argc, argv + (skip > 0 ? skip : 0)));
}
