/*
 * Connects that fail: to a port where nothing listens (refused), and to an
 * address that never answers (the connect times out; on a real machine,
 * with no route there or a firewall that answers for it, it may fail at
 * once instead). Each failure reaches the
 * connecting stack as its future's error, once, leaks nothing, and leaves
 * the actor able to connect again: a connect to a live server afterwards
 * succeeds.
 */
#include <stdatomic.h>

#include <stackhouse/net.h>
#include <stackhouse/scenario.h>

#define TIMEOUT_MS 50

typedef struct world {
  sh_tcp_server *server;
  sh_netaddr live;
  int refused, silent, ok;
  bool finished;
} world;

static sh_yield idle_channel(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, NULL);
}

static const sh_actor_class idle_server = {
    .name = "idle_server",
    .size = sizeof(sh_actor),
    .kind = SH_IO_ACTOR,
    .channel = idle_channel,
};

typedef struct locals {
  sh_future *f;
} locals;

enum { REFUSED = 1, SILENT, LIVE };

/* Only the connect to a silent address has a timeout: a partition (the
 * network's weather) may hold the others for a while, and they must still
 * end as they should. */
static sh_future *connect_to(sh_stack *st, uint32_t ip, uint16_t port, int64_t timeout_ms) {
  sh_netaddr to = {.ip = ip, .port = port};
  sh_channel_opts o = {.connect_timeout_ms = timeout_ms};
  return sh_tcp_connect(st, &to, &o);
}

static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case SH_START:
    /* Port 1 of loopback: nothing listens there. */
    l->f = connect_to(st, 0x7f000001, 1, SH_FOREVER);
    break;
  case REFUSED:
    wd->refused = sh_future_error(l->f);
    /* A documentation address (TEST-NET-1): nobody answers. */
    l->f = connect_to(st, 0xc0000201, 9, TIMEOUT_MS);
    break;
  case SILENT:
    wd->silent = sh_future_error(l->f);
    l->f = connect_to(st, wd->live.ip, wd->live.port, SH_FOREVER);
    break;
  default:
    wd->ok = sh_future_error(l->f);
    if (wd->ok == 0) sh_channel_close(sh_future_reply(l->f, sh_channel_msg)->ch);
    wd->finished = true;
    sh_scn_done(s, sh_actor_system(self));
    return sh_return(st, NULL);
  }
  if (l->f == NULL) return sh_throw(st, -ENOMEM);
  return sh_suspend(st, sh_stack_state(st) + 1);
}

static const sh_actor_class client_class = {
    .name = "connector",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(locals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .notice = client_notice,
};

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  int rc = sh_tcp_serve(sys, &any, &idle_server, NULL, 1, NULL, &wd->server);
  if (rc == 0) rc = sh_tcp_server_addr(wd->server, &wd->live);
  const sh_addr *c;
  if (rc == 0) rc = sh_scn_spawn(s, sys, &client_class, 0, 1, &c);
  return rc == 0 ? sh_scn_kick(c) : rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *wd = sh_scn_state(s);
  if (sh_scn_faulty(s)) return;
  SH_SCN_CHECK(s, wd->finished, "the connects did not all end");
  SH_SCN_CHECK(s, wd->refused == -ECONNREFUSED, "connect to a closed port: %d", wd->refused);
  /* A real machine may have no route there, or a firewall that answers
   * for it: any error will do, as long as the connect ended. */
  bool silent_ok = sh_scn_simulated(s) ? wd->silent == -ETIMEDOUT : wd->silent < 0;
  SH_SCN_CHECK(s, silent_ok, "connect to a silent address: %d", wd->silent);
  SH_SCN_CHECK(s, wd->ok == 0, "connect to a live server: %d", wd->ok);
}

static const sh_scenario net_connect = {
    .name = "net_connect",
    .summary = "connects refused and timed out end with their error; the next one works",
    .flags = SH_SCN_NET,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(net_connect);
