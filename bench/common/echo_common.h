/*
 * What the plain-Linux programs of the loopback benchmarks share (echo_bare
 * and http_bare, the servers that set the limits; echo_load and http_idle,
 * clients): option values, the loopback address, socket settings, the
 * listener, and what they do when run with no arguments. Header-only: every bench links bench/common's objects, and
 * the others need none of this.
 *
 * With no arguments both print what they are for and exit 0: `make bench`
 * runs every bench program bare, and a server that started listening there
 * would never return.
 */
#ifndef BENCH_ECHO_COMMON_H
#define BENCH_ECHO_COMMON_H

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* Prints the program's usage (from --help, or run bare) and exits 0. */
static inline void echo_usage_exit(const char *usage) {
  fputs(usage, stdout);
  exit(0);
}

static inline _Noreturn void echo_die(const char *prog, const char *what) {
  fprintf(stderr, "%s: %s: %s\n", prog, what, strerror(errno));
  exit(1);
}

/* The value of option `opt` (argv[*i + 1]), a whole number in [min, max];
 * moves *i past it. Exits 2 on a missing or bad value. */
static inline unsigned long echo_num(const char *prog, int argc, char **argv, int *i,
                                     unsigned long min, unsigned long max) {
  const char *opt = argv[*i];
  if (*i + 1 >= argc) {
    fprintf(stderr, "%s: %s needs a value\n", prog, opt);
    exit(2);
  }
  char *end;
  errno = 0;
  unsigned long v = strtoul(argv[++*i], &end, 10);
  if (errno != 0 || *end != '\0' || end == argv[*i] || v < min || v > max) {
    fprintf(stderr, "%s: %s wants a number from %lu to %lu\n", prog, opt, min, max);
    exit(2);
  }
  return v;
}

static inline unsigned long echo_cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (unsigned long)n : 1;
}

/* 127.0.0.1:port: both programs stay on the loopback. */
static inline struct sockaddr_in echo_addr(unsigned long port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

/* Request/response traffic: a small reply must leave at once, not wait for
 * Nagle's algorithm to see the previous segment acknowledged. */
static inline void echo_nodelay(const char *prog, int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) echo_die(prog, "TCP_NODELAY");
}

/* The command line of a server that sets a benchmark's limit:
 * --port P (required) and --workers W (default: the CPU count). Exits on
 * --help, a bare run, or a bad option. */
static inline void echo_server_args(const char *prog, const char *usage, int argc, char **argv,
                                    unsigned long *port, unsigned long *workers) {
  if (argc == 1) echo_usage_exit(usage);
  *port = 0;
  *workers = echo_cpus();
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) echo_usage_exit(usage);
    else if (strcmp(argv[i], "--port") == 0) *port = echo_num(prog, argc, argv, &i, 1, 65535);
    else if (strcmp(argv[i], "--workers") == 0) *workers = echo_num(prog, argc, argv, &i, 1, 1024);
    else {
      fprintf(stderr, "%s: unknown option %s (see --help)\n", prog, argv[i]);
      exit(2);
    }
  }
  if (*port == 0) {
    fprintf(stderr, "%s: --port is required (see --help)\n", prog);
    exit(2);
  }
}

/* Registers fd with epoll ep, edge-triggered, for events. */
static inline void echo_watch(const char *prog, int ep, int fd, void *ptr, uint32_t events) {
  struct epoll_event ev = {.events = events | EPOLLET, .data.ptr = ptr};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) echo_die(prog, "epoll_ctl");
}

/* A non-blocking listener on 127.0.0.1:port with SO_REUSEPORT, so that
 * each worker thread has its own: the kernel spreads the connections over
 * them, with no lock and no accept thundering herd. */
static inline int echo_listener(const char *prog, unsigned long port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) echo_die(prog, "socket");
  int one = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
    echo_die(prog, "setsockopt");
  struct sockaddr_in a = echo_addr(port);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) echo_die(prog, "bind");
  if (listen(fd, 4096) != 0) echo_die(prog, "listen");
  return fd;
}

/* The next connection waiting on listen_fd, non-blocking and with
 * TCP_NODELAY; -1 once the backlog is empty (with an edge-triggered
 * listener one event may stand for many connections), or on EMFILE and the
 * like: the next connection's edge retries. */
static inline int echo_accept(const char *prog, int listen_fd) {
  for (;;) {
    int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      echo_nodelay(prog, fd);
      return fd;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) fprintf(stderr, "%s: accept4: %s\n", prog, strerror(errno));
    return -1;
  }
}

#endif
