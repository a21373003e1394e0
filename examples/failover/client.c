/*
 * A failover client: sends requests to the cluster one at a time until
 * --requests of them were served, going to another node on a refusal, a
 * timeout or a failed connection, and checks the fencing rule on every
 * answer: an epoch never goes down. One IO actor holds a connection per
 * node (made when first needed, forgotten when it closes).
 *
 * Each attempt is one stack (a fo_go notice to itself), so that nothing it
 * waited for outlives it: net.h's channel asks have no timeout of their
 * own, so an attempt waits for its answer and a sleep of --timeout-ms at
 * once (sh_suspend_any); the sleep first means the node is slow, dead or
 * cut off, and the attempt closes that connection (a late answer must not
 * be taken for the next request's) and returns, leaving what it no longer
 * wants to the runtime. The next attempt comes from a timer.
 */
#include <errno.h>
#include <string.h>

#include "fo_int.h"

typedef struct fo_slot {
  sh_channel *ch; /* the connection to that node; NULL: none now */
} fo_slot;

typedef struct fo_client {
  sh_actor base;
  fo_client_cfg cfg;
  fo_slot slots[FO_MAX_NODES];
  int cur;   /* the node tried next */
  int fails; /* attempts in a row that were not served */
  bool done;
  int64_t start_ms;
  uint64_t seq, max_epoch, first_epoch;
  int64_t served, refused, timed_out, failed;
  int last_node;
  /* The chain of attempts is number `gen`; the watchdog starts a new one
   * when nothing happened for too long (a notice or a timer lost). */
  uint32_t gen;
  int64_t progress_ms;
  bool go_armed, watchdog_on;
  uint64_t go_timer, watchdog;
} fo_client;

typedef struct fo_go {
  sh_msg hdr;
  uint32_t gen;
} fo_go;
static const sh_msg_type fo_go_type = {"fo_go", sizeof(fo_go), SH_NOTICE, 0, NULL, NULL};

typedef struct go_locals {
  sh_future *f, *t;
  sh_channel *ch;
  int slot;
  uint32_t gen;
  uint64_t seq;
} go_locals;

enum { G_START = SH_START, G_CONNECTED, G_ANSWERED };

static void finish(fo_client *cl, int code, const char *why) {
  FO_ASSERT(!cl->done);
  cl->done = true;
  printf("client: %s: %lld of %lld served (epochs %llu..%llu), last by node %d; "
         "%lld refused, %lld timed out, %lld failed, %lld ms\n",
         why, (long long)cl->served, (long long)cl->cfg.requests,
         (unsigned long long)cl->first_epoch, (unsigned long long)cl->max_epoch, cl->last_node,
         (long long)cl->refused, (long long)cl->timed_out, (long long)cl->failed,
         (long long)(sh_clock_ms() - cl->start_ms));
  fflush(stdout);
  sh_system_exit(sh_actor_system(&cl->base), code);
}

static int64_t pause_ms(const fo_client *cl) {
  return cl->cfg.interval_ms > 10 ? cl->cfg.interval_ms : 10;
}

/* The watchdog's periodic timer (watchdog() below), started at boot and, if
 * that failed for want of memory, at each attempt until it is. */
static void ensure_watchdog(fo_client *cl) {
  int64_t every = cl->cfg.timeout_ms;
  if (!cl->watchdog_on)
    cl->watchdog_on = sh_timer_start(&cl->base, every, every, NULL, &cl->watchdog) == 0;
}

/* The next attempt, after delay_ms (from a timer) or now. */
static void go_after(fo_client *cl, int64_t delay_ms) {
  FO_ASSERT(!cl->go_armed && delay_ms >= 0);
  ensure_watchdog(cl);
  cl->progress_ms = sh_clock_ms();
  if (delay_ms > 0 && sh_timer_start(&cl->base, delay_ms, 0, NULL, &cl->go_timer) == 0) {
    cl->go_armed = true;
    return;
  }
  fo_go *m = (fo_go *)sh_msg_alloc(&fo_go_type);
  if (m != NULL) m->gen = cl->gen;
  int rc = m != NULL ? sh_notice(sh_self(&cl->base), &m->hdr) : -ENOMEM;
  if (rc == 0) return;
  if (rc == -ESHUTDOWN) {
    cl->done = true; /* the system goes down: nothing more to do */
    return;
  }
  /* Out of memory (else a notice to itself cannot fail): a timer may do. */
  if (sh_timer_start(&cl->base, 1, 0, NULL, &cl->go_timer) == 0) cl->go_armed = true;
  else if (!cl->watchdog_on) finish(cl, 4, "out of memory");
}

static void say(const fo_client *cl, const char *what, int slot, int error) {
  if (!cl->cfg.verbose) return;
  char at[24];
  sh_netaddr_format(&cl->cfg.servers[slot], at, sizeof(at));
  fprintf(stderr, "client: %s: %s (%d)\n", at, what, error);
}

/* Not served: the next node, at once while some are left to try, then
 * after a pause (every node said no: an election may be on). */
static void not_served(fo_client *cl, int next) {
  cl->fails++;
  cl->cur = next;
  go_after(cl, cl->fails % cl->cfg.nservers == 0 ? pause_ms(cl) : 0);
}

static int next_of(const fo_client *cl, int slot) { return (slot + 1) % cl->cfg.nservers; }

/* Forgets and closes the connection an attempt used. */
static void drop(fo_client *cl, go_locals *l) {
  if (cl->slots[l->slot].ch != l->ch) return; /* closed already */
  cl->slots[l->slot].ch = NULL;
  sh_channel_close(l->ch);
}

static sh_yield ask(fo_client *cl, sh_stack *st, go_locals *l) {
  cl->progress_ms = sh_clock_ms();
  l->seq = ++cl->seq;
  fo_frame req = {.kind = FO_CLIENT_REQ, .seq = l->seq};
  fo_frame *m = fo_frame_new(&req);
  l->f = m != NULL ? sh_channel_ask(st, l->ch, &m->hdr) : NULL;
  l->t = l->f != NULL ? sh_sleep(st, cl->cfg.timeout_ms) : NULL;
  if (l->t == NULL) {
    cl->failed++;
    not_served(cl, next_of(cl, l->slot));
    return sh_return(st, NULL);
  }
  return sh_suspend_any(st, G_ANSWERED);
}

static sh_yield start(fo_client *cl, sh_stack *st, go_locals *l) {
  if (cl->cfg.max_ms > 0 && sh_clock_ms() - cl->start_ms >= cl->cfg.max_ms) {
    finish(cl, 3, "gave up (--max-ms)");
    return sh_return(st, NULL);
  }
  cl->progress_ms = sh_clock_ms();
  l->slot = cl->cur;
  l->ch = cl->slots[l->slot].ch;
  if (l->ch != NULL) return ask(cl, st, l);
  sh_channel_opts o = {.handlers = {&fo_codec_rpc}, .nhandlers = 1,
                       .connect_timeout_ms = cl->cfg.timeout_ms};
  l->f = sh_tcp_connect(st, &cl->cfg.servers[l->slot], &o);
  if (l->f != NULL) return sh_suspend(st, G_CONNECTED);
  cl->failed++;
  not_served(cl, next_of(cl, l->slot));
  return sh_return(st, NULL);
}

static sh_yield connected(fo_client *cl, sh_stack *st, go_locals *l) {
  int rc = sh_future_error(l->f), v;
  l->ch = rc == 0 ? sh_future_reply(l->f, sh_channel_msg)->ch : NULL;
  /* Closed before this resumed: its CLOSED event came without our data. */
  if (l->ch != NULL && sh_channel_getopt(l->ch, SH_TCP_NODELAY, &v) == -EPIPE) rc = -EPIPE;
  if (rc != 0) {
    say(cl, "connect failed", l->slot, rc);
    cl->failed++;
    not_served(cl, next_of(cl, l->slot));
    return sh_return(st, NULL);
  }
  FO_ASSERT(cl->slots[l->slot].ch == NULL);
  cl->slots[l->slot].ch = l->ch;
  sh_channel_set_data(l->ch, &cl->slots[l->slot]);
  return ask(cl, st, l);
}

/* A served answer: the fencing check, then the count. */
static void served(fo_client *cl, const fo_frame *r) {
  if (r->epoch < cl->max_epoch) {
    fprintf(stderr, "client: FENCING VIOLATION: node %u served in epoch %llu after epoch %llu\n",
            r->from, (unsigned long long)r->epoch, (unsigned long long)cl->max_epoch);
    finish(cl, 1, "fencing violation");
    return;
  }
  if (cl->first_epoch == 0) cl->first_epoch = r->epoch;
  cl->max_epoch = r->epoch;
  cl->last_node = r->from;
  cl->fails = 0;
  if (++cl->served >= cl->cfg.requests) finish(cl, 0, "done");
  else go_after(cl, cl->cfg.interval_ms);
}

/* A refusal: to the node it names as primary, if we know it, else the next. */
static void refused(fo_client *cl, const fo_frame *r, int slot) {
  cl->refused++;
  say(cl, "refused", slot, r->holder);
  int next = next_of(cl, slot);
  for (int i = 0; i < cl->cfg.nservers; i++) {
    const sh_netaddr *s = &cl->cfg.servers[i];
    if (r->hint.port != 0 && s->ip == r->hint.ip && s->port == r->hint.port) next = i;
  }
  not_served(cl, next);
}

static sh_yield answered(fo_client *cl, sh_stack *st, go_locals *l) {
  if (!sh_future_done(l->f) || sh_future_failed(l->f)) {
    bool late = !sh_future_done(l->f);
    say(cl, late ? "timed out" : "connection lost", l->slot, sh_future_error(l->f));
    if (late) cl->timed_out++;
    else cl->failed++;
    drop(cl, l);
    not_served(cl, next_of(cl, l->slot));
    return sh_return(st, NULL);
  }
  const fo_frame *r = sh_future_reply(l->f, fo_frame);
  if (r->kind != FO_CLIENT_RESP || r->seq != l->seq) {
    cl->failed++;
    drop(cl, l); /* out of step: nothing more on it can be trusted */
    not_served(cl, next_of(cl, l->slot));
  } else if (r->status == FO_OK) {
    served(cl, r);
  } else {
    refused(cl, r, l->slot);
  }
  return sh_return(st, NULL);
}

/* An attempt of an older chain (or after the end): a connection it made
 * that nobody took goes; nothing else it holds matters any more. */
static sh_yield stale(sh_stack *st, const go_locals *l) {
  if (sh_stack_state(st) == G_CONNECTED && !sh_future_failed(l->f)) {
    sh_channel *ch = sh_future_reply(l->f, sh_channel_msg)->ch;
    if (sh_channel_data(ch) == NULL) sh_channel_close(ch);
  }
  return sh_return(st, NULL);
}

static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  fo_client *cl = (fo_client *)self;
  go_locals *l = sh_stack_locals(st);
  const sh_msg *m = sh_stack_msg(st);
  if (sh_stack_state(st) == G_START && sh_msg_is(m, &sh_args_type)) {
    const sh_args *a = (const sh_args *)m;
    char err[160];
    if (fo_parse_client(a->argc, a->argv, &cl->cfg, err, sizeof(err)) != 0) {
      fprintf(stderr, "failover-client: %s\n%s", err, fo_client_usage);
      sh_system_exit(sh_actor_system(self), 2);
      return sh_return(st, NULL);
    }
    cl->start_ms = sh_clock_ms();
    go_after(cl, 0);
    return sh_return(st, NULL);
  }
  if (sh_stack_state(st) == G_START) l->gen = sh_stack_msg_as(st, fo_go)->gen;
  if (cl->done || l->gen != cl->gen) return stale(st, l);
  switch (sh_stack_state(st)) {
  case G_START: return start(cl, st, l);
  case G_CONNECTED: return connected(cl, st, l);
  case G_ANSWERED: return answered(cl, st, l);
  }
  return sh_throw(st, -EPROTO);
}

/* Nodes only answer: a request from one is a broken peer. */
static sh_yield client_channel(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_throw(st, -EPROTO);
}

static void client_event(sh_actor *self, sh_channel *ch, int event, int error) {
  (void)error;
  fo_client *cl = (fo_client *)self;
  fo_slot *s = sh_channel_data(ch);
  if (event != SH_CHANNEL_CLOSED || s == NULL || s->ch != ch) return;
  FO_ASSERT(s >= cl->slots && s < cl->slots + FO_MAX_NODES);
  s->ch = NULL;
}

/* Nothing happened for longer than an attempt can take: the chain was
 * lost (a notice refused, a timer not made). A new one starts; what the
 * old one still has on the way is ignored (its generation is over). */
static void watchdog(fo_client *cl) {
  int64_t limit = 2 * cl->cfg.timeout_ms + pause_ms(cl) + 100;
  if (sh_clock_ms() - cl->progress_ms < limit) return;
  if (cl->cfg.verbose) fprintf(stderr, "client: nothing happened for %lld ms: again\n",
                               (long long)limit);
  cl->gen++;
  if (cl->go_armed) sh_timer_cancel(&cl->base, cl->go_timer);
  cl->go_armed = false;
  go_after(cl, 0);
}

static void client_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)arg;
  fo_client *cl = (fo_client *)self;
  if (cl->done) return;
  if (cl->watchdog_on && id == cl->watchdog) {
    watchdog(cl);
  } else if (cl->go_armed && id == cl->go_timer) {
    cl->go_armed = false;
    go_after(cl, 0);
  }
}

const sh_actor_class failover_client_class = {
    .name = "failover_client",
    .size = sizeof(fo_client),
    .locals_size = sizeof(go_locals),
    .kind = SH_IO_ACTOR,
    .notice = client_notice,
    .channel = client_channel,
    .channel_event = client_event,
    .timeout = client_timeout,
};
