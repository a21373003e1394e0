/*
 * Socket options and argument errors of the channel calls (net.h, "Socket
 * options"; docs/net.md). A prober actor opens a UDP channel and connects
 * to a TCP server, each with drawn options; the server's connection actor
 * checks the channel it accepts; on each of the three channels, every
 * option net.h lists is read, refused a bad value, set to a drawn value
 * and read back.
 *
 * What is checked:
 *   - a channel starts with the options it was given, over the runtime's
 *     defaults (TCP_NODELAY 1 on connections; an accepted connection takes
 *     every given option but SO_REUSEADDR and SO_REUSEPORT), and otherwise,
 *     in the simulator, its own (flags 0, buffers 64 KiB);
 *   - sh_channel_getopt reads what sh_channel_setopt set: in the simulator
 *     the value itself, on Linux a flag itself and a buffer's size as the
 *     kernel keeps it (doubled, within its limits: positive); every value
 *     read at the end is the one last set for that very option;
 *   - -EINVAL for a bad value (a flag not 0 or 1, a size below 1, which
 *     leaves the option as it was), an unknown option, a NULL channel or
 *     value; -ENOPROTOOPT for a TCP option on a UDP channel; -EPIPE once
 *     the channel is closed (in its CLOSED hook);
 *   - options at opening: a bad one fails sh_tcp_serve, sh_udp_open and
 *     a connect's future with the same error, and leaves no socket open;
 *     so does a bind to a port in use (-EADDRINUSE: a UDP socket that
 *     sets no binding option, a second listener);
 *   - sh_udp_open from an actor that is not an IO actor is -EINVAL;
 *     sh_channel_ask and sh_channel_send without a channel or a message
 *     are NULL (the message freed);
 *   - sh_tcp_server_workers is the address of the server's connection
 *     actor (the start notice reaches it there), and the server counts the
 *     one connection accepted, none refused.
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/net.h>
#include <stackhouse/scenario.h>

#define NOPTS 6
#define SIM_BUF (64 * 1024) /* the simulator's buffers (docs/net.md) */
#define MAX_SIZE (1 << 18)

enum { ON_UDP, ON_CONNECT, ON_ACCEPTED };

typedef struct world {
  sh_channel_opts given[3]; /* per channel kind: the options it opened with */
  /* The openings that must fail: the options given and one bad one. */
  sh_channel_opts bad;   /* for TCP: -EINVAL */
  sh_sockopt_value bad_udp;
  int bad_err_udp;
  sh_tcp_server *server;
  sh_netaddr at;
  const sh_addr *probe, *plain;
  bool heard_workers;
  uint32_t checked; /* channels checked in full */
  atomic_uint left;
} world;

static bool is_flag(sh_sockopt o) { return o != SH_SO_SNDBUF && o != SH_SO_RCVBUF; }

/* The value opt was given at k's opening; an accepted connection's own
 * setting skips the binding options (`binding`: whether to skip them). */
static bool given_value(const world *wd, int k, sh_sockopt opt, bool skip_binding, int *v) {
  bool binding = opt == SH_SO_REUSEADDR || opt == SH_SO_REUSEPORT;
  for (int i = 0; i < SH_SOCKOPTS_MAX; i++)
    if (wd->given[k].sockopts[i].opt == opt && !(binding && skip_binding)) {
      *v = wd->given[k].sockopts[i].value;
      return true;
    }
  return false;
}

/* Whether v is what a channel reads after `want` was set (or given). */
static bool reads_as(const sh_scn *s, sh_sockopt opt, int v, int want) {
  if (sh_scn_simulated(s) || is_flag(opt)) return v == want;
  return v > 0; /* Linux: doubled, within net.core.[rw]mem_max */
}

/* Whether opt reads right on a new channel of kind k: the value given,
 * else the runtime's default (TCP_NODELAY on connections), else in the
 * simulator its own (flags 0, buffers 64 KiB). An accepted connection
 * starts with its listener's options, as on Linux (backend-sim/nettcp.c),
 * which took every option given and SO_REUSEADDR by default; then its own,
 * all given but the binding ones. Linux has defaults of its own: there a
 * flag left alone is 0 or 1, a buffer positive. */
static bool starts_right(const sh_scn *s, const world *wd, int k, sh_sockopt opt, int v,
                         int *want) {
  if (given_value(wd, k, opt, k == ON_ACCEPTED, want)) return reads_as(s, opt, v, *want);
  if (opt == SH_TCP_NODELAY && k != ON_UDP) return v == (*want = 1);
  if (k == ON_ACCEPTED && given_value(wd, k, opt, false, want)) return reads_as(s, opt, v, *want);
  *want = k == ON_ACCEPTED && opt == SH_SO_REUSEADDR ? 1 : is_flag(opt) ? 0 : SIM_BUF;
  if (sh_scn_simulated(s)) return v == *want;
  return is_flag(opt) ? v == 0 || v == 1 : v > 0;
}

static int draw_value(sh_scn *s, sh_sockopt opt) {
  return is_flag(opt) ? (int)sh_scn_below(s, 2) : 1 + (int)sh_scn_below(s, MAX_SIZE);
}

/* One option of a live channel: as it started, a bad value refused, a
 * drawn one set and read back. The value set goes to *set. */
static void check_opt(sh_scn *s, sh_channel *ch, int k, sh_sockopt opt, int *set) {
  world *wd = sh_scn_state(s);
  int v = -1, bad = is_flag(opt) ? 2 - 3 * (int)sh_scn_below(s, 2) : -(int)sh_scn_below(s, 2);
  if (k == ON_UDP && (opt == SH_SO_KEEPALIVE || opt == SH_TCP_NODELAY)) {
    SH_SCN_CHECK(s, sh_channel_setopt(ch, opt, 1) == -ENOPROTOOPT &&
                        sh_channel_getopt(ch, opt, &v) == -ENOPROTOOPT && v == -1,
                 "udp: option %d, a TCP one, was not refused", opt);
    return;
  }
  int start = 0, rc = sh_channel_getopt(ch, opt, &v);
  bool right = rc == 0 && starts_right(s, wd, k, opt, v, &start); /* before start is printed */
  SH_SCN_CHECK(s, right,
               "channel %d: option %d reads %d (%d) at the start, "
               "want %d", k, opt, v, rc, start);
  int before = v;
  rc = sh_channel_setopt(ch, opt, bad);
  SH_SCN_CHECK(s, rc == -EINVAL, "channel %d: option %d set to %d: %d", k, opt, bad, rc);
  rc = sh_channel_getopt(ch, opt, &v);
  SH_SCN_CHECK(s, rc == 0 && v == before, "channel %d: option %d reads %d after a bad value, "
               "want %d", k, opt, v, before);
  *set = draw_value(s, opt);
  rc = sh_channel_setopt(ch, opt, *set);
  SH_SCN_CHECK(s, rc == 0, "channel %d: option %d set to %d: %d", k, opt, *set, rc);
  rc = sh_channel_getopt(ch, opt, &v);
  SH_SCN_CHECK(s, rc == 0 && reads_as(s, opt, v, *set), "channel %d: option %d reads %d (%d) "
               "after it was set to %d", k, opt, v, rc, *set);
}

/* Every option of ch, then each read again: the last value set for that
 * very option (an option read for another shows here); the errors. */
static void check_channel(sh_scn *s, sh_channel *ch, int k) {
  world *wd = sh_scn_state(s);
  int set[NOPTS + 1] = {0}, v = -1;
  for (int o = 1; o <= NOPTS; o++) check_opt(s, ch, k, (sh_sockopt)o, &set[o]);
  for (int o = 1; o <= NOPTS; o++) {
    if (k == ON_UDP && (o == SH_SO_KEEPALIVE || o == SH_TCP_NODELAY)) continue;
    int rc = sh_channel_getopt(ch, (sh_sockopt)o, &v);
    SH_SCN_CHECK(s, rc == 0 && reads_as(s, (sh_sockopt)o, v, set[o]),
                 "channel %d: option %d reads %d (%d) at the end, was set to %d", k, o, v, rc,
                 set[o]);
  }
  const int unknown[] = {0, NOPTS + 1, -1, 1000};
  for (int i = 0; i < 4; i++) {
    sh_sockopt o = (sh_sockopt)unknown[i];
    SH_SCN_CHECK(s, sh_channel_setopt(ch, o, 1) == -EINVAL && sh_channel_getopt(ch, o, &v) == -EINVAL,
                 "channel %d: unknown option %d not refused", k, unknown[i]);
  }
  SH_SCN_CHECK(s, sh_channel_getopt(ch, SH_SO_SNDBUF, NULL) == -EINVAL,
               "channel %d: getopt into NULL not refused", k);
  wd->checked++;
}

/* In the CLOSED hook, the channel is still there and its calls say -EPIPE. */
static void check_closed(sh_scn *s, sh_channel *ch, int k) {
  int v = -1;
  int rs = sh_channel_setopt(ch, SH_SO_RCVBUF, 4096), rg = sh_channel_getopt(ch, SH_SO_RCVBUF, &v);
  SH_SCN_CHECK(s, rs == -EPIPE && rg == -EPIPE && v == -1,
               "channel %d closed: setopt %d, getopt %d (%d), want -EPIPE", k, rs, rg, v);
}

/* ---- the server's connection actor ----------------------------------------------------- */

/* The start notice, sent to sh_tcp_server_workers: it came here. */
static sh_yield conn_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  wd->heard_workers = true;
  int rc = sh_scn_kick(wd->probe);
  SH_SCN_CHECK(s, rc == 0 || sh_scn_fault_error(s, rc), "kick: %d", rc);
  return sh_return(st, NULL);
}

static sh_yield idle_channel(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, NULL);
}

static void conn_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)error;
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  if (ev == SH_CHANNEL_OPEN) check_channel(s, ch, ON_ACCEPTED);
  if (ev != SH_CHANNEL_CLOSED) return;
  check_closed(s, ch, ON_ACCEPTED);
  sh_scn_count_down(s, sh_actor_system(self), &wd->left);
}

static const sh_actor_class conn_class = {
    .name = "opts_conn",
    .size = sizeof(sh_scn_actor),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .notice = conn_notice,
    .channel = idle_channel,
    .channel_event = conn_event,
};

/* ---- an actor that is not an IO actor ----------------------------------------------------- */

static sh_yield plain_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  sh_channel *ch = NULL;
  int rc = sh_udp_open(self, &any, NULL, &ch);
  SH_SCN_CHECK(s, rc == -EINVAL && ch == NULL, "udp open from a plain actor: %d", rc);
  sh_scn_count_down(s, sh_actor_system(self), &wd->left);
  return sh_return(st, NULL);
}

static const sh_actor_class plain_class = {
    .name = "opts_plain",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = plain_notice,
};

/* ---- the prober ------------------------------------------------------------------------------ */

typedef struct plocals {
  sh_future *bad, *good;
} plocals;

/* The calls' argument errors: NULL in, -EINVAL or NULL out. */
static void check_args(sh_scn *s, sh_stack *st, sh_channel *live) {
  int v = -1;
  SH_SCN_CHECK(s, sh_channel_setopt(NULL, SH_SO_SNDBUF, 1) == -EINVAL &&
                      sh_channel_getopt(NULL, SH_SO_SNDBUF, &v) == -EINVAL && v == -1,
               "option calls on no channel not refused");
  sh_bytes *b = sh_bytes_new("?", 1);
  SH_SCN_CHECK(s, sh_channel_ask(st, NULL, b != NULL ? &b->hdr : NULL) == NULL,
               "an ask on no channel");
  b = sh_bytes_new("?", 1);
  SH_SCN_CHECK(s, sh_channel_send(st, NULL, b != NULL ? &b->hdr : NULL) == NULL,
               "a send on no channel");
  if (live == NULL) return;
  SH_SCN_CHECK(s, sh_channel_ask(st, live, NULL) == NULL, "an ask of no message");
  SH_SCN_CHECK(s, sh_channel_send(st, live, NULL) == NULL, "a send of no message");
}

/* The UDP channel: a bad option fails the opening, the drawn ones hold. */
static void probe_udp(sh_actor *self, sh_scn *s, sh_stack *st) {
  world *wd = sh_scn_state(s);
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  sh_channel *ch = NULL;
  sh_channel_opts bad = wd->given[ON_UDP];
  bad.sockopts[SH_SOCKOPTS_MAX - 1] = wd->bad_udp;
  int rc = sh_udp_open(self, &any, &bad, &ch);
  SH_SCN_CHECK(s, rc == wd->bad_err_udp || sh_scn_fault_error(s, rc),
               "udp open with a bad option: %d, want %d", rc, wd->bad_err_udp);
  rc = sh_udp_open(self, &any, &wd->given[ON_UDP], &ch);
  check_args(s, st, rc == 0 ? ch : NULL);
  if (!SH_SCN_CHECK(s, rc == 0 || sh_scn_fault_error(s, rc), "udp open: %d", rc)) return;
  if (rc != 0) {
    sh_scn_count_down(s, sh_actor_system(self), &wd->left);
    return;
  }
  sh_channel_set_data(ch, &wd->given[ON_UDP]);
  /* Its port, bound by a socket that sets no binding option: taken. */
  sh_netaddr mine;
  sh_channel *again = NULL;
  sh_channel_local(ch, &mine);
  rc = sh_udp_open(self, &mine, NULL, &again);
  SH_SCN_CHECK(s, rc == -EADDRINUSE || sh_scn_fault_error(s, rc), "udp open on a bound port: %d",
               rc);
  check_channel(s, ch, ON_UDP);
  sh_channel_close(ch); /* its CLOSED hook counts down */
}

static sh_yield probe_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  plocals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    probe_udp(self, s, st);
    int rc = sh_scn_kick(wd->plain);
    SH_SCN_CHECK(s, rc == 0 || sh_scn_fault_error(s, rc), "kick: %d", rc);
    l->bad = sh_tcp_connect(st, &wd->at, &wd->bad);
    l->good = sh_tcp_connect(st, &wd->at, &wd->given[ON_CONNECT]);
    if (l->bad == NULL || l->good == NULL) return sh_throw(st, -ENOMEM);
    return sh_suspend(st, 1);
  }
  int rc = sh_future_failed(l->bad) ? sh_future_error(l->bad) : 0;
  SH_SCN_CHECK(s, rc == -EINVAL || sh_scn_fault_error(s, rc),
               "a connect with a bad option: %d, want %d", rc, -EINVAL);
  if (sh_future_failed(l->good)) {
    rc = sh_future_error(l->good);
    SH_SCN_CHECK(s, sh_scn_fault_error(s, rc), "connect: %d", rc);
    sh_scn_count_down(s, sh_actor_system(self), &wd->left); /* ours */
    sh_scn_count_down(s, sh_actor_system(self), &wd->left); /* the server's */
    return sh_return(st, NULL);
  }
  sh_channel *ch = sh_future_reply(l->good, sh_channel_msg)->ch;
  sh_channel_set_data(ch, &wd->given[ON_CONNECT]);
  check_channel(s, ch, ON_CONNECT);
  sh_channel_close(ch);
  return sh_return(st, NULL);
}

static void probe_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)error;
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  const sh_channel_opts *o = sh_channel_data(ch);
  if (ev != SH_CHANNEL_CLOSED || o == NULL) return;
  check_closed(s, ch, o == &wd->given[ON_UDP] ? ON_UDP : ON_CONNECT);
  sh_scn_count_down(s, sh_actor_system(self), &wd->left);
}

static const sh_actor_class probe_class = {
    .name = "opts_probe",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(plocals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .notice = probe_notice,
    .channel = idle_channel,
    .channel_event = probe_event,
};

/* ---- the run ------------------------------------------------------------------------------- */

/* Drawn valid options of kind k, in drawn slots (the others unused, 0),
 * the last slot kept free for a bad one. */
static void draw_given(sh_scn *s, sh_channel_opts *o, int k) {
  for (int opt = 1; opt <= NOPTS; opt++) {
    if (k == ON_UDP && (opt == SH_SO_KEEPALIVE || opt == SH_TCP_NODELAY)) continue;
    if (sh_scn_below(s, 2) == 0) continue;
    uint32_t slot = (uint32_t)sh_scn_below(s, SH_SOCKOPTS_MAX - 1);
    /* Bounded by the slots: one is free, fewer than SH_SOCKOPTS_MAX - 1 options. */
    while (o->sockopts[slot].opt != 0) slot = (slot + 1) % (SH_SOCKOPTS_MAX - 1);
    o->sockopts[slot] = (sh_sockopt_value){(sh_sockopt)opt, draw_value(s, (sh_sockopt)opt)};
  }
}

/* One bad option, and the error it must give (on UDP, and elsewhere). */
static void draw_bad(sh_scn *s, world *wd) {
  static const struct {
    sh_sockopt_value v;
    int err_udp;
  } bad[] = {
      {{SH_SO_RCVBUF, 0}, -EINVAL},         {{SH_SO_SNDBUF, -4}, -EINVAL},
      {{SH_SO_REUSEADDR, 2}, -EINVAL},      {{(sh_sockopt)(NOPTS + 3), 1}, -EINVAL},
      {{SH_TCP_NODELAY, 1}, -ENOPROTOOPT},  {{SH_SO_KEEPALIVE, 1}, -ENOPROTOOPT},
  };
  uint32_t i = (uint32_t)sh_scn_below(s, sizeof bad / sizeof bad[0]);
  wd->bad_udp = bad[i].v;
  wd->bad_err_udp = bad[i].err_udp;
  wd->bad = wd->given[ON_CONNECT];
  wd->bad.sockopts[SH_SOCKOPTS_MAX - 1] = bad[i % 4].v; /* the first four: bad on TCP too */
}

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  for (int k = 0; k < 3; k++) draw_given(s, &wd->given[k], k);
  draw_bad(s, wd);
  atomic_store(&wd->left, 4); /* the UDP and TCP probes, the plain actor, the server's side */
  const sh_scn_arg arg = {s, 0};
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  sh_channel_opts bad = wd->given[ON_ACCEPTED];
  bad.sockopts[SH_SOCKOPTS_MAX - 1] = wd->bad.sockopts[SH_SOCKOPTS_MAX - 1];
  int rc = sh_tcp_serve(sys, &any, &conn_class, (void *)&arg, 1, &bad, NULL);
  SH_SCN_CHECK(s, rc == -EINVAL || sh_scn_fault_error(s, rc), "serve with a bad option: %d", rc);
  rc = sh_tcp_serve(sys, &any, &conn_class, (void *)&arg, 1, &wd->given[ON_ACCEPTED],
                    &wd->server);
  if (rc == 0) rc = sh_tcp_server_addr(wd->server, &wd->at);
  if (rc == 0) {
    /* Where a server listens, no other may, SO_REUSEADDR or not. */
    int again = sh_tcp_serve(sys, &wd->at, &conn_class, (void *)&arg, 1, NULL, NULL);
    SH_SCN_CHECK(s, again == -EADDRINUSE || sh_scn_fault_error(s, again),
                 "serve on a port in use: %d", again);
  }
  if (rc == 0) rc = sh_scn_spawn(s, sys, &probe_class, 0, 1, &wd->probe);
  if (rc == 0) rc = sh_scn_spawn(s, sys, &plain_class, 0, 1, &wd->plain);
  if (rc != 0) return rc;
  SH_SCN_CHECK(s, sh_tcp_server_workers(NULL) == NULL, "the workers of no server");
  const sh_addr *workers = sh_tcp_server_workers(wd->server);
  if (!SH_SCN_CHECK(s, workers != NULL, "the server's workers: NULL")) return -EINVAL;
  return sh_scn_kick(workers); /* its actor kicks the probe */
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *wd = sh_scn_state(s);
  if (wd->server == NULL || sh_scn_faulty(s)) return;
  SH_SCN_CHECK(s, wd->heard_workers, "the notice to the server's workers went nowhere");
  SH_SCN_CHECK_EQ(s, wd->checked, 3, "channels checked");
  sh_tcp_stats ts;
  sh_tcp_server_stats(wd->server, &ts);
  SH_SCN_CHECK(s, ts.accepted == 1 && ts.refused == 0 && ts.open == 0,
               "server: %llu accepted, %llu refused, %llu open; want 1, 0, 0",
               (unsigned long long)ts.accepted, (unsigned long long)ts.refused,
               (unsigned long long)ts.open);
}

static const sh_scenario net_opts = {
    .name = "net_opts",
    .summary = "socket options set, read back and refused on UDP, connected and accepted channels",
    .flags = SH_SCN_NET,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(net_opts);
