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

const sh_msg_type fo_start_type = {"fo_start", sizeof(fo_start), SH_ASK, 0, NULL, NULL};
const sh_msg_type fo_started_type = {"fo_started", sizeof(fo_started), SH_REPLY, 0, NULL, NULL};

/* The entry's start: the clocks of the protocol begin, and the heartbeat.
 * Asked again until answered (the ask or its answer may be lost), so it
 * does each step once. */
static sh_yield brain_ask(sh_actor *self, sh_stack *st) {
  fo_node *n = (fo_node *)self;
  if (!sh_msg_is(sh_stack_msg(st), &fo_start_type)) return sh_throw(st, -EPROTO);
  int64_t now = sh_clock_ms();
  if (!n->started) fo_lease_boot(n, now);
  n->started = true;
  if (!n->ticking) {
    int rc = sh_timer_start(&n->base, n->cfg.heartbeat_ms, n->cfg.heartbeat_ms, &n->tick_timer,
                            &n->tick_timer);
    if (rc != 0) return sh_throw(st, rc);
    n->ticking = true;
    fo_links_tick(n, now); /* connect to the peers now, not a heartbeat later */
  }
  fo_started *r = (fo_started *)sh_msg_alloc(&fo_started_type);
  return r != NULL ? sh_return(st, &r->hdr) : sh_throw(st, -ENOMEM);
}

static sh_yield brain_notice(sh_actor *self, sh_stack *st) {
  fo_node *n = (fo_node *)self;
  if (sh_msg_is(sh_stack_msg(st), &fo_connect_type)) return fo_links_connect(n, st);
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
    .ask = brain_ask,
    .channel = brain_channel,
    .channel_event = brain_event,
    .timeout = brain_timeout,
};

/* ---- the entry --------------------------------------------------------------- */

typedef struct fo_entry {
  sh_actor base;
  fo_node_cfg cfg;
  const sh_addr *brain; /* once the server is up */
} fo_entry;

typedef struct entry_locals {
  sh_future *f;
} entry_locals;

enum { E_START = SH_START, E_ASKED, E_SLEPT };

/* The entry's notice to itself: try again (when not even a timer could be
 * made to wait with). */
typedef struct fo_retry {
  sh_msg hdr;
} fo_retry;
static const sh_msg_type fo_retry_type = {"fo_retry", sizeof(fo_retry), SH_NOTICE, 0, NULL, NULL};

static sh_yield entry_fail(fo_entry *e, sh_stack *st, const char *what, int rc) {
  char at[24];
  sh_netaddr_format(&e->cfg.listen, at, sizeof(at));
  fprintf(stderr, "failover-node %d: %s on %s: %s\n", e->cfg.id, what, at, strerror(-rc));
  sh_system_exit(sh_actor_system(&e->base), 1);
  return sh_return(st, NULL);
}

/* 10 ms before the next try; without a timer, a new stack tries at once. */
static sh_yield entry_wait(fo_entry *e, sh_stack *st, entry_locals *l) {
  l->f = sh_sleep(st, 10);
  if (l->f != NULL) return sh_suspend(st, E_SLEPT);
  sh_msg *m = sh_msg_alloc(&fo_retry_type);
  int rc = m != NULL ? sh_notice(sh_self(&e->base), m) : -ENOMEM;
  return rc == 0 || rc == -ESHUTDOWN ? sh_return(st, NULL) : entry_fail(e, st, "starting", rc);
}

/* Serves (once), then asks the brain to start; a failure for want of
 * memory is tried again, any other (the address taken, a bad address)
 * ends the node with 1. */
static sh_yield entry_try(fo_entry *e, sh_stack *st, entry_locals *l) {
  int rc = 0;
  if (e->brain == NULL) {
    sh_channel_opts o = {.handlers = {&fo_codec_async}, .nhandlers = 1};
    sh_tcp_server *srv = NULL;
    rc = sh_tcp_serve(sh_actor_system(&e->base), &e->cfg.listen, &fo_brain_class, &e->cfg, 1, &o,
                      &srv);
    if (rc == 0) e->brain = sh_tcp_server_workers(srv);
  }
  if (rc == -ESHUTDOWN) return sh_return(st, NULL); /* going down */
  if (rc != 0 && rc != -ENOMEM) return entry_fail(e, st, "serving", rc);
  sh_msg *m = rc == 0 ? sh_msg_alloc(&fo_start_type) : NULL;
  l->f = m != NULL ? sh_ask(st, e->brain, m, 1000) : NULL;
  return l->f != NULL ? sh_suspend(st, E_ASKED) : entry_wait(e, st, l);
}

static sh_yield node_notice(sh_actor *self, sh_stack *st) {
  fo_entry *e = (fo_entry *)self;
  entry_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case E_START: {
    if (sh_msg_is(sh_stack_msg(st), &fo_retry_type)) return entry_try(e, st, l);
    if (!sh_msg_is(sh_stack_msg(st), &sh_args_type)) return sh_return(st, NULL);
    const sh_args *a = sh_stack_msg_as(st, sh_args);
    char err[160];
    if (fo_parse_node(a->argc, a->argv, &e->cfg, err, sizeof(err)) == 0) return entry_try(e, st, l);
    fprintf(stderr, "failover-node: %s\n%s", err, fo_node_usage);
    sh_system_exit(sh_actor_system(self), 2);
    return sh_return(st, NULL);
  }
  case E_ASKED:
    if (sh_future_error(l->f) == -ESHUTDOWN) return sh_return(st, NULL); /* going down */
    if (!sh_future_failed(l->f)) {
      if (e->cfg.verbose) fprintf(stderr, "node %d: up, %d peers\n", e->cfg.id, e->cfg.npeers);
      return sh_return(st, NULL);
    }
    return entry_wait(e, st, l);
  case E_SLEPT:
    if (sh_future_failed(l->f)) return sh_return(st, NULL); /* going down */
    return entry_try(e, st, l);
  }
  return sh_throw(st, -EPROTO);
}

const sh_actor_class failover_node_class = {
    .name = "failover_node",
    .size = sizeof(fo_entry),
    .locals_size = sizeof(entry_locals),
    .notice = node_notice,
};
