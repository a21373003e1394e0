/*
 * What the echo benchmark's two plain-Linux programs (echo_bare, the server
 * that sets the limit, and echo_load, the client) share: option values,
 * the loopback address, socket settings, and what they do when run with no
 * arguments. Header-only: every bench links bench/common's objects, and
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

#endif
