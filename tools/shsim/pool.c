/*
 * The process pool (pool.h): children, their two pipes, the timeout
 * watchdog, one poll loop.
 */
#include "pool.h"

#include "covdump.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GRACE_NS 1000000000ull /* from the timeout signal to SIGKILL */

typedef struct slot {
  pid_t pid;          /* 0: free */
  int msg_fd, err_fd; /* read ends; -1 once at EOF */
  void *arg;          /* its job's */
  uint64_t started_ns; /* start or last progress: the timeout's reference */
  bool timed_out;
  uint64_t signalled_ns; /* when it was asked to report and die */
  size_t mlen;
  _Alignas(max_align_t) char msg[PIPE_BUF]; /* a message as it comes */
  size_t tlen;
  char tail[POOL_TAIL_BYTES]; /* the last bytes of the child's stderr */
} slot;

typedef struct pool {
  const pool_config *c;
  slot *slots;
  bool echo;        /* echo_stderr, until a write to our stderr fails */
  const char *what; /* what failed, for pool_run's caller */
} pool;

/* In a child: its end of the message pipe. */
static int child_msg_fd = -1;
static size_t child_msg_size;

uint64_t pool_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void pool_send(const void *msg) {
  ssize_t n;
  do {
    n = write(child_msg_fd, msg, child_msg_size);
  } while (n < 0 && errno == EINTR);
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void close_pipe(int fds[2]) {
  close_fd(&fds[0]);
  close_fd(&fds[1]);
}

/* Kills and reaps every child: the pool cannot go on. */
static int pool_fail(pool *p, const char *what, int err) {
  p->what = what;
  for (size_t i = 0; i < p->c->jobs; i++) {
    slot *s = &p->slots[i];
    if (s->pid == 0) continue;
    kill(s->pid, SIGKILL);
    close_fd(&s->msg_fd);
    close_fd(&s->err_fd);
    while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    s->pid = 0;
  }
  return -err;
}

__attribute__((noreturn)) static void child_main(pool *p, const pool_job *job, pid_t parent,
                                                 int msg_w, int err_w) {
  /* A parent gone (killed) must not leave a hung job behind. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  /* The parent decides what a Ctrl-C or a SIGTERM ends (pool_config.stop). */
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  for (size_t i = 0; i < p->c->jobs; i++) {
    close_fd(&p->slots[i].msg_fd);
    close_fd(&p->slots[i].err_fd);
  }
  dup2(err_w, STDERR_FILENO);
  close(err_w);
  child_msg_fd = msg_w;
  child_msg_size = p->c->msg_size;
  job->run(job->arg);
  fflush(NULL);
  covdump_write(); /* _exit skips the coverage counters' exit hook */
  _exit(0);
}

static int slot_spawn(pool *p, slot *s, const pool_job *job) {
  int mp[2], ep[2];
  if (pipe2(mp, O_CLOEXEC) != 0) return pool_fail(p, "pipe", errno);
  if (pipe2(ep, O_CLOEXEC) != 0) {
    int err = errno;
    close_pipe(mp);
    return pool_fail(p, "pipe", err);
  }
  fflush(NULL); /* else the child would flush the parent's buffered output again */
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close_pipe(mp);
    close_pipe(ep);
    return pool_fail(p, "fork", err);
  }
  if (pid == 0) {
    close(mp[0]);
    close(ep[0]);
    child_main(p, job, parent, mp[1], ep[1]);
  }
  close(mp[1]);
  close(ep[1]);
  s->pid = pid;
  s->msg_fd = mp[0];
  s->err_fd = ep[0];
  s->arg = job->arg;
  s->started_ns = pool_now_ns();
  s->timed_out = false;
  s->mlen = 0;
  s->tlen = 0;
  return 0;
}

/* Gives each free slot a job, while next() has one. */
static int pool_fill(pool *p) {
  for (size_t i = 0; i < p->c->jobs; i++) {
    if (p->slots[i].pid != 0) continue;
    pool_job job;
    if (!p->c->next(p->c->ctx, &job)) return 0;
    int rc = slot_spawn(p, &p->slots[i], &job);
    if (rc != 0) return rc;
  }
  return 0;
}

static bool pool_busy(const pool *p) {
  for (size_t i = 0; i < p->c->jobs; i++)
    if (p->slots[i].pid != 0) return true;
  return false;
}

static void slot_read_msgs(pool *p, slot *s) {
  size_t size = p->c->msg_size;
  ssize_t n = read(s->msg_fd, s->msg + s->mlen, size - s->mlen);
  if (n < 0 && errno == EINTR) return;
  if (n <= 0) {
    close_fd(&s->msg_fd);
    return;
  }
  s->mlen += (size_t)n;
  if (s->mlen < size) return;
  s->mlen = 0;
  if (p->c->on_msg(p->c->ctx, s->arg, s->msg)) s->started_ns = pool_now_ns();
}

static void tail_append(slot *s, const char *buf, size_t n) {
  if (n >= POOL_TAIL_BYTES) {
    buf += n - POOL_TAIL_BYTES;
    n = POOL_TAIL_BYTES;
  }
  if (s->tlen + n > POOL_TAIL_BYTES) {
    size_t drop = s->tlen + n - POOL_TAIL_BYTES;
    memmove(s->tail, s->tail + drop, s->tlen - drop);
    s->tlen -= drop;
  }
  memcpy(s->tail + s->tlen, buf, n);
  s->tlen += n;
}

static void slot_read_stderr(pool *p, slot *s) {
  char buf[4096];
  ssize_t n = read(s->err_fd, buf, sizeof(buf));
  if (n < 0 && errno == EINTR) return;
  if (n <= 0) {
    close_fd(&s->err_fd);
    return;
  }
  if (p->echo && write(STDERR_FILENO, buf, (size_t)n) < 0) p->echo = false;
  tail_append(s, buf, (size_t)n);
}

/* Both pipes are at EOF: the child is gone or going. */
static void slot_reap(pool *p, slot *s) {
  int status = 0;
  while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR) {
  }
  s->pid = 0;
  pool_end end = {.status = status, .timed_out = s->timed_out, .err_tail = s->tail,
                  .err_len = s->tlen};
  p->c->on_end(p->c->ctx, s->arg, &end);
}

/* A child past the timeout is asked to report and die, then killed outright
 * if it is still there a grace period later. */
static void pool_watchdog(pool *p) {
  uint64_t now = pool_now_ns();
  for (size_t i = 0; i < p->c->jobs; i++) {
    slot *s = &p->slots[i];
    if (s->pid == 0) continue;
    if (s->timed_out) {
      if (now - s->signalled_ns >= GRACE_NS) kill(s->pid, SIGKILL);
    } else if (now - s->started_ns >= p->c->timeout_ns) {
      kill(s->pid, POOL_TIMEOUT_SIGNAL);
      s->timed_out = true;
      s->signalled_ns = now;
    }
  }
}

/* Waits up to POOL_TICK_MS for output of any child and handles it. */
static int pool_poll(pool *p) {
  struct pollfd pfd[2 * POOL_JOBS_MAX];
  slot *owner[2 * POOL_JOBS_MAX];
  nfds_t n = 0;
  for (size_t i = 0; i < p->c->jobs; i++) {
    slot *s = &p->slots[i];
    if (s->pid == 0) continue;
    int fds[2] = {s->msg_fd, s->err_fd};
    for (size_t k = 0; k < 2; k++) {
      if (fds[k] < 0) continue;
      pfd[n] = (struct pollfd){.fd = fds[k], .events = POLLIN};
      owner[n++] = s;
    }
  }
  int ready = poll(pfd, n, POOL_TICK_MS);
  if (ready < 0 && errno != EINTR) return pool_fail(p, "poll", errno);
  if (p->c->stop != NULL && *p->c->stop != 0) return 0; /* no end is news any more */
  for (nfds_t k = 0; k < n && ready > 0; k++) {
    if (pfd[k].revents == 0) continue;
    slot *s = owner[k];
    if (pfd[k].fd == s->msg_fd) slot_read_msgs(p, s);
    else slot_read_stderr(p, s);
  }
  for (size_t i = 0; i < p->c->jobs; i++) {
    slot *s = &p->slots[i];
    if (s->pid != 0 && s->msg_fd < 0 && s->err_fd < 0) slot_reap(p, s);
  }
  return 0;
}

/* Stopped: every child killed and reaped; what each had sent before (its
 * pipe holds it until read, and reaches its end once the child is gone) is
 * handed on, then on_stopped() for its job. Bounded: a dead child's pipe
 * holds at most a pipe's capacity. */
static int pool_stop(pool *p) {
  for (size_t i = 0; i < p->c->jobs; i++) {
    slot *s = &p->slots[i];
    if (s->pid == 0) continue;
    kill(s->pid, SIGKILL);
    while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    s->pid = 0;
    while (s->msg_fd >= 0) slot_read_msgs(p, s);
    close_fd(&s->err_fd);
    if (p->c->on_stopped != NULL) p->c->on_stopped(p->c->ctx, s->arg);
  }
  return -EINTR;
}

/* The loop ends because every child ends: on its own, or by the watchdog. */
int pool_run(const pool_config *c, const char **what) {
  *what = NULL;
  if (c->jobs < 1 || c->jobs > POOL_JOBS_MAX || c->msg_size < 1 || c->msg_size > PIPE_BUF)
    return -EINVAL;
  pool p = {.c = c, .echo = c->echo_stderr};
  p.slots = calloc(c->jobs, sizeof(slot));
  if (p.slots == NULL) {
    *what = "calloc";
    return -ENOMEM;
  }
  for (size_t i = 0; i < c->jobs; i++) {
    p.slots[i].msg_fd = -1;
    p.slots[i].err_fd = -1;
  }
  int rc;
  for (;;) {
    if (c->stop != NULL && *c->stop != 0) {
      rc = pool_stop(&p);
      break;
    }
    rc = pool_fill(&p);
    if (rc != 0 || !pool_busy(&p)) break;
    rc = pool_poll(&p);
    if (rc != 0) break;
    pool_watchdog(&p);
    if (c->on_tick != NULL) c->on_tick(c->ctx);
  }
  *what = p.what;
  free(p.slots);
  return rc;
}
