/*
 * The echo benchmark's load client, on plain Linux APIs (no stackhouse):
 * --connections connections to 127.0.0.1:--port, each one a request/response
 * loop: send one --size byte message, wait until that many bytes came back,
 * send the next. Connections are spread over --threads threads, each with
 * its own epoll, sockets non-blocking and edge-triggered; a connection
 * writes and reads in the same pass, so a message larger than the socket
 * buffers flows while its echo comes back.
 *
 * After --seconds it prints one line: the requests completed, requests per
 * second and MB/s (10^6 bytes of echo received per second), over the time
 * from the moment every connection was open to the moment every thread had
 * stopped, so that requests finished while the threads were stopping count
 * against the time they took.
 *
 * --check fills each message from a generator seeded by the connection and
 * the request's number, and compares every byte that comes back with what
 * was sent: a lost, repeated, reordered or stale byte (a server that echoes
 * the previous request, or one connection's bytes on another) fails with
 * exit status 1. Without --check the bytes are not looked at, so that the
 * client costs the server's side of the machine as little as it can.
 *
 * --idle --pid P measures the server's memory per idle connection instead:
 * the resident set of process P (VmRSS) before the connections open, once
 * they are open and accepted (a second later), and once each has echoed
 * one --size message; then they stay open, idle, for --seconds while the
 * caller looks at the server, and close.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
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

#define PROG "echo_load"
#define MAX_EVENTS 256

static const char usage[] =
    "usage: echo_load --port P [--connections C] [--size S] [--seconds T]\n"
    "                 [--threads N] [--check]\n"
    "       echo_load --port P --idle --pid PID [--connections C] [--size S]\n"
    "  Load for an echo server on 127.0.0.1:P: C connections (default 16),\n"
    "  each sending one S-byte message (default 64), waiting for its echo and\n"
    "  sending the next, for T seconds (default 5), on N threads (default:\n"
    "  the CPU count, at most C). Prints\n"
    "    connections=C size=S requests=R req/s=X MB/s=Y\n"
    "  (MB/s: 10^6 bytes received per second). --check verifies that every\n"
    "  byte echoed is the byte sent (exit status 1 if not).\n"
    "  --idle: the resident set of the server PID before C connections open,\n"
    "  once open and after one S-byte echo on each; they then stay idle for T\n"
    "  seconds. Prints KiB and bytes per connection.\n";

typedef struct options {
  unsigned long port, connections, size, seconds, threads, pid;
  bool check, idle;
} options;

typedef struct lconn {
  int fd;
  uint32_t id;
  uint64_t nreq;       /* requests completed: numbers the next message */
  size_t sent, got;    /* of the current message */
  unsigned char *out, *in;
} lconn;

typedef struct loader {
  const options *o;
  lconn *conns;
  size_t nconns;
  int ep;
  uint64_t requests, bytes;
  bool failed;
  pthread_t thread;
} loader;

static atomic_bool stop;
static pthread_barrier_t opened;

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

/* The message of request nreq on connection id (--check): a generator
 * seeded by both, so that no two messages look alike. */
static void fill(lconn *c, size_t size) {
  uint64_t x = ((uint64_t)c->id << 40) ^ c->nreq, word = 0;
  for (size_t j = 0; j < size; j++) {
    if (j % 8 == 0) word = splitmix64(&x);
    c->out[j] = (unsigned char)(word >> (8 * (j % 8)));
  }
}

static void conn_open(lconn *c, const options *o, uint32_t id) {
  c->id = id;
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd < 0) echo_die(PROG, "socket");
  struct sockaddr_in a = echo_addr(o->port);
  if (connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0) echo_die(PROG, "connect");
  echo_nodelay(PROG, c->fd);
  if (fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) != 0) echo_die(PROG, "fcntl");
  c->out = calloc(1, o->size);
  c->in = calloc(1, o->size);
  if (c->out == NULL || c->in == NULL) echo_die(PROG, "calloc");
  if (o->check) fill(c, o->size);
}

static bool again(ssize_t n) { return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR); }

static bool fail(const lconn *c, const char *why) {
  fprintf(stderr, PROG ": connection %u: %s\n", c->id, why);
  return false;
}

/* The echo of c's message is complete: count it, check it, start the next. */
static bool complete(loader *l, lconn *c) {
  size_t size = l->o->size;
  if (l->o->check && memcmp(c->in, c->out, size) != 0) return fail(c, "--check: an echo differs from its message");
  l->requests++;
  l->bytes += size;
  c->nreq++;
  c->sent = c->got = 0;
  if (l->o->check) fill(c, size);
  return true;
}

/* Sends and receives until neither moves; false on a closed or failed
 * connection or a --check mismatch. */
static bool progress(loader *l, lconn *c) {
  size_t size = l->o->size;
  for (bool moved = true; moved;) {
    moved = false;
    if (c->sent < size) {
      ssize_t n = send(c->fd, c->out + c->sent, size - c->sent, MSG_NOSIGNAL);
      if (n > 0) {
        c->sent += (size_t)n;
        moved = true;
      } else if (!again(n)) {
        return fail(c, strerror(errno));
      }
    }
    ssize_t n = recv(c->fd, c->in + c->got, size - c->got, 0);
    if (n > 0) {
      c->got += (size_t)n;
      moved = true;
    } else if (n == 0) {
      return fail(c, "closed by the server");
    } else if (!again(n)) {
      return fail(c, strerror(errno));
    }
    if (c->got == size && !complete(l, c)) return false;
  }
  return true;
}

static void *loader_main(void *arg) {
  loader *l = arg;
  for (size_t k = 0; k < l->nconns; k++) {
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = &l->conns[k]};
    if (epoll_ctl(l->ep, EPOLL_CTL_ADD, l->conns[k].fd, &ev) != 0) echo_die(PROG, "epoll_ctl");
  }
  pthread_barrier_wait(&opened);
  struct epoll_event evs[MAX_EVENTS];
  /* The first events are every connection's EPOLLOUT: they send the first
   * messages. The timeout bounds how late a thread sees `stop`. */
  while (!atomic_load_explicit(&stop, memory_order_relaxed) && !l->failed) {
    int n = epoll_wait(l->ep, evs, MAX_EVENTS, 50);
    if (n < 0 && errno != EINTR) echo_die(PROG, "epoll_wait");
    for (int i = 0; i < n && !l->failed; i++) l->failed = !progress(l, evs[i].data.ptr);
  }
  return NULL;
}

static options parse(int argc, char **argv) {
  options o = {.connections = 16, .size = 64, .seconds = 5, .threads = echo_cpus()};
  if (argc == 1) echo_usage_exit(usage);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) echo_usage_exit(usage);
    else if (strcmp(a, "--port") == 0) o.port = echo_num(PROG, argc, argv, &i, 1, 65535);
    else if (strcmp(a, "--connections") == 0) o.connections = echo_num(PROG, argc, argv, &i, 1, 100000);
    else if (strcmp(a, "--size") == 0) o.size = echo_num(PROG, argc, argv, &i, 1, 64ul << 20);
    else if (strcmp(a, "--seconds") == 0) o.seconds = echo_num(PROG, argc, argv, &i, 1, 3600);
    else if (strcmp(a, "--threads") == 0) o.threads = echo_num(PROG, argc, argv, &i, 1, 1024);
    else if (strcmp(a, "--check") == 0) o.check = true;
    else if (strcmp(a, "--idle") == 0) o.idle = true;
    else if (strcmp(a, "--pid") == 0) o.pid = echo_num(PROG, argc, argv, &i, 1, 1ul << 30);
    else {
      fprintf(stderr, PROG ": unknown option %s (see --help)\n", a);
      exit(2);
    }
  }
  if (o.port == 0) {
    fprintf(stderr, PROG ": --port is required (see --help)\n");
    exit(2);
  }
  if (o.idle && o.pid == 0) {
    fprintf(stderr, PROG ": --idle needs the server's --pid (see --help)\n");
    exit(2);
  }
  if (o.threads > o.connections) o.threads = o.connections;
  return o;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Connection i goes to thread i % threads. */
static loader *loaders_new(const options *o) {
  loader *ls = calloc(o->threads, sizeof *ls);
  lconn *cs = calloc(o->connections, sizeof *cs);
  if (ls == NULL || cs == NULL) echo_die(PROG, "calloc");
  for (unsigned long i = 0; i < o->connections; i++) conn_open(&cs[i], o, (uint32_t)i);
  for (unsigned long t = 0, first = 0; t < o->threads; t++) {
    size_t n = o->connections / o->threads + (t < o->connections % o->threads);
    ls[t] = (loader){.o = o, .conns = cs + first, .nconns = n, .ep = epoll_create1(EPOLL_CLOEXEC)};
    if (ls[t].ep < 0) echo_die(PROG, "epoll_create1");
    first += n;
  }
  return ls;
}

/* ---- --idle: the server's memory per idle connection -------------------- */

/* The resident set of process pid, in KiB (VmRSS of /proc/pid/status). */
static unsigned long rss_kib(unsigned long pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%lu/status", pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) echo_die(PROG, path);
  unsigned long kib = 0;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmRSS: %lu kB", &kib) == 1) break;
  fclose(f);
  return kib;
}

/* Waits until fd is ready for events (or fails: the send or recv says). */
static void wait_fd(int fd, short events) {
  struct pollfd p = {.fd = fd, .events = events};
  if (poll(&p, 1, 10000) == 0) {
    errno = ETIMEDOUT;
    echo_die(PROG, "--idle: the server does not answer");
  }
}

/* One message out and its whole echo back on c, whatever the time. */
static void round_trip(lconn *c, size_t size) {
  for (c->sent = 0; c->sent < size;) {
    ssize_t n = send(c->fd, c->out + c->sent, size - c->sent, MSG_NOSIGNAL);
    if (n > 0) c->sent += (size_t)n;
    else if (again(n)) wait_fd(c->fd, POLLOUT);
    else echo_die(PROG, "--idle: send");
  }
  for (c->got = 0; c->got < size;) {
    ssize_t n = recv(c->fd, c->in + c->got, size - c->got, 0);
    if (n > 0) c->got += (size_t)n;
    else if (again(n)) wait_fd(c->fd, POLLIN);
    else echo_die(PROG, "--idle: recv");
  }
}

static void settle(void) {
  struct timespec t = {.tv_sec = 1};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
}

static double per_conn(unsigned long kib, unsigned long base, unsigned long n) {
  return ((double)kib - (double)base) * 1024.0 / (double)n;
}

static int idle_main(const options *o) {
  unsigned long n = o->connections, rss0 = rss_kib(o->pid);
  lconn *cs = calloc(n, sizeof *cs);
  if (cs == NULL) echo_die(PROG, "calloc");
  for (unsigned long i = 0; i < n; i++) conn_open(&cs[i], o, (uint32_t)i);
  settle(); /* the server accepts them meanwhile */
  unsigned long rss1 = rss_kib(o->pid);
  for (unsigned long i = 0; i < n; i++) round_trip(&cs[i], o->size);
  settle();
  unsigned long rss2 = rss_kib(o->pid);
  printf("connections=%lu size=%lu rss_kib=%lu open_kib=%lu echoed_kib=%lu"
         " open_bytes/conn=%.0f echoed_bytes/conn=%.0f\n",
         n, o->size, rss0, rss1, rss2, per_conn(rss1, rss0, n), per_conn(rss2, rss0, n));
  fflush(stdout);
  struct timespec idle = {.tv_sec = (time_t)o->seconds};
  while (nanosleep(&idle, &idle) != 0 && errno == EINTR) {}
  return 0;
}

int main(int argc, char **argv) {
  options o = parse(argc, argv);
  if (o.idle) return idle_main(&o);
  loader *ls = loaders_new(&o);
  pthread_barrier_init(&opened, NULL, (unsigned)o.threads + 1);
  for (unsigned long t = 0; t < o.threads; t++) {
    errno = pthread_create(&ls[t].thread, NULL, loader_main, &ls[t]);
    if (errno != 0) echo_die(PROG, "pthread_create");
  }
  pthread_barrier_wait(&opened);
  double t0 = now_s();
  struct timespec span = {.tv_sec = (time_t)o.seconds};
  while (nanosleep(&span, &span) != 0 && errno == EINTR) {}
  atomic_store(&stop, true);
  uint64_t requests = 0, bytes = 0;
  bool failed = false;
  for (unsigned long t = 0; t < o.threads; t++) {
    pthread_join(ls[t].thread, NULL);
    requests += ls[t].requests;
    bytes += ls[t].bytes;
    failed |= ls[t].failed;
  }
  double secs = now_s() - t0;
  printf("connections=%lu size=%lu requests=%llu req/s=%.0f MB/s=%.1f\n", o.connections, o.size,
         (unsigned long long)requests, (double)requests / secs, (double)bytes / secs / 1e6);
  if (o.check && !failed)
    fprintf(stderr, PROG ": --check: %llu requests echoed byte for byte\n", (unsigned long long)requests);
  if (requests == 0) fprintf(stderr, PROG ": no request completed\n");
  return failed || requests == 0 ? 1 : 0;
}
