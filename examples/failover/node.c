/*
 * A failover node: its entry actor (failover_node_class), which reads the
 * argv and starts the node's TCP server, and the brain (fo_brain_class),
 * the server's one connection actor, which owns every channel of the node
 * and all its state. One actor for all of it: the lease protocol needs no
 * lock and no message between actors, and every decision is taken on one
 * reading of the clock (lease.c decides, links.c keeps the channels).
 *
 * The observer is the one process-wide variable (failover.h says why it
 * is safe to set before boot); everything else lives in the actors, so
 * that several nodes run in one process.
 */
#include <errno.h>
#include <string.h>

#include "fo_int.h"

/* ---- the observer ------------------------------------------------------------ */

static failover_observer observer_fn;
static void *observer_ctx;

void failover_set_observer(failover_observer fn, void *ctx) {
  observer_fn = fn;
  observer_ctx = ctx;
}

void fo_observe(int node, failover_event_kind kind, uint64_t epoch, int64_t local_ms) {
  failover_observer fn = observer_fn;
  if (fn == NULL) return;
  failover_event ev = {.node = node, .kind = kind, .epoch = epoch, .local_ms = local_ms};
  fn(&ev, observer_ctx);
}

/* ---- the brain ------------------------------------------------------------------ */

static int brain_init(sh_actor *self, void *arg) {
  fo_node *n = (fo_node *)self;
  n->cfg = *(const fo_node_cfg *)arg;
  fo_links_init(n);
  return 0;
}

/* The start notice: the clocks of the protocol begin, and the heartbeat. */
static void brain_start(fo_node *n) {
  FO_ASSERT(!n->started);
  int64_t now = sh_clock_ms();
  fo_lease_boot(n, now);
  n->started = true;
  int rc = sh_timer_start(&n->base, n->cfg.heartbeat_ms, n->cfg.heartbeat_ms, &n->tick_timer,
                          &n->tick_timer);
  if (rc != 0) {
    fprintf(stderr, "node %d: no heartbeat timer: %s\n", n->cfg.id, strerror(-rc));
    sh_system_exit(sh_actor_system(&n->base), 1);
    return;
  }
  fo_links_tick(n, now); /* connect to the peers now, not a heartbeat later */
}

static sh_yield brain_notice(sh_actor *self, sh_stack *st) {
  fo_node *n = (fo_node *)self;
  if (sh_msg_is(sh_stack_msg(st), &fo_connect_type)) return fo_links_connect(n, st);
  if (sh_msg_is(sh_stack_msg(st), &fo_start_type)) brain_start(n);
  return sh_return(st, NULL);
}

/* A frame on one of the node's channels; answers go back on it. */
static sh_yield brain_channel(sh_actor *self, sh_stack *st) {
  fo_node *n = (fo_node *)self;
  int64_t now = sh_clock_ms();
  const fo_frame *f = sh_stack_msg_as(st, fo_frame);
  FO_ASSERT(sh_msg_is(&f->hdr, &fo_note_type));
  fo_conn *c = fo_links_heard(n, sh_stack_channel(st), now);
  fo_frame *answer = NULL;
  switch (f->kind) {
  case FO_LEASE_REQ:
    answer = fo_lease_on_request(n, f, now);
    break;
  case FO_CLIENT_REQ:
    answer = fo_lease_on_client(n, f, now);
    break;
  case FO_PING: {
    fo_frame pong = {.kind = FO_PONG, .from = (uint8_t)n->cfg.id};
    answer = fo_frame_new(&pong);
    break;
  }
  case FO_LEASE_ACK:
    if (c->peer >= 0) fo_lease_on_ack(n, f, c->peer, now);
    return sh_return(st, NULL);
  case FO_PONG:
    return sh_return(st, NULL); /* heard: fo_links_heard took it */
  default:
    return sh_throw(st, -EPROTO); /* nobody asks a node for that */
  }
  return answer != NULL ? sh_return(st, &answer->hdr) : sh_throw(st, -ENOMEM);
}

static void brain_event(sh_actor *self, sh_channel *ch, int event, int error) {
  fo_links_event((fo_node *)self, ch, event, error);
}

static void brain_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)id;
  fo_node *n = (fo_node *)self;
  int64_t now = sh_clock_ms();
  if (arg == &n->lease_timer) {
    fo_lease_timer(n, now);
    return;
  }
  FO_ASSERT(arg == &n->tick_timer);
  fo_lease_tick(n, now);
  fo_links_tick(n, now);
}

/* The system is going down (or the node was stopped): serving ends here. */
static void brain_stop(sh_actor *self) {
  fo_node *n = (fo_node *)self;
  if (n->started) fo_lease_stop(n, sh_clock_ms());
}

const sh_actor_class fo_brain_class = {
    .name = "failover_brain",
    .size = sizeof(fo_node),
    .locals_size = sizeof(fo_connect_locals),
    .kind = SH_IO_ACTOR,
    .init = brain_init,
    .stop = brain_stop,
    .notice = brain_notice,
    .channel = brain_channel,
    .channel_event = brain_event,
    .timeout = brain_timeout,
};

/* ---- the entry --------------------------------------------------------------- */

static void node_boot(sh_actor *self, const sh_args *a) {
  sh_system *sys = sh_actor_system(self);
  fo_node_cfg cfg;
  char err[160];
  if (fo_parse_node(a->argc, a->argv, &cfg, err, sizeof(err)) != 0) {
    fprintf(stderr, "failover-node: %s\n%s", err, fo_node_usage);
    sh_system_exit(sys, 2);
    return;
  }
  sh_channel_opts o = {.handlers = {&fo_codec_async}, .nhandlers = 1};
  sh_tcp_server *srv = NULL;
  int rc = sh_tcp_serve(sys, &cfg.listen, &fo_brain_class, &cfg, 1, &o, &srv);
  fo_start *m = rc == 0 ? (fo_start *)sh_msg_alloc(&fo_start_type) : NULL;
  if (rc == 0 && m == NULL) rc = -ENOMEM;
  if (rc == 0) rc = sh_notice(sh_tcp_server_workers(srv), &m->hdr);
  if (rc != 0) {
    char at[24];
    sh_netaddr_format(&cfg.listen, at, sizeof(at));
    fprintf(stderr, "failover-node %d: serving on %s: %s\n", cfg.id, at, strerror(-rc));
    sh_system_exit(sys, 1);
    return;
  }
  if (cfg.verbose) fprintf(stderr, "node %d: up, %d peers\n", cfg.id, cfg.npeers);
}

static sh_yield node_notice(sh_actor *self, sh_stack *st) {
  if (sh_msg_is(sh_stack_msg(st), &sh_args_type)) node_boot(self, sh_stack_msg_as(st, sh_args));
  return sh_return(st, NULL);
}

const sh_actor_class failover_node_class = {
    .name = "failover_node",
    .size = sizeof(sh_actor),
    .notice = node_notice,
};
