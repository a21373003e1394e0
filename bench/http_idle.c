/*
 * An HTTP server's memory per idle keep-alive connection, for
 * bench/http.sh --idle: the resident set of the server before --connections
 * connections to 127.0.0.1:--port open, once they are open (a second
 * later, accepted), and once each has made one GET of --path and read its
 * whole response (a second later); then they stay open, idle, for
 * --seconds, and close.
 *
 * The resident set is the server process's plus its children's (a server
 * such as nginx serves from worker processes), each VmRSS of /proc: pages
 * a child shares with its parent count twice, but what the connections add
 * is counted once.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "echo_common.h"

#define PROG "http_idle"
#define RESPONSE_MAX 4096

static const char usage[] =
    "usage: http_idle --port P --pid PID [--connections C] [--path PATH] [--seconds T]\n"
    "  The resident set of the HTTP server PID (and its child processes)\n"
    "  before C connections (default 1000) to 127.0.0.1:P open, once open,\n"
    "  and once each has made one keep-alive GET of PATH (default\n"
    "  /plaintext) and read the response; they then stay idle for T seconds\n"
    "  (default 1). Prints KiB and bytes per connection.\n";

typedef struct options {
  unsigned long port, pid, connections, seconds;
  const char *path;
} options;

static unsigned long status_kib(const char *path) {
  char line[256];
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0; /* a child that exited meanwhile */
  unsigned long kib = 0;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmRSS: %lu kB", &kib) == 1) break;
  fclose(f);
  return kib;
}

/* VmRSS of pid and of its children, in KiB. */
static unsigned long rss_kib(unsigned long pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%lu/status", pid);
  unsigned long kib = status_kib(path);
  if (kib == 0) echo_die(PROG, path);
  snprintf(path, sizeof path, "/proc/%lu/task/%lu/children", pid, pid);
  FILE *f = fopen(path, "r");
  unsigned long child;
  while (f != NULL && fscanf(f, "%lu", &child) == 1) {
    snprintf(path, sizeof path, "/proc/%lu/status", child);
    kib += status_kib(path);
  }
  if (f != NULL) fclose(f);
  return kib;
}

/* A blocking connection whose reads give up after 10 s. */
static int conn_open(const options *o) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) echo_die(PROG, "socket");
  struct sockaddr_in a = echo_addr(o->port);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) echo_die(PROG, "connect");
  struct timeval limit = {.tv_sec = 10};
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit) != 0) echo_die(PROG, "SO_RCVTIMEO");
  return fd;
}

/* Whether buf[0, len) holds a whole response: its head, then the
 * Content-Length bytes of body it announces. */
static bool whole(const char *buf, size_t len) {
  const char *end = memmem(buf, len, "\r\n\r\n", 4);
  if (end == NULL) return false;
  const char *cl = memmem(buf, (size_t)(end - buf), "\r\nContent-Length:", 17);
  if (cl == NULL) cl = memmem(buf, (size_t)(end - buf), "\r\ncontent-length:", 17);
  size_t body = cl != NULL ? strtoul(cl + 17, NULL, 10) : 0;
  return len >= (size_t)(end + 4 - buf) + body;
}

static void get(int fd, const char *request, size_t request_len) {
  if (send(fd, request, request_len, MSG_NOSIGNAL) != (ssize_t)request_len) echo_die(PROG, "send");
  char buf[RESPONSE_MAX + 1];
  size_t len = 0;
  do {
    ssize_t n = recv(fd, buf + len, RESPONSE_MAX - len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = ECONNRESET;
      echo_die(PROG, "recv (the server did not answer)");
    }
    len += (size_t)n;
  } while (!whole(buf, len) && len < RESPONSE_MAX);
}

static void settle(unsigned long seconds) {
  struct timespec t = {.tv_sec = (time_t)seconds};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
}

static double per_conn(unsigned long kib, unsigned long base, unsigned long n) {
  return ((double)kib - (double)base) * 1024.0 / (double)n;
}

static options parse(int argc, char **argv) {
  options o = {.connections = 1000, .seconds = 1, .path = "/plaintext"};
  if (argc == 1) echo_usage_exit(usage);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) echo_usage_exit(usage);
    else if (strcmp(a, "--port") == 0) o.port = echo_num(PROG, argc, argv, &i, 1, 65535);
    else if (strcmp(a, "--pid") == 0) o.pid = echo_num(PROG, argc, argv, &i, 1, 1ul << 30);
    else if (strcmp(a, "--connections") == 0) o.connections = echo_num(PROG, argc, argv, &i, 1, 1000000);
    else if (strcmp(a, "--seconds") == 0) o.seconds = echo_num(PROG, argc, argv, &i, 0, 3600);
    else if (strcmp(a, "--path") == 0 && i + 1 < argc) o.path = argv[++i];
    else {
      fprintf(stderr, PROG ": unknown option %s (see --help)\n", a);
      exit(2);
    }
  }
  if (o.port == 0 || o.pid == 0) {
    fprintf(stderr, PROG ": --port and --pid are required (see --help)\n");
    exit(2);
  }
  return o;
}

int main(int argc, char **argv) {
  options o = parse(argc, argv);
  char request[512];
  int request_len = snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%lu\r\n\r\n",
                             o.path, o.port);
  if (request_len < 0 || (size_t)request_len >= sizeof request) {
    fprintf(stderr, PROG ": --path too long\n");
    return 2;
  }
  unsigned long n = o.connections, rss0 = rss_kib(o.pid);
  int *fds = calloc(n, sizeof *fds);
  if (fds == NULL) echo_die(PROG, "calloc");
  for (unsigned long i = 0; i < n; i++) fds[i] = conn_open(&o);
  settle(1); /* the server accepts them meanwhile */
  unsigned long rss1 = rss_kib(o.pid);
  for (unsigned long i = 0; i < n; i++) get(fds[i], request, (size_t)request_len);
  settle(1);
  unsigned long rss2 = rss_kib(o.pid);
  printf("connections=%lu rss_kib=%lu open_kib=%lu answered_kib=%lu"
         " open_bytes/conn=%.0f answered_bytes/conn=%.0f\n",
         n, rss0, rss1, rss2, per_conn(rss1, rss0, n), per_conn(rss2, rss0, n));
  fflush(stdout);
  settle(o.seconds);
  return 0;
}
