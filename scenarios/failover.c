/*
 * The failover example (examples/failover/) as a cluster under attack:
 * nodes booted from the node program's own entry and argv, clients in the
 * simulation's own system, a nemesis drawn from the seed (crashes with
 * restarts, cuts one way and both, clock drift within the nodes' declared
 * bound), then a heal.
 *
 *   failover       3 nodes of 2 workers, lease 300 ms, heartbeats every
 *                  30 ms, drift bound 2 %; 2 clients, a request every
 *                  50 ms each; the nemesis acts in the first 2.5 s (at
 *                  most one node down at once), the heal comes at 3 s
 *   failover7      the same with 7 nodes (at most three down at once)
 * Hidden, for bench/sim_cluster.c's figures (the example's defaults):
 *   failover_10s   3 nodes, lease 1 s, heartbeats every 50 ms, 3 clients
 *                  every 20 ms, the nemesis in the first 9 s, heal at 10 s
 *   failover7_10s  the same with 7 nodes
 *   failover_idle, failover7_idle   no client and no nemesis: 10 s of
 *                  heartbeats, then a primary must be serving
 *
 * Safety: never two primaries serving at the same true time. A node
 * reports (the example's observer) when it begins serving, each request it
 * serves and when it ends, on its own clock. The checker places each on the
 * true clock (sh_scn_true_of_ns undoes the node's drift): a serving
 * interval runs from its begin to its end, or to the end of that boot of
 * the node (a crash) when no end came; two intervals of different nodes
 * must not overlap. At each request served, sooner: a request node A
 * serves while B, another node, served one since A began is a violation,
 * and so is a request served outside a serving interval.
 * The clients check fencing themselves (an answer of an older epoch than
 * one seen exits their system with 1, which the framework's exit check
 * reports).
 *
 * Liveness: after the heal, 10 requests are served within 5 s.
 *
 * The same description runs on both backends. The nodes report through
 * the example's observer, which node_init (the specs' init, run in each
 * node before it boots) points at sh_node_tell; the checker hears them in
 * on_heard, with the teller's boot and the true time it told at: at once
 * in the simulator, at sh_node_hear (in the liveness condition and in
 * verify) on processes, where the nemesis only crashes and restarts.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>
#include <string.h>

#include <failover/failover.h>
#include <stackhouse/cluster.h>
#include <stackhouse/scenario.h>

#define MAX_NODES 7
#define CLIENTS 3
#define SERVED_AFTER_HEAL 10
#define DRIFT_PPM 20000
#define MAX_ARGS (12 + 2 * MAX_NODES) /* a node's: 9 and 2 a peer; a client's: 7 and 2 a node */
#define MAX_INTERVALS 4096

typedef struct interval {
  int node;
  uint32_t boot;
  uint64_t from, to; /* true times; to 0 until its end is known */
} interval;

/* A variant's shape. */
typedef struct fo_shape {
  int nodes;
  uint32_t max_down;
  int lease_ms, heartbeat_ms;
  uint64_t heal_ms;
  int clients, interval_ms;
  bool nemesis;
} fo_shape;

typedef struct fo_world {
  sh_scn *s;
  const fo_shape *shape;
  sh_system *sys;
  int nodes;
  bool open[MAX_NODES + 1];       /* a serving interval begun, not ended */
  uint64_t began[MAX_NODES + 1];  /* its true start */
  uint64_t last_served[MAX_NODES + 1]; /* true time of its last request served (0: none) */
  uint64_t served, served_at_heal;
  interval iv[MAX_INTERVALS];
  uint32_t niv, cur[MAX_NODES + 1]; /* cur: 1 + the node's open interval, or 0 */
  bool healed;
  unsigned port; /* the nodes': 7000, or on processes one no listener holds */
  /* argv storage: nodes' and clients' */
  char text[MAX_NODES + CLIENTS][MAX_ARGS][32];
  char *argv[MAX_NODES + CLIENTS][MAX_ARGS + 1];
} fo_world;

static void on_served(fo_world *w, int a, uint64_t t) {
  SH_SCN_CHECK(w->s, w->open[a], "node %d served a request while not serving", a);
  for (int b = 1; b <= w->nodes; b++)
    SH_SCN_CHECK(w->s, b == a || !w->open[a] || w->last_served[b] < w->began[a],
                 "two primaries: node %d serves at %llu ns, node %d served at %llu ns since "
                 "node %d began at %llu ns",
                 a, (unsigned long long)t, b, (unsigned long long)w->last_served[b], a,
                 (unsigned long long)w->began[a]);
  w->last_served[a] = t;
  w->served++;
}

static const char *const names[MAX_NODES] = {"f1", "f2", "f3", "f4", "f5", "f6", "f7"};

static void interval_begin(fo_world *w, int a, uint32_t boot, uint64_t t) {
  w->cur[a] = 0;
  if (!SH_SCN_CHECK(w->s, w->niv < MAX_INTERVALS, "more than %u serving intervals", MAX_INTERVALS))
    return;
  w->iv[w->niv++] = (interval){.node = a, .boot = boot, .from = t};
  w->cur[a] = w->niv;
}

/* Every interval's end: its own, or its boot's (a crash), or now. */
static void intervals_check(fo_world *w) {
  uint64_t now = sh_scn_true_ns();
  for (uint32_t i = 0; i < w->niv; i++) {
    interval *v = &w->iv[i];
    uint64_t ended = 0;
    if (v->to == 0 && sh_node_life(names[v->node - 1], v->boot, NULL, &ended) == 0 && ended != 0)
      v->to = ended;
    if (v->to == 0) v->to = now;
  }
  for (uint32_t i = 0; i < w->niv; i++)
    for (uint32_t j = i + 1; j < w->niv; j++) {
      const interval *x = &w->iv[i], *y = &w->iv[j];
      SH_SCN_CHECK(w->s, x->node == y->node || x->to <= y->from || y->to <= x->from,
                   "two primaries: node %d served from %llu to %llu ns, node %d from %llu to "
                   "%llu ns",
                   x->node, (unsigned long long)x->from, (unsigned long long)x->to, y->node,
                   (unsigned long long)y->from, (unsigned long long)y->to);
    }
}

/* What the nodes tell (sh_node_tell from their observer), as the checker
 * hears it: in the simulator at once, on processes at sh_node_hear. */
static void on_heard(const sh_node_heard *h, void *ctx) {
  fo_world *w = ctx;
  failover_event ev;
  if (h->len != sizeof ev) return;
  memcpy(&ev, h->data, sizeof ev);
  int a = ev.node;
  if (a < 1 || a > w->nodes) return;
  uint64_t t = h->true_ns;
  switch (ev.kind) {
  case FO_SERVE_BEGIN:
    w->open[a] = true;
    w->began[a] = t;
    interval_begin(w, a, h->boot, t);
    break;
  case FO_SERVE_END:
    w->open[a] = false;
    if (w->cur[a] != 0) w->iv[w->cur[a] - 1].to = sh_scn_true_of_ns((uint64_t)ev.local_ms * 1000000u);
    w->cur[a] = 0;
    break;
  case FO_SERVED: on_served(w, a, t); break;
  }
}

/* The nodes' observer, in each node's process (a node process starts
 * afresh: sh_node_spec.init installs it there). */
static void tell(const failover_event *ev, void *ctx) {
  (void)ctx;
  (void)sh_node_tell(ev, sizeof *ev);
}

static void node_init(void) { failover_set_observer(tell, NULL); }

/* What the nodes told and the checker did not hear yet, heard now. */
static void hear(fo_world *w) {
  int rc = sh_node_hear();
  SH_SCN_CHECK(w->s, rc >= 0, "the nodes told more than the checker could keep: %d", rc);
}

/* A port no socket of the machine holds now (7000 if none can be told):
 * on processes the nodes' loopback addresses share the machine's ports, so
 * a listener on 0.0.0.0:7000 elsewhere would refuse their binds. */
static unsigned free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  socklen_t len = sizeof sa;
  unsigned port = 7000;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
      getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
    port = ntohs(sa.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

/* argv i of the world from its words (copied into its storage). */
static char **args(fo_world *w, int i, const char *const *words, int n) {
  SH_SCN_CHECK(w->s, n <= MAX_ARGS, "%d words for %d", n, MAX_ARGS);
  for (int k = 0; k < n && k < MAX_ARGS; k++) {
    snprintf(w->text[i][k], sizeof(w->text[i][k]), "%s", words[k]);
    w->argv[i][k] = w->text[i][k];
  }
  w->argv[i][n] = NULL;
  return w->argv[i];
}

static int node_argv(fo_world *w, int id, char ***out) {
  const char *words[MAX_ARGS];
  char buf[MAX_ARGS][32];
  int n = 0;
  words[n++] = "failover-node";
  words[n++] = "--id";
  snprintf(buf[n], sizeof(buf[n]), "%d", id);
  words[n] = buf[n];
  n++;
  words[n++] = "--listen";
  snprintf(buf[n], sizeof(buf[n]), "10.0.0.%d:%u", id, w->port);
  words[n] = buf[n];
  n++;
  for (int p = 1; p <= w->nodes; p++) {
    if (p == id) continue;
    words[n++] = "--peer";
    snprintf(buf[n], sizeof(buf[n]), "%d=10.0.0.%d:%u", p % 10, p % 10, w->port);
    words[n] = buf[n];
    n++;
  }
  words[n++] = "--lease-ms";
  snprintf(buf[n], sizeof(buf[n]), "%d", w->shape->lease_ms);
  words[n] = buf[n];
  n++;
  words[n++] = "--heartbeat-ms";
  snprintf(buf[n], sizeof(buf[n]), "%d", w->shape->heartbeat_ms);
  words[n] = buf[n];
  n++;
  words[n++] = "--drift-ppm";
  snprintf(buf[n], sizeof(buf[n]), "%d", DRIFT_PPM);
  words[n] = buf[n];
  n++;
  *out = args(w, id - 1, words, n);
  return n;
}

/* Client c tries the nodes in its own order: c+1 first. */
static int client_argv(fo_world *w, int c, char ***out) {
  const char *words[MAX_ARGS];
  char buf[MAX_ARGS][32];
  int n = 0;
  words[n++] = "failover-client";
  for (int k = 0; k < w->nodes; k++) {
    words[n++] = "--server";
    snprintf(buf[n], sizeof(buf[n]), "10.0.0.%d:%u", 1 + (c + k) % w->nodes, w->port);
    words[n] = buf[n];
    n++;
  }
  char every[16], timeout[16];
  snprintf(every, sizeof(every), "%d", w->shape->interval_ms);
  snprintf(timeout, sizeof(timeout), "%d", w->shape->lease_ms * 3 / 10);
  const char *rest[] = {"--requests", "1000000000", "--interval-ms", every, "--timeout-ms", timeout};
  for (size_t k = 0; k < sizeof(rest) / sizeof(rest[0]); k++) words[n++] = rest[k];
  *out = args(w, MAX_NODES + c, words, n);
  return n;
}

static int boot_clients(fo_world *w, sh_system *sys) {
  for (int c = 0; c < w->shape->clients; c++) {
    char **argv;
    int argc = client_argv(w, c, &argv);
    const sh_addr *a;
    int rc = sh_spawn(sys, &failover_client_class, NULL, 1, &a);
    if (rc != 0) return rc;
    sh_args *m = sh_msg_new(sh_args, .argc = argc, .argv = argv);
    rc = m != NULL ? sh_notice(a, &m->hdr) : -ENOMEM;
    if (rc != 0) return rc;
  }
  return 0;
}

static int setup_shape(sh_scn *s, sh_system *sys, const fo_shape *shape) {
  fo_world *w = sh_scn_state(s);
  int nodes = shape->nodes;
  w->s = s;
  w->shape = shape;
  w->sys = sys;
  w->nodes = nodes;
  w->port = sh_scn_simulated(s) ? 7000 : free_port();
  sh_node_listen(on_heard, w);
  for (int id = 1; id <= nodes; id++) {
    char **argv;
    int argc = node_argv(w, id, &argv);
    sh_node_spec sp = {.name = names[id - 1], .ip = SH_IPV4(10, 0, 0, id), .workers = 2,
                       .entry = &failover_node_class, .argc = argc, .argv = argv,
                       .max_drift_ppm = DRIFT_PPM, .init = node_init};
    int rc = sh_node_add(&sp);
    if (rc != 0) return rc;
  }
  /* Outages up to three leases: long enough for a takeover. */
  sh_scn_nemesis nb = {.nodes = names, .n = (uint32_t)nodes, .max_down = shape->max_down,
                       .cuts = true, .one_way = true, .wiped = true, .max_drift_ppm = DRIFT_PPM,
                       .start_ms = shape->heal_ms / 6, .end_ms = shape->heal_ms * 5 / 6,
                       .max_outage_ms = 3u * (uint64_t)shape->lease_ms};
  int rc = shape->nemesis ? sh_scn_nemesis_draw(s, &nb) : 0;
  if (rc < 0) return rc;
  return boot_clients(w, sys);
}

#define SHAPE_SETUP(fn, ...)                                  \
  static int fn(sh_scn *s, sh_system *sys) {                 \
    static const fo_shape shape = {__VA_ARGS__};             \
    return setup_shape(s, sys, &shape);                      \
  }
SHAPE_SETUP(setup3, .nodes = 3, .max_down = 1, .lease_ms = 300, .heartbeat_ms = 30,
            .heal_ms = 3000, .clients = 2, .interval_ms = 50, .nemesis = true)
SHAPE_SETUP(setup7, .nodes = 7, .max_down = 3, .lease_ms = 300, .heartbeat_ms = 30,
            .heal_ms = 3000, .clients = 2, .interval_ms = 50, .nemesis = true)
SHAPE_SETUP(setup3_10s, .nodes = 3, .max_down = 1, .lease_ms = 1000, .heartbeat_ms = 50,
            .heal_ms = 10000, .clients = 3, .interval_ms = 20, .nemesis = true)
SHAPE_SETUP(setup7_10s, .nodes = 7, .max_down = 3, .lease_ms = 1000, .heartbeat_ms = 50,
            .heal_ms = 10000, .clients = 3, .interval_ms = 20, .nemesis = true)
SHAPE_SETUP(setup3_idle, .nodes = 3, .lease_ms = 1000, .heartbeat_ms = 50, .heal_ms = 10000)
SHAPE_SETUP(setup7_idle, .nodes = 7, .lease_ms = 1000, .heartbeat_ms = 50, .heal_ms = 10000)

static bool live(sh_scn *s) {
  fo_world *w = sh_scn_state(s);
  hear(w);
  if (!w->healed) {
    w->healed = true;
    w->served_at_heal = w->served;
  }
  bool serving = false;
  for (int a = 1; a <= w->nodes; a++) serving = serving || w->open[a];
  if (w->shape->clients == 0 ? !serving : w->served < w->served_at_heal + SERVED_AFTER_HEAL)
    return false;
  sh_scn_done(s, w->sys);
  return true;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  fo_world *w = sh_scn_state(s);
  hear(w);
  SH_SCN_CHECK(s, w->healed, "the heal never came");
  intervals_check(w);
  sh_node_listen(NULL, NULL);
  failover_set_observer(NULL, NULL);
}

static void configure(sh_scn *s, sh_config *cfg) {
  (void)s;
  cfg->workers = 2;
}

#define FAILOVER_SCENARIO(var, name_, summary_, setup_, flags_, heal_)                       \
  static const sh_scenario var = {                                                            \
      .name = name_,                                                                          \
      .summary = summary_,                                                                    \
      .flags = SH_SCN_NO_FAULTS | SH_SCN_WEATHER | SH_SCN_NET | (flags_),   \
      .state_size = sizeof(fo_world),                                                         \
      .vtime_limit_ms = 30000,                                                                \
      .configure = configure,                                                                 \
      .setup = setup_,                                                                        \
      .verify = verify,                                                                       \
      .heal_ms = (heal_),                                                                     \
      .liveness_ms = 5000,                                                                    \
      .liveness_name = "after the heal, requests are served within 5 s (a primary serves)",   \
      .liveness = live,                                                                       \
  };                                                                                          \
  SH_SCENARIO(var)

FAILOVER_SCENARIO(failover, "failover",
                  "the failover example's 3 nodes and 2 clients: crashes, cuts, drift, a heal",
                  setup3, 0, 3000);
FAILOVER_SCENARIO(failover7, "failover7",
                  "the failover example's 7 nodes and 2 clients: crashes, cuts, drift, a heal",
                  setup7, 0, 3000);
FAILOVER_SCENARIO(failover_10s, "failover_10s", "failover, 10 s of the example's defaults",
                  setup3_10s, SH_SCN_HIDDEN | SH_SCN_NO_IDLE, 10000);
FAILOVER_SCENARIO(failover7_10s, "failover7_10s", "failover7, 10 s of the example's defaults",
                  setup7_10s, SH_SCN_HIDDEN | SH_SCN_NO_IDLE, 10000);
FAILOVER_SCENARIO(failover_idle, "failover_idle", "3 failover nodes idle: 10 s of heartbeats",
                  setup3_idle, SH_SCN_HIDDEN | SH_SCN_NO_IDLE, 10000);
FAILOVER_SCENARIO(failover7_idle, "failover7_idle", "7 failover nodes idle: 10 s of heartbeats",
                  setup7_idle, SH_SCN_HIDDEN | SH_SCN_NO_IDLE, 10000);
