/*
 * cluster_cuts: the network between nodes under cuts drawn from the seed,
 * one way and both ways. Three nodes send a UDP datagram to each other
 * every 5 ms of their clocks, and the checker looks at what a cut allows:
 * while only a -> b is cut, what b sends to a still arrives (a one-way cut
 * holds one direction, not both). After the heal at 2 s every node hears
 * from every other within 1 s (liveness).
 *
 * The nodes ask the simulator whether a pair is cut (sh_node_is_cut) when
 * they send and when they read: a checker's view of the network, not
 * something the nodes act on.
 */
#include <stdlib.h>
#include <string.h>

#include <stackhouse/cluster.h>
#include <stackhouse/net.h>
#include <stackhouse/scenario.h>

#define NODES 3
#define PORT 7100
#define HEAL_MS 2000
#define REVERSE_MIN 20 /* datagrams sent against a one-way cut before one must arrive */

typedef struct world {
  sh_scn *s;
  sh_system *sys;
  uint64_t heard[NODES + 1][NODES + 1]; /* [from][to] */
  uint64_t at_heal[NODES + 1][NODES + 1];
  bool healed;
  /* [from][to]: sent, and arrived, while only to -> from was cut. */
  uint64_t reverse_sent[NODES + 1][NODES + 1], reverse_ok[NODES + 1][NODES + 1];
} world;

static world *the_world; /* the run under way (a checker's, as a history) */
static const char *const names[NODES] = {"k1", "k2", "k3"};

typedef struct beacon {
  sh_actor base;
  int id;
  sh_channel *ch;
} beacon;

/* Only `back` -> `fwd`'s other way is cut: from -> to flows, to -> from not. */
static bool reverse_only(int from, int to) {
  return sh_node_is_cut(names[to - 1], names[from - 1]) == 1 &&
         sh_node_is_cut(names[from - 1], names[to - 1]) == 0;
}

static sh_yield beacon_notice(sh_actor *self, sh_stack *st) {
  beacon *b = (beacon *)self;
  const sh_msg *m = sh_stack_msg(st);
  if (!sh_msg_is(m, &sh_args_type)) return sh_return(st, NULL);
  const sh_args *a = (const sh_args *)m;
  b->id = a->argc > 1 ? atoi(a->argv[1]) : 0;
  if (b->id < 1 || b->id > NODES) return sh_throw(st, -EINVAL);
  sh_netaddr at = {0, PORT};
  int rc = sh_udp_open(self, &at, NULL, &b->ch);
  if (rc == 0) rc = sh_timer_start(self, 5, 5, NULL, NULL);
  return rc == 0 ? sh_return(st, NULL) : sh_throw(st, rc);
}

static void beacon_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)id;
  (void)arg;
  beacon *b = (beacon *)self;
  if (b->ch == NULL) return;
  for (int to = 1; to <= NODES; to++) {
    if (to == b->id) continue;
    sh_netaddr dst = {SH_IPV4(10, 0, 3, to), PORT};
    uint8_t from = (uint8_t)b->id;
    sh_datagram *d = sh_datagram_new(&dst, &from, 1);
    if (d == NULL) continue;
    if (sh_channel_write(b->ch, &d->hdr) == 0 && reverse_only(b->id, to))
      the_world->reverse_sent[b->id][to]++;
  }
}

static sh_yield beacon_channel(sh_actor *self, sh_stack *st) {
  beacon *b = (beacon *)self;
  sh_datagram *d = sh_stack_msg_as(st, sh_datagram);
  uint8_t from = 0;
  if (sh_buf_len(&d->buf) == 1) sh_buf_peek(&d->buf, 0, &from, 1);
  world *w = the_world;
  if (from >= 1 && from <= NODES && from != b->id) {
    w->heard[from][b->id]++;
    if (reverse_only(from, b->id)) w->reverse_ok[from][b->id]++;
  }
  return sh_return(st, NULL);
}

static void beacon_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)error;
  beacon *b = (beacon *)self;
  if (ev == SH_CHANNEL_CLOSED && ch == b->ch) b->ch = NULL;
}

static const sh_actor_class beacon_class = {.name = "beacon",
                                            .size = sizeof(beacon),
                                            .kind = SH_IO_ACTOR,
                                            .notice = beacon_notice,
                                            .timeout = beacon_timeout,
                                            .channel = beacon_channel,
                                            .channel_event = beacon_event};

static char *const argv_of[NODES][2] = {{"beacon", "1"}, {"beacon", "2"}, {"beacon", "3"}};

static int cuts_setup(sh_scn *s, sh_system *sys) {
  world *w = sh_scn_state(s);
  w->s = s;
  w->sys = sys;
  the_world = w;
  for (int i = 1; i <= NODES; i++) {
    sh_node_spec sp = {.name = names[i - 1], .ip = SH_IPV4(10, 0, 3, i), .workers = 1,
                       .entry = &beacon_class, .argc = 2, .argv = argv_of[i - 1]};
    int rc = sh_node_add(&sp);
    if (rc != 0) return rc;
  }
  sh_scn_nemesis nb = {.nodes = names, .n = NODES, .cuts = true, .one_way = true,
                       .start_ms = 50, .end_ms = HEAL_MS - 100, .max_acts = 6,
                       .max_outage_ms = 600};
  int rc = sh_scn_nemesis_draw(s, &nb);
  return rc < 0 ? rc : 0;
}

static bool heard_again(sh_scn *s) {
  world *w = sh_scn_state(s);
  if (!w->healed) {
    w->healed = true;
    memcpy(w->at_heal, w->heard, sizeof(w->heard));
  }
  for (int a = 1; a <= NODES; a++)
    for (int b = 1; b <= NODES; b++)
      if (a != b && w->heard[a][b] == w->at_heal[a][b]) return false;
  sh_scn_done(s, w->sys);
  return true;
}

static void cuts_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  world *w = sh_scn_state(s);
  for (int a = 1; a <= NODES; a++)
    for (int b = 1; b <= NODES; b++)
      SH_SCN_CHECK(s, w->reverse_sent[a][b] < REVERSE_MIN || w->reverse_ok[a][b] > 0,
                   "%s sent %llu datagrams to %s while only %s -> %s was cut, and none arrived",
                   names[a - 1], (unsigned long long)w->reverse_sent[a][b], names[b - 1],
                   names[b - 1], names[a - 1]);
  the_world = NULL;
}

static const sh_scenario cluster_cuts = {
    .name = "cluster_cuts",
    .summary = "three nodes beacon over UDP through one-way and two-way cuts drawn per seed",
    .flags = SH_SCN_SIM_ONLY | SH_SCN_NO_FAULTS | SH_SCN_WEATHER | SH_SCN_NET,
    .state_size = sizeof(world),
    .vtime_limit_ms = 20000,
    .setup = cuts_setup,
    .verify = cuts_verify,
    .heal_ms = HEAL_MS,
    .liveness_ms = 1000,
    .liveness_name = "every node hears from every other after the heal",
    .liveness = heard_again,
};
SH_SCENARIO(cluster_cuts);
