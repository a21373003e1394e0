/*
 * A pool of worker processes: runs jobs in forked children, at most K at a
 * time, and tells how each ended.
 *
 * A job is a function run in a fresh child (a fork of the caller) with its
 * argument. Whatever goes wrong in it (a crash, an abort, a sanitizer report,
 * a hang) stays in the child: the parent learns of it as the child's end.
 *
 * The pool pulls jobs: whenever a child slot is free it asks next() for one,
 * until next() has none and no child is left. next() may have none for a
 * while and more later (say, a job to run again after an end): it is asked
 * again at each turn of the pool's loop.
 *
 * What a child says comes back two ways:
 *  - messages of a fixed size (msg_size, at most PIPE_BUF, so that each write
 *    is atomic: a dying child's message is whole or absent), sent with
 *    pool_send() and handed to on_msg() in order;
 *  - its stderr, whose last POOL_TAIL_BYTES are kept for on_end() (and
 *    copied to the parent's stderr as they come if echo_stderr).
 * When both are at end of file the child is reaped, and on_end() gets its
 * wait status.
 *
 * Timeout: a child that goes timeout_ns without a message that on_msg() calls
 * progress (or, before any, since it started) is sent POOL_TIMEOUT_SIGNAL,
 * which it may handle to say what it can before it dies; one second later
 * it is killed (SIGKILL). Its end then says timed_out.
 *
 * Every callback runs in the parent, in the pool's loop, one at a time. A
 * child dies with its parent (PR_SET_PDEATHSIG).
 *
 * Not simulated code: it reads the real clock, forks and polls.
 */
#ifndef SHSIM_POOL_H
#define SHSIM_POOL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define POOL_JOBS_MAX 256       /* children at a time */
#define POOL_TAIL_BYTES 4096    /* a child's stderr kept for on_end() */
#define POOL_TICK_MS 100        /* on_tick()'s period, about */
#define POOL_TIMEOUT_SIGNAL SIGUSR1

typedef struct pool_job {
  /* Runs in the child; when it returns, the child flushes stdio and exits 0. */
  void (*run)(void *arg);
  /* Given to run(), and to on_msg() and on_end() to name the job. */
  void *arg;
} pool_job;

/* How a child ended. */
typedef struct pool_end {
  int status;     /* from waitpid: WIFEXITED, WIFSIGNALED... */
  bool timed_out; /* the pool signalled it for the timeout */
  const char *err_tail; /* the last err_len bytes of its stderr (not NUL-terminated) */
  size_t err_len;
} pool_end;

typedef struct pool_config {
  size_t jobs;         /* children at a time, 1..POOL_JOBS_MAX */
  size_t msg_size;     /* bytes of one message, 1..PIPE_BUF */
  uint64_t timeout_ns; /* see above */
  bool echo_stderr;    /* copy the children's stderr to ours as it comes */
  /* The next job to start (true), or none now (false). */
  bool (*next)(void *ctx, pool_job *job);
  /* A whole message of job arg. True: it is progress (the timeout restarts). */
  bool (*on_msg)(void *ctx, void *arg, const void *msg);
  /* The child of job arg is gone; its slot is free again. */
  void (*on_end)(void *ctx, void *arg, const pool_end *end);
  /* About every POOL_TICK_MS, while children run (may be NULL). */
  void (*on_tick)(void *ctx);
  void *ctx;
  /* Set (by a signal handler): kill and reap every child, start no other
   * and return -EINTR; no on_end() for those killed, but every message they
   * had sent is still handed to on_msg(), then on_stopped() (may be NULL)
   * for each: a result a child had sent before it was killed is not lost.
   * May be NULL. Children ignore SIGINT and SIGTERM, so that a Ctrl-C sent
   * to the whole process group does not make failures of the runs it cut
   * short. */
  volatile sig_atomic_t *stop;
  void (*on_stopped)(void *ctx, void *arg);
} pool_config;

/* Runs jobs until next() has none and every child has ended. 0, -EINTR
 * when stopped (c->stop), or -errno when the pool could not go on (*what:
 * "fork", "pipe", "poll", "calloc"; -EINVAL for a bad config): then it has
 * killed its children. */
int pool_run(const pool_config *c, const char **what);

/* In a child: sends one message (msg_size bytes). Async-signal-safe, so that
 * a signal handler can report a dying job. */
void pool_send(const void *msg);

/* The monotonic clock the pool times children by, in ns. */
uint64_t pool_now_ns(void);

#endif
