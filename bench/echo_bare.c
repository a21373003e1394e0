/*
 * The echo benchmark's limit: a TCP echo server on bare epoll, written the
 * way a competent C programmer writes one with no runtime under it, so that
 * bench/echo.sh can show what a server built on stackhouse costs above it.
 *
 * --workers threads each own an epoll and a listener of their own on
 * 127.0.0.1:--port (SO_REUSEPORT: the kernel spreads the connections over
 * the listeners, so no lock and no accept thundering herd). Sockets are
 * non-blocking and edge-triggered, each registered once for reading and
 * writing: on any event the connection first writes what it still owes,
 * then reads and writes back until the kernel says EAGAIN. Bytes the peer
 * has not taken yet stay in the connection's buffer and the next EPOLLOUT
 * edge sends them; nothing more is read meanwhile, which is the server's
 * back-pressure. EOF or an error closes the connection (close also takes
 * it out of the epoll).
 *
 * Runs until killed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "echo_common.h"

#define PROG "echo_bare"
#define BUF_SIZE (64 * 1024)
#define MAX_EVENTS 256

static const char usage[] =
    "usage: echo_bare --port P [--workers W]\n"
    "  A TCP echo server on bare epoll (no stackhouse), the echo benchmark's\n"
    "  limit: W threads (default: the CPU count), each with its own epoll and\n"
    "  SO_REUSEPORT listener on 127.0.0.1:P. Runs until killed.\n"
    "  bench/echo.sh starts it and measures it with echo_load.\n";

typedef struct conn {
  int fd;
  uint32_t off, len; /* buf[off, len) is read but not yet written back */
  char buf[BUF_SIZE];
} conn;

typedef struct worker {
  int listen_fd, ep;
  pthread_t thread;
} worker;

static void accept_all(worker *w) {
  for (int fd; (fd = echo_accept(PROG, w->listen_fd)) >= 0;) {
    conn *c = malloc(sizeof *c);
    if (c == NULL) {
      close(fd);
      continue;
    }
    c->fd = fd;
    c->off = c->len = 0;
    echo_watch(PROG, w->ep, fd, c, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
  }
}

/* Writes what c still owes. True when all of it went (or nothing was owed);
 * false on EAGAIN (the next EPOLLOUT edge resumes) or an error (*dead). */
static bool flush(conn *c, bool *dead) {
  while (c->off < c->len) {
    ssize_t n = send(c->fd, c->buf + c->off, c->len - c->off, MSG_NOSIGNAL);
    if (n > 0) {
      c->off += (uint32_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      *dead = !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
      return false;
    }
  }
  c->off = c->len = 0;
  return true;
}

/* Echoes until the socket has nothing to read or cannot take more; false
 * when the connection is over (EOF or an error). */
static bool serve(conn *c) {
  bool dead = false;
  while (flush(c, &dead)) {
    ssize_t n = recv(c->fd, c->buf, BUF_SIZE, 0);
    if (n > 0) {
      c->len = (uint32_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
  }
  return !dead;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  struct epoll_event evs[MAX_EVENTS];
  for (;;) {
    int n = epoll_wait(w->ep, evs, MAX_EVENTS, -1);
    if (n < 0 && errno != EINTR) echo_die(PROG, "epoll_wait");
    for (int i = 0; i < n; i++) {
      conn *c = evs[i].data.ptr;
      if (c == NULL) {
        accept_all(w);
      } else if (!serve(c)) {
        close(c->fd);
        free(c);
      }
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  unsigned long port, workers;
  echo_server_args(PROG, usage, argc, argv, &port, &workers);
  worker *ws = calloc(workers, sizeof *ws);
  if (ws == NULL) echo_die(PROG, "calloc");
  /* Every listener is bound before any thread runs: a port in use fails
   * here, and once the first connection succeeds all of them accept. */
  for (unsigned long k = 0; k < workers; k++) {
    ws[k].listen_fd = echo_listener(PROG, port);
    ws[k].ep = epoll_create1(EPOLL_CLOEXEC);
    if (ws[k].ep < 0) echo_die(PROG, "epoll_create1");
    echo_watch(PROG, ws[k].ep, ws[k].listen_fd, NULL, EPOLLIN);
  }
  for (unsigned long k = 0; k < workers; k++) {
    errno = pthread_create(&ws[k].thread, NULL, worker_main, &ws[k]);
    if (errno != 0) echo_die(PROG, "pthread_create");
  }
  printf(PROG ": listening on 127.0.0.1:%lu with %lu workers\n", port, workers);
  fflush(stdout);
  pthread_join(ws[0].thread, NULL); /* never returns: workers run until killed */
  return 0;
}
