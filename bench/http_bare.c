/*
 * The HTTP benchmark's limit: a plaintext server on bare epoll, written the
 * way a careful C programmer writes one with no runtime and no HTTP library
 * under it, so that bench/http.sh can show what the stackhouse server
 * (examples/http.c) costs above it.
 *
 * It parses just enough: every "\r\n\r\n" ends a request, whatever the
 * request, and each is answered with TechEmpower's plaintext response
 * (Server, Date, Content-Type, Content-Length, "Hello, World!"). A request
 * with a body is not understood; none of the benchmark's has one. An idle
 * connection costs its struct (48 bytes) and the kernel's socket.
 *
 * --workers threads each own an epoll and a SO_REUSEPORT listener on
 * 127.0.0.1:--port, as in echo_bare. Sockets are non-blocking and
 * edge-triggered, registered once for reading and writing. A read hands
 * over every complete request it brought; their responses go out in one
 * send (pipelined requests: one write for the lot). A read shorter than
 * asked drained the socket, so the connection waits for its next edge
 * rather than reading again to hear EAGAIN. Responses the peer has not
 * taken wait in the connection (one malloc, rare) and nothing more is read
 * until they are gone: back-pressure. Each worker formats its Date header
 * at most once a second, when an epoll_wait returns in a new second.
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
#include <time.h>
#include <unistd.h>

#include "echo_common.h"

#define PROG "http_bare"
#define IN_SIZE 16384      /* a read; a longer unfinished head closes */
#define SCRATCH_SIZE 65536 /* a worker's responses being written */
#define MAX_EVENTS 256

static const char usage[] =
    "usage: http_bare --port P [--workers W]\n"
    "  An HTTP/1.1 plaintext server on bare epoll (no stackhouse), the HTTP\n"
    "  benchmark's limit: answers every request (anything up to a blank line)\n"
    "  with TechEmpower's plaintext response. W threads (default: the CPU\n"
    "  count), each with its own epoll and SO_REUSEPORT listener on\n"
    "  127.0.0.1:P. Runs until killed. bench/http.sh starts it.\n";

/* TechEmpower's plaintext response; the Date's 29 characters are written
 * in place once a second. */
static const char response[] = "HTTP/1.1 200 OK\r\n"
                               "Server: bare\r\n"
                               "Date: Thu, 01 Jan 1970 00:00:00 GMT\r\n"
                               "Content-Type: text/plain\r\n"
                               "Content-Length: 13\r\n"
                               "\r\n"
                               "Hello, World!";
#define RESPONSE_LEN (sizeof response - 1)
#define DATE_AT (sizeof "HTTP/1.1 200 OK\r\nServer: bare\r\nDate: " - 1)
#define DATE_LEN 29

/* An idle connection holds no buffer: reads go to its worker's, and only
 * the start of a request split across reads (a malloc, rare) stays. */
typedef struct conn {
  int fd;
  uint32_t kept;  /* bytes of an unfinished request in `part` */
  char *part;     /* IN_SIZE bytes while one is kept, or NULL */
  char *owed;     /* responses the peer has not taken yet, or NULL */
  size_t owed_off, owed_len;
} conn;

typedef struct worker {
  int listen_fd, ep;
  time_t date_sec;
  pthread_t thread;
  char in[IN_SIZE];
  char out[SCRATCH_SIZE]; /* response, repeated: DATE_AT in each is the date */
} worker;

/* Rewrites the Date of every response in w->out when the second changed. */
static void refresh_date(worker *w) {
  time_t now = time(NULL);
  if (now == w->date_sec) return;
  w->date_sec = now;
  struct tm tm;
  char date[DATE_LEN + 1];
  strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", gmtime_r(&now, &tm));
  for (size_t at = 0; at + RESPONSE_LEN <= SCRATCH_SIZE; at += RESPONSE_LEN)
    memcpy(w->out + at + DATE_AT, date, DATE_LEN);
}

static void worker_init(worker *w, unsigned long port) {
  w->listen_fd = echo_listener(PROG, port);
  w->ep = epoll_create1(EPOLL_CLOEXEC);
  if (w->ep < 0) echo_die(PROG, "epoll_create1");
  echo_watch(PROG, w->ep, w->listen_fd, NULL, EPOLLIN);
  for (size_t at = 0; at + RESPONSE_LEN <= SCRATCH_SIZE; at += RESPONSE_LEN)
    memcpy(w->out + at, response, RESPONSE_LEN);
  w->date_sec = -1;
  refresh_date(w);
}

static void accept_all(worker *w) {
  for (int fd; (fd = echo_accept(PROG, w->listen_fd)) >= 0;) {
    conn *c = malloc(sizeof *c);
    if (c == NULL) {
      close(fd);
      continue;
    }
    c->fd = fd;
    c->kept = 0;
    c->part = c->owed = NULL;
    echo_watch(PROG, w->ep, fd, c, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
  }
}

static bool again(ssize_t n) { return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK); }

/* Sends what c owes. True when all of it went (or nothing was owed); false
 * on EAGAIN (the next EPOLLOUT edge resumes) or an error (*dead). */
static bool flush(conn *c, bool *dead) {
  while (c->owed != NULL) {
    ssize_t n = send(c->fd, c->owed + c->owed_off, c->owed_len - c->owed_off, MSG_NOSIGNAL);
    if (n > 0 && (c->owed_off += (size_t)n) == c->owed_len) {
      free(c->owed);
      c->owed = NULL;
    } else if (n <= 0 && !(n < 0 && errno == EINTR)) {
      *dead = !again(n);
      return false;
    }
  }
  return true;
}

/* Sends `count` responses; what the socket does not take, c keeps. False
 * when the connection failed. */
static bool answer(worker *w, conn *c, size_t count) {
  const size_t per_send = SCRATCH_SIZE / RESPONSE_LEN;
  while (count > 0) {
    size_t k = count < per_send ? count : per_send, len = k * RESPONSE_LEN;
    ssize_t n = send(c->fd, w->out, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && !again(n)) return false;
    count -= k;
    size_t sent = n < 0 ? 0 : (size_t)n;
    if (sent < len) {
      /* The rest of this batch and the batches after it, in one buffer. */
      c->owed_len = len - sent + count * RESPONSE_LEN;
      c->owed_off = 0;
      c->owed = malloc(c->owed_len);
      if (c->owed == NULL) return false;
      memcpy(c->owed, w->out + sent, len - sent);
      for (size_t at = len - sent; at < c->owed_len; at += RESPONSE_LEN)
        memcpy(c->owed + at, w->out, RESPONSE_LEN);
      return true;
    }
  }
  return true;
}

/* Counts the whole requests in w->in[0, len), the first `kept` bytes of
 * which were scanned before (but for a terminator straddling them and the
 * new ones), and keeps the start of an unfinished one in c. False when it
 * cannot be kept. */
static bool take_requests(worker *w, conn *c, size_t len, size_t *count) {
  size_t from = c->kept < 3 ? 0 : c->kept - 3, done = 0;
  for (*count = 0;; ++*count) {
    const char *end = memmem(w->in + from, len - from, "\r\n\r\n", 4);
    if (end == NULL) break;
    from = done = (size_t)(end - w->in) + 4;
  }
  c->kept = (uint32_t)(len - done);
  if (c->kept == 0) {
    free(c->part);
    c->part = NULL;
    return true;
  }
  if (c->part == NULL && (c->part = malloc(IN_SIZE)) == NULL) return false;
  memcpy(c->part, w->in + done, c->kept);
  return true;
}

/* Reads and answers until the socket is drained or cannot take more;
 * false when the connection is over (EOF, an error, a head too long). */
static bool serve(worker *w, conn *c) {
  bool dead = false;
  while (flush(c, &dead)) {
    size_t room = IN_SIZE - c->kept, count;
    if (room == 0) return false;
    if (c->kept > 0) memcpy(w->in, c->part, c->kept);
    ssize_t n = recv(c->fd, w->in + c->kept, room, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return again(n);
    if (!take_requests(w, c, c->kept + (size_t)n, &count)) return false;
    if (count > 0 && !answer(w, c, count)) return false;
    if ((size_t)n < room && c->owed == NULL) return true; /* drained */
  }
  return !dead;
}

static void conn_close(conn *c) {
  close(c->fd);
  free(c->owed);
  free(c->part);
  free(c);
}

static void *worker_main(void *arg) {
  worker *w = arg;
  struct epoll_event evs[MAX_EVENTS];
  for (;;) {
    int n = epoll_wait(w->ep, evs, MAX_EVENTS, -1);
    if (n < 0 && errno != EINTR) echo_die(PROG, "epoll_wait");
    refresh_date(w);
    for (int i = 0; i < n; i++) {
      conn *c = evs[i].data.ptr;
      if (c == NULL) accept_all(w);
      else if (!serve(w, c)) conn_close(c);
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  unsigned long port, workers;
  echo_server_args(PROG, usage, argc, argv, &port, &workers);
  worker *ws = calloc(workers, sizeof *ws);
  if (ws == NULL) echo_die(PROG, "calloc");
  /* Every listener is bound before any thread runs, as in echo_bare. */
  for (unsigned long k = 0; k < workers; k++) worker_init(&ws[k], port);
  for (unsigned long k = 0; k < workers; k++) {
    errno = pthread_create(&ws[k].thread, NULL, worker_main, &ws[k]);
    if (errno != 0) echo_die(PROG, "pthread_create");
  }
  printf(PROG ": listening on 127.0.0.1:%lu with %lu workers\n", port, workers);
  fflush(stdout);
  pthread_join(ws[0].thread, NULL); /* never returns: workers run until killed */
  return 0;
}
