/*
 * The test side of test_e2e_cluster_proc.c: what it hears from the nodes
 * (a listener that keeps every report and checks, as it hears each, what
 * must hold of every event: the true clock never goes back across nodes,
 * the boot is one the launcher counted and the event falls inside that
 * boot's life, the teller's own name is the one it is heard under), the
 * bounded waits (sh_node_hear polled with short sleeps, at most WAIT_MS:
 * never a timed assertion), nodes declared from an argv string, and a
 * probe: an IO actor of a system the test makes in its own process that
 * connects to a node's declared address and reads what the node writes.
 */
#ifndef TESTS_CLUSTER_PROC_HEAR_H
#define TESTS_CLUSTER_PROC_HEAR_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <stackhouse/cluster.h>
#include <stackhouse/net.h>
#include <stackhouse/stackhouse.h>

#include "cluster_proc_node.h"
#include "support/harness.h"

/* The bound of every wait: a node process boots in milliseconds, a few
 * hundred under a sanitizer. */
#define WAIT_MS 10000
/* A ring's worth and some: the case that fills the ring hears all of it. */
#define LOG_MAX (8192 + 256)

#define IP_A SH_IPV4(10, 9, 0, 1)
#define IP_B SH_IPV4(10, 9, 0, 2)
#define IP_C SH_IPV4(10, 9, 0, 3)

static inline uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- what the test heard ------------------------------------------------------------- */

typedef struct heard_ev {
  char node[32];
  uint32_t boot;
  uint64_t ns;
  cp_report r;
} heard_ev;

static struct {
  heard_ev ev[LOG_MAX];
  int n, total;     /* kept; heard in all */
  int back_in_time; /* events stamped before the one heard before them */
  int bad_boot;     /* a boot the launcher did not count (yet) */
  int out_of_life;  /* stamped outside its boot's life */
  int bad_self;     /* told by a node other than the one it is heard as */
  int bad_len;
  uint64_t last_ns;
} g;

static void on_heard(const sh_node_heard *h, void *ctx) {
  (void)ctx;
  g.total++;
  if (h->true_ns < g.last_ns) g.back_in_time++;
  g.last_ns = h->true_ns;
  sh_node_stats st = {0};
  if (sh_node_stats_get(h->node, &st) != 0 || h->boot == 0 || h->boot > st.boots) g.bad_boot++;
  uint64_t began = 0, ended = 0;
  if (sh_node_life(h->node, h->boot, &began, &ended) != 0 || h->true_ns < began ||
      (ended != 0 && h->true_ns > ended))
    g.out_of_life++;
  if (h->len != sizeof(cp_report)) {
    g.bad_len++;
    return;
  }
  if (g.n == LOG_MAX) return;
  heard_ev *e = &g.ev[g.n++];
  snprintf(e->node, sizeof e->node, "%s", h->node);
  e->boot = h->boot;
  e->ns = h->true_ns;
  memcpy(&e->r, h->data, sizeof e->r);
  if (strcmp(e->r.self, h->node) != 0) g.bad_self++;
}

/* A case's start: nothing heard yet, the listener set. */
static void log_reset(void) {
  memset(&g, 0, sizeof g);
  assert_int_equal(sh_node_listen(on_heard, NULL), 0);
}

/* What was told and not heard yet, heard now; a loss fails the case. */
static void hear_now(void) { assert_true(sh_node_hear() >= 0); }

/* The first event at or after index from of `node` of that kind: its
 * index, or -1. */
static int find(const char *node, uint32_t kind, int from) {
  for (int i = from; i < g.n; i++)
    if (g.ev[i].r.kind == kind && strcmp(g.ev[i].node, node) == 0) return i;
  return -1;
}

/* find, hearing until it finds or WAIT_MS passed. */
static int await(const char *node, uint32_t kind, int from) {
  for (int waited = 0;; waited += 5) {
    hear_now();
    int i = find(node, kind, from);
    if (i >= 0 || waited >= WAIT_MS) return i;
    th_sleep_ms(5);
  }
}

/* Whether the node is up (want 1) or down (0) within WAIT_MS; hears
 * nothing meanwhile. */
static inline bool wait_up(const char *name, int want) {
  for (int waited = 0; sh_node_up(name) != want; waited += 5) {
    if (waited >= WAIT_MS) return false;
    th_sleep_ms(5);
  }
  return true;
}

static inline sh_node_stats stats(const char *name) {
  sh_node_stats st;
  assert_int_equal(sh_node_stats_get(name, &st), 0);
  return st;
}

/* What must hold of everything heard in a case. */
static void assert_heard_well(void) {
  assert_int_equal(g.back_in_time, 0);
  assert_int_equal(g.bad_boot, 0);
  assert_int_equal(g.out_of_life, 0);
  assert_int_equal(g.bad_self, 0);
  assert_int_equal(g.bad_len, 0);
}

/* A case's end: the cluster ends (rc: what sh_node_stop_all must say),
 * what it told last is heard and checked, the listener unset. */
static void cluster_end(int rc) {
  assert_int_equal(sh_node_stop_all(), rc);
  hear_now();
  assert_heard_well();
  assert_int_equal(sh_node_listen(NULL, NULL), 0);
}

/* After each case, one that failed included: its cluster ends, what it
 * told is dropped, so the next case starts clean. */
static inline int teardown(void **state) {
  (void)state;
  (void)sh_node_stop_all();
  (void)sh_node_listen(NULL, NULL);
  (void)sh_node_hear();
  return 0;
}

/* ---- nodes --------------------------------------------------------------------------- */

/* Declares and boots node `name` at ip, its argv "node" and the words of
 * args (space-separated); what sh_node_add says. */
static int add_node(const char *name, uint32_t ip, const char *args) {
  char text[256], *argv[16] = {"node"}, *save = NULL;
  int argc = 1;
  snprintf(text, sizeof text, "%s", args);
  for (char *w = strtok_r(text, " ", &save); w != NULL && argc < 15;
       w = strtok_r(NULL, " ", &save))
    argv[argc++] = w;
  sh_node_spec sp = {.name = name, .ip = ip, .workers = 1, .entry = &cp_node_class,
                     .argc = argc, .argv = argv, .init = cp_node_init};
  return sh_node_add(&sp);
}

/* A TCP port free on every address now (it stays free in practice: the
 * kernel hands ephemeral ports out in turn). */
static inline uint16_t free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  socklen_t len = sizeof a;
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

/* ---- a probe from the test's own system ---------------------------------------------- */

typedef struct probe_result {
  atomic_int done;
  int error;
  sh_netaddr peer;
  char text[32];
  size_t n;
} probe_result;

typedef struct probe_cfg {
  sh_netaddr to;
  probe_result *res;
} probe_cfg;

typedef struct probe_actor {
  sh_actor base;
  probe_cfg cfg;
} probe_actor;

TH_CFG_INIT(probe_init, probe_actor, probe_cfg);

typedef struct probe_go { sh_msg hdr; } probe_go;
SH_MSG_DEFINE(probe_go, SH_NOTICE, 0);

typedef struct probe_locals { sh_future *f; } probe_locals;

static sh_yield probe_notice(sh_actor *self, sh_stack *st) {
  probe_result *res = ((probe_actor *)self)->cfg.res;
  probe_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_tcp_connect(st, &((probe_actor *)self)->cfg.to, NULL);
    if (l->f == NULL) return sh_throw(st, -ENOMEM);
    return sh_suspend(st, 1);
  }
  res->error = sh_future_error(l->f);
  if (res->error != 0) {
    atomic_store(&res->done, 1); /* no channel: no event will come */
    return sh_return(st, NULL);
  }
  CHECK(sh_channel_peer(sh_future_reply(l->f, sh_channel_msg)->ch, &res->peer) == 0);
  return sh_return(st, NULL);
}

static sh_yield probe_channel(sh_actor *self, sh_stack *st) {
  probe_result *res = ((probe_actor *)self)->cfg.res;
  res->n += sh_buf_peek(&sh_stack_msg_as(st, sh_bytes)->buf, 0, res->text + res->n,
                        sizeof res->text - 1 - res->n);
  return sh_return(st, NULL);
}

static void probe_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  probe_result *res = ((probe_actor *)self)->cfg.res;
  if (ev == SH_CHANNEL_EOF) sh_channel_close(ch);
  if (ev != SH_CHANNEL_CLOSED) return;
  CHECK(error == 0 || error == -ECONNABORTED); /* an orderly end, or our close at it */
  atomic_store(&res->done, 1);
}

static const sh_actor_class probe_class = {
    .name = "probe", .size = sizeof(probe_actor), .locals_size = sizeof(probe_locals),
    .kind = SH_IO_ACTOR, .init = probe_init, .notice = probe_notice, .channel = probe_channel,
    .channel_event = probe_event};

/* Connects from a system of the test's own to `to` and reads until the
 * peer closes; what it got. */
static inline void probe(const sh_netaddr *to, probe_result *res) {
  memset(res, 0, sizeof *res);
  sh_system *sys = th_env(1, 0);
  probe_cfg cfg = {.to = *to, .res = res};
  const sh_addr *a = th_spawn_on(sys, &probe_class, &cfg, 0);
  assert_int_equal(sh_notice(a, sh_msg_alloc(&probe_go_type)), 0);
  assert_int_equal(sh_system_start(sys), 0);
  for (int waited = 0; atomic_load(&res->done) == 0 && waited < WAIT_MS; waited += 5)
    th_sleep_ms(5);
  int done = atomic_load(&res->done);
  sh_system_exit(sys, 0);
  assert_int_equal(sh_system_wait(sys), 0);
  th_end(sys);
  assert_int_equal(done, 1);
}

#endif
