/*
 * Channels at their edges, on the simulator, through the public API only:
 * connects and closes.
 *
 *   - a stack that reconnects when its connect fails, while its actor stops
 *     (the stop's close fails the connect and resumes the stack at once);
 *   - an ask whose peer closes without answering ends with an error;
 *   - a connect heard late, when the peer's greeting and end of stream are
 *     in the report that ends it: the client must still read the end.
 *
 * Each is a scenario of this file, run over a few seeds (review_net.h);
 * sends are test_sim_review_send.c's.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stackhouse/net.h>
#include <stackhouse/scenario.h>
#include <stackhouse/sim.h>

#include "review_net.h"

/* ---- reconnecting while the actor stops ---------------------------------- */

/* No host has this address in the fake network: a connect never ends. */
static const sh_netaddr nowhere = {.ip = 0x0a090909, .port = 9};

typedef struct rc_world {
  uint32_t tries;
} rc_world;

typedef struct rc_locals {
  sh_future *f;
} rc_locals;

static sh_yield rc_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  rc_world *wd = sh_scn_state(s);
  rc_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_tcp_connect(st, &nowhere, NULL);
    if (l->f == NULL) return sh_throw(st, -ENOMEM);
    /* The workload ends now: the stop fails the connect. */
    sh_scn_done(s, sh_actor_system(self));
    return sh_suspend(st, 1);
  }
  /* The connect failed: try once more, as a client that reconnects does. */
  if (sh_future_failed(l->f) && wd->tries++ == 0) {
    l->f = sh_tcp_connect(st, &nowhere, NULL);
    if (l->f != NULL) return sh_suspend(st, 1);
  }
  return sh_return(st, NULL);
}

static const sh_actor_class rc_class = {
    .name = "review_reconnector",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(rc_locals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .notice = rc_notice,
};

static int rc_setup(sh_scn *s, sh_system *sys) {
  const sh_addr *a;
  int rc = sh_scn_spawn(s, sys, &rc_class, 0, 1, &a);
  return rc != 0 ? rc : sh_scn_kick(a);
}

static const sh_scenario review_reconnect_at_stop = {
    .name = "review_reconnect_at_stop",
    .summary = "a stack reconnects when the stop fails its connect",
    .state_size = sizeof(rc_world),
    .setup = rc_setup,
};
SH_SCENARIO(review_reconnect_at_stop);

/* ---- an ask whose peer closes without answering ---------------------------------- */

typedef struct eo_world {
  sh_tcp_server *server;
  sh_netaddr at;
  bool answered;
  int error;
} eo_world;

/* The server reads the request and closes its side unanswered. */
static sh_yield eo_server_channel(sh_actor *self, sh_stack *st) {
  (void)self;
  sh_channel_close_after_flush(sh_stack_channel(st));
  return sh_return(st, NULL);
}

static const sh_actor_class eo_server_class = {
    .name = "review_mute",
    .size = sizeof(sh_scn_actor),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .channel = eo_server_channel,
};

static sh_yield eo_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  eo_world *wd = sh_scn_state(s);
  sd_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case SH_START:
    l->f = sh_tcp_connect(st, &wd->at, NULL);
    return l->f != NULL ? sh_suspend(st, EO_CONNECTED) : sh_throw(st, -ENOMEM);
  case EO_CONNECTED: {
    if (sh_future_failed(l->f)) break;
    l->ch = sh_future_reply(l->f, sh_channel_msg)->ch;
    sh_bytes *b = sh_bytes_new("ask?", 4);
    l->f = b != NULL ? sh_channel_ask(st, l->ch, &b->hdr) : NULL;
    return l->f != NULL ? sh_suspend(st, EO_ANSWERED) : sh_throw(st, -ENOMEM);
  }
  case EO_ANSWERED:
    wd->answered = true;
    wd->error = sh_future_error(l->f);
    break;
  }
  sh_scn_done(s, sh_actor_system(self));
  return sh_return(st, NULL);
}

static const sh_actor_class eo_client_class = {
    .name = "review_asker",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(sd_locals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .notice = eo_notice,
};

static int eo_setup(sh_scn *s, sh_system *sys) {
  eo_world *wd = sh_scn_state(s);
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  const sh_addr *a;
  int rc = sh_tcp_serve(sys, &any, &eo_server_class, &(sh_scn_arg){s, 0}, 1, NULL, &wd->server);
  if (rc == 0) rc = sh_tcp_server_addr(wd->server, &wd->at);
  if (rc == 0) rc = sh_scn_spawn(s, sys, &eo_client_class, 0, 1, &a);
  return rc != 0 ? rc : sh_scn_kick(a);
}

static void eo_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  eo_world *wd = sh_scn_state(s);
  SH_SCN_CHECK(s, wd->answered && wd->error != 0, "the ask ended %d (error %d)", wd->answered,
               wd->error);
}

static const sh_scenario review_ask_eof = {
    .name = "review_ask_eof",
    .summary = "an ask whose peer closes without answering ends with an error",
    .state_size = sizeof(eo_world),
    .setup = eo_setup,
    .verify = eo_verify,
};
SH_SCENARIO(review_ask_eof);

/* ---- a greeting and the end of stream before the connect is heard -------------- */

/* The server greets each connection and closes it: when the client's
 * worker hears its connect late, the greeting and the end of stream are
 * both there already, in the one report the connect takes. */
static void gc_server_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)self, (void)error;
  if (ev != SH_CHANNEL_OPEN) return;
  sh_bytes *b = sh_bytes_new("hello", 5);
  if (b != NULL) (void)sh_channel_write(ch, &b->hdr);
  sh_channel_close_after_flush(ch);
}

static const sh_actor_class gc_server_class = {
    .name = "review_greeter",
    .size = sizeof(sh_scn_actor),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .channel = sd_server_channel,
    .channel_event = gc_server_event,
};

typedef struct gc_world {
  sh_tcp_server *server;
  sh_netaddr at;
  bool closed;
  uint32_t busy;
} gc_world;

#define GC_BUSY_RUNS 2000u

static sh_yield gc_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  gc_world *wd = sh_scn_state(s);
  sd_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_tcp_connect(st, &wd->at, NULL);
    return l->f != NULL ? sh_suspend(st, EO_CONNECTED) : sh_throw(st, -ENOMEM);
  }
  /* A failed connect ends the workload; a connected one ends at its CLOSED. */
  if (sh_future_failed(l->f)) {
    wd->closed = true;
    sh_scn_done(s, sh_actor_system(self));
  }
  return sh_return(st, NULL);
}

static void gc_client_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)ch, (void)error;
  sh_scn *s = sh_scn_of(self);
  gc_world *wd = sh_scn_state(s);
  if (ev != SH_CHANNEL_CLOSED) return;
  wd->closed = true;
  sh_scn_done(s, sh_actor_system(self));
}

static const sh_actor_class gc_client_class = {
    .name = "review_greeted",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(sd_locals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .notice = gc_notice,
    .channel = sd_server_channel,
    .channel_event = gc_client_event,
};

/* Keeps the client's worker in its state phase, long past a network hop,
 * so that the connect is heard late. */
static sh_yield gc_busy_notice(sh_actor *self, sh_stack *st) {
  gc_world *wd = sh_scn_state(sh_scn_of(self));
  if (!wd->closed && wd->busy++ < GC_BUSY_RUNS) (void)sh_scn_kick(sh_self(self));
  return sh_return(st, NULL);
}

static const sh_actor_class gc_busy_class = {
    .name = "review_busy",
    .size = sizeof(sh_scn_actor),
    .kind = SH_STATE_ACTOR,
    .init = sh_scn_actor_init,
    .notice = gc_busy_notice,
};

/* The client and the busy actor share worker 1; the acceptor, spawned
 * first, runs on worker 0. */
static int gc_setup(sh_scn *s, sh_system *sys) {
  gc_world *wd = sh_scn_state(s);
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  const sh_addr *a, *b;
  int rc = sh_tcp_serve(sys, &any, &gc_server_class, &(sh_scn_arg){s, 0}, SH_SPAWN_PER_WORKER,
                        NULL, &wd->server);
  if (rc == 0) rc = sh_tcp_server_addr(wd->server, &wd->at);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &gc_client_class, 0, 1, &a);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &gc_busy_class, 1, 1, &b);
  if (rc == 0) rc = sh_scn_kick(a);
  return rc != 0 ? rc : sh_scn_kick(b);
}

static const sh_scenario review_greet_close = {
    .name = "review_greet_close",
    .summary = "a connect heard after the peer's greeting and end of stream came",
    .state_size = sizeof(gc_world),
    .setup = gc_setup,
};
SH_SCENARIO(review_greet_close);

/* ---- the tests ------------------------------------------------------------------ */

static void test_reconnect_at_stop(void **state) {
  (void)state;
  run_seeds("review_reconnect_at_stop", NULL);
}

static void test_ask_eof(void **state) {
  (void)state;
  run_seeds("review_ask_eof", NULL);
}

static void test_greet_close(void **state) {
  (void)state;
  run_n_seeds("review_greet_close", NULL, 16);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_greet_close),
      cmocka_unit_test(test_ask_eof),
      cmocka_unit_test(test_reconnect_at_stop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
