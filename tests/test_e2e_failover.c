/*
 * End-to-end test of examples/failover/ on the production backend (epoll,
 * real loopback sockets): three nodes and a client, each a system of its
 * own in this one process, booted as a process boots them (sh_spawn of the
 * entry class, an sh_args notice with its argv):
 *   - the client gets its requests served; the primary is stopped (its
 *     system shut down) and a second client still gets served, by another
 *     node in a higher epoch;
 *   - the observer sees no two nodes serving at the same time (one clock
 *     for all here: the serving intervals of different nodes are disjoint)
 *     and every served request inside its node's interval;
 *   - every system shuts down with its pools whole (ASan: no leak);
 *   - a client that gets a lower epoch after a higher one (a fake node on a
 *     raw socket) exits with 1, the fencing violation;
 *   - a bad argv exits a node's and a client's system with 2.
 * This also runs several systems at once in one process on epoll.
 * FO_VERBOSE=1 in the environment passes --verbose to the nodes (their
 * changes of role and of connections on stderr).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stackhouse/probe.h>
#include <stackhouse/stackhouse.h>

#include "../examples/failover/failover.h"
#include "support/harness.h"

#define NODES 3
#define WAIT_MS 30000
#define LEASE "300"
#define HEARTBEAT "30"

/* ---- what the observer saw -------------------------------------------------- */

#define MAX_SPANS 256

typedef struct span {
  int node;
  uint64_t epoch;
  int64_t begin_ms, end_ms; /* end -1: still serving */
} span;

static struct {
  pthread_mutex_t lock;
  span spans[MAX_SPANS];
  int nspans, bad;
  long served[NODES + 1];
  char why[160];
} obs = {.lock = PTHREAD_MUTEX_INITIALIZER};

static span *open_span(int node) {
  for (int i = obs.nspans - 1; i >= 0; i--)
    if (obs.spans[i].node == node) return obs.spans[i].end_ms < 0 ? &obs.spans[i] : NULL;
  return NULL;
}

static void wrong(const char *what, const failover_event *ev) {
  if (obs.bad++ == 0)
    snprintf(obs.why, sizeof(obs.why), "%s: node %d kind %d at %lld", what, ev->node, ev->kind,
             (long long)ev->local_ms);
}

static void observe(const failover_event *ev, void *ctx) {
  (void)ctx;
  pthread_mutex_lock(&obs.lock);
  span *s = ev->node >= 1 && ev->node <= NODES ? open_span(ev->node) : NULL;
  if (ev->node < 1 || ev->node > NODES) wrong("no such node", ev);
  else if (ev->kind == FO_SERVE_BEGIN && s != NULL) wrong("begins twice", ev);
  else if (ev->kind == FO_SERVE_BEGIN && obs.nspans == MAX_SPANS) wrong("too many spans", ev);
  else if (ev->kind == FO_SERVE_BEGIN)
    obs.spans[obs.nspans++] = (span){ev->node, ev->epoch, ev->local_ms, -1};
  else if (s == NULL || s->epoch != ev->epoch) wrong("not serving", ev);
  else if (ev->kind == FO_SERVE_END) s->end_ms = ev->local_ms;
  else if (ev->local_ms < s->begin_ms) wrong("served before its begin", ev);
  else obs.served[ev->node]++;
  pthread_mutex_unlock(&obs.lock);
}

/* The node serving now, or 0; its epoch in *epoch. */
static int serving_node(uint64_t *epoch) {
  pthread_mutex_lock(&obs.lock);
  int node = 0;
  for (int n = 1; n <= NODES && node == 0; n++) {
    span *s = open_span(n);
    if (s != NULL) {
      node = n;
      *epoch = s->epoch;
    }
  }
  pthread_mutex_unlock(&obs.lock);
  return node;
}

/* After every system is down: every span closed, spans of different nodes
 * disjoint (one clock for all of them here), epochs growing with time. */
static void assert_spans(void) {
  assert_int_equal(obs.bad, 0);
  for (int i = 0; i < obs.nspans; i++) {
    const span *a = &obs.spans[i];
    assert_true(a->end_ms >= a->begin_ms);
    for (int j = 0; j < i; j++) {
      const span *b = &obs.spans[j];
      if (a->node == b->node) continue;
      if (!(a->end_ms <= b->begin_ms || b->end_ms <= a->begin_ms))
        fail_msg("node %d [%lld, %lld) and node %d [%lld, %lld) overlap", a->node,
                 (long long)a->begin_ms, (long long)a->end_ms, b->node, (long long)b->begin_ms,
                 (long long)b->end_ms);
      if (b->begin_ms < a->begin_ms) assert_true(b->epoch < a->epoch);
    }
  }
}

/* ---- booting systems as processes ------------------------------------------------ */

typedef struct argv_buf {
  char text[16][40];
  char *argv[17];
  int argc;
} argv_buf;

static void arg(argv_buf *b, const char *fmt, ...) {
  assert_true(b->argc < 16);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b->text[b->argc], sizeof(b->text[0]), fmt, ap);
  va_end(ap);
  b->argv[b->argc] = b->text[b->argc];
  b->argv[++b->argc] = NULL;
}

/* A started system running the entry class with b's argv (b must outlive
 * the entry's parsing: the tests keep them static). */
static sh_system *boot(const sh_actor_class *entry, argv_buf *b) {
  sh_system *sys = th_system(2);
  const sh_addr *a;
  assert_int_equal(sh_spawn(sys, entry, NULL, 1, &a), 0);
  sh_args *m = sh_msg_new(sh_args, .argc = b->argc, .argv = b->argv);
  assert_non_null(m);
  assert_int_equal(sh_notice(a, &m->hdr), 0);
  assert_int_equal(sh_system_start(sys), 0);
  return sys;
}

/* Free loopback ports, from the kernel (they stay free in practice: the
 * kernel hands ephemeral ports out in turn). */
static void free_ports(uint16_t *ports, int n) {
  int fds[NODES];
  assert_true(n <= NODES);
  for (int i = 0; i < n; i++) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    fds[i] = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fds[i] >= 0);
    assert_int_equal(bind(fds[i], (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fds[i], (struct sockaddr *)&a, &len), 0);
    ports[i] = ntohs(a.sin_port);
  }
  for (int i = 0; i < n; i++) close(fds[i]);
}

static argv_buf node_args[NODES], client_args[2];

static void node_argv(argv_buf *b, int id, const uint16_t *ports) {
  *b = (argv_buf){.argc = 0};
  arg(b, "node");
  arg(b, "--id=%d", id);
  arg(b, "--listen=127.0.0.1:%u", ports[id - 1]);
  for (int p = 1; p <= NODES; p++)
    if (p != id) arg(b, "--peer=%d=127.0.0.1:%u", p, ports[p - 1]);
  arg(b, "--lease-ms=" LEASE);
  arg(b, "--heartbeat-ms=" HEARTBEAT);
  if (getenv("FO_VERBOSE") != NULL) arg(b, "--verbose");
}

static void client_argv(argv_buf *b, const uint16_t *ports, int n) {
  *b = (argv_buf){.argc = 0};
  arg(b, "client");
  for (int p = 0; p < n; p++) arg(b, "--server=127.0.0.1:%u", ports[p]);
  arg(b, "--requests=20");
  arg(b, "--interval-ms=5");
  arg(b, "--timeout-ms=300");
  arg(b, "--max-ms=20000");
}

static int run_client(argv_buf *b) {
  sh_system *c = boot(&failover_client_class, b);
  int rc = sh_system_wait_ms(c, WAIT_MS);
  th_end(c);
  return rc;
}

/* ---- the cases ------------------------------------------------------------------- */

/* Three nodes, a client served; the primary goes, a second client is
 * served by another node in a higher epoch. Catches a backup that never
 * takes over, two primaries at once, a leak or a hang at shutdown. */
static void test_failover(void **state) {
  (void)state;
  th_reset(0);
  memset(obs.spans, 0, sizeof(obs.spans));
  obs.nspans = obs.bad = 0;
  memset(obs.served, 0, sizeof(obs.served));
  failover_set_observer(observe, NULL);
  uint16_t ports[NODES];
  free_ports(ports, NODES);
  sh_system *nodes[NODES + 1] = {NULL};
  for (int id = 1; id <= NODES; id++) {
    node_argv(&node_args[id - 1], id, ports);
    nodes[id] = boot(&failover_node_class, &node_args[id - 1]);
  }
  client_argv(&client_args[0], ports, NODES);
  assert_int_equal(run_client(&client_args[0]), 0);
  uint64_t old_epoch = 0, new_epoch = 0;
  int primary = serving_node(&old_epoch);
  assert_true(primary >= 1 && primary <= NODES);
  /* The primary's system goes down: its stop ends its serving. */
  sh_system_exit(nodes[primary], 0);
  th_end(nodes[primary]);
  nodes[primary] = NULL;
  client_argv(&client_args[1], ports, NODES);
  assert_int_equal(run_client(&client_args[1]), 0);
  int next = serving_node(&new_epoch);
  assert_true(next >= 1 && next <= NODES && next != primary);
  assert_true(new_epoch > old_epoch);
  for (int id = 1; id <= NODES; id++) {
    if (nodes[id] == NULL) continue;
    sh_system_exit(nodes[id], 0);
    th_end(nodes[id]);
  }
  failover_set_observer(NULL, NULL);
  assert_spans();
  assert_true(obs.served[primary] >= 20 && obs.served[next] >= 20);
}

/* A fake node on a raw socket answers requests in epochs 9, 9, 7: the
 * client must take the third answer for the fencing violation (exit 1). */
static void *fake_node(void *arg) {
  int lfd = *(int *)arg, fd = accept(lfd, NULL, NULL);
  static const uint64_t epochs[] = {9, 9, 7};
  /* Bounded: three answers, then the client has its verdict. */
  for (int i = 0; fd >= 0 && i < 3; i++) {
    uint8_t f[40];
    size_t got = 0;
    while (got < sizeof(f)) {
      ssize_t r = read(fd, f + got, sizeof(f) - got);
      if (r <= 0) break;
      got += (size_t)r;
    }
    if (got < sizeof(f) || f[0] != 'F' || f[1] != 3) break;
    f[1] = 4; /* FO_CLIENT_RESP, status 0: served; seq (16..23) stays */
    f[2] = 1;
    for (int b = 0; b < 8; b++) f[8 + b] = (uint8_t)(epochs[i] >> (8 * b));
    if (write(fd, f, sizeof(f)) != (ssize_t)sizeof(f)) break;
  }
  if (fd >= 0) close(fd);
  return NULL;
}

static void test_fencing_violation(void **state) {
  (void)state;
  th_reset(0);
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
  assert_int_equal(listen(lfd, 4), 0);
  assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &len), 0);
  uint16_t port = ntohs(a.sin_port);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, fake_node, &lfd), 0);
  client_argv(&client_args[0], &port, 1);
  assert_int_equal(run_client(&client_args[0]), 1);
  pthread_join(t, NULL);
  close(lfd);
}

/* A bad argv: the usage, and exit 2, for a node and for a client. */
static void test_bad_argv(void **state) {
  (void)state;
  th_reset(0);
  static argv_buf b[4];
  const char *bad[4][4] = {{"node", "--id=9", "--listen=127.0.0.1:1", NULL},
                           {"node", "--id=1", "--listen=127.0.0.1:1", "--peer=1=127.0.0.1:2"},
                           {"client", "--requests=0", NULL, NULL},
                           {"client", "--bogus", NULL, NULL}};
  for (int i = 0; i < 4; i++) {
    b[i] = (argv_buf){.argc = 0};
    for (int j = 0; j < 4 && bad[i][j] != NULL; j++) arg(&b[i], "%s", bad[i][j]);
    const sh_actor_class *c = i < 2 ? &failover_node_class : &failover_client_class;
    sh_system *sys = boot(c, &b[i]);
    assert_int_equal(sh_system_wait_ms(sys, WAIT_MS), 2);
    th_end(sys);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_failover),
      cmocka_unit_test(test_fencing_violation),
      cmocka_unit_test(test_bad_argv),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
