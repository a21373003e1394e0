/*
 * Channels at their edges, on the simulator, through the public API only:
 * sends.
 *
 *   - a send from a stack that no channel entry runs (after a sleep) whose
 *     write fails there and then: the channel closes under the call;
 *   - a close made in the last round of a leave: the client sends past the
 *     high watermark each time its write buffer drains, and closes on the
 *     n-th drain, for each n in turn; the channel is still torn down.
 *
 * Each is a scenario of this file, run over a few seeds (review_net.h);
 * connects and closes are test_sim_review_net.c's.
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

/* ---- a send whose write fails at once ---------------------------------- */

typedef struct sd_world {
  sh_tcp_server *server;
  sh_netaddr at;
  int send_error;
  bool sent;
} sd_world;

static const sh_actor_class sd_server_class = {
    .name = "review_sink",
    .size = sizeof(sh_scn_actor),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .channel = sd_server_channel,
};

enum { SD_CONNECTED = 1, SD_SLEPT, SD_SENT };

static sh_yield sd_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  sd_world *wd = sh_scn_state(s);
  sd_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case SH_START:
    l->f = sh_tcp_connect(st, &wd->at, NULL);
    return l->f != NULL ? sh_suspend(st, SD_CONNECTED) : sh_throw(st, -ENOMEM);
  case SD_CONNECTED:
    if (sh_future_failed(l->f)) break;
    l->ch = sh_future_reply(l->f, sh_channel_msg)->ch;
    /* Out of the channel's own entries: the send below runs alone. */
    l->f = sh_sleep(st, 1);
    return l->f != NULL ? sh_suspend(st, SD_SLEPT) : sh_throw(st, -ENOMEM);
  case SD_SLEPT: {
    sh_bytes *b = sh_bytes_new("ping", 4);
    l->f = b != NULL ? sh_channel_send(st, l->ch, &b->hdr) : NULL;
    if (l->f == NULL) return sh_throw(st, -ENOMEM);
    wd->sent = true;
    return sh_suspend(st, SD_SENT);
  }
  case SD_SENT:
    wd->send_error = sh_future_error(l->f);
    break;
  }
  sh_scn_done(s, sh_actor_system(self));
  return sh_return(st, NULL);
}

static const sh_actor_class sd_client_class = {
    .name = "review_sender",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(sd_locals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .notice = sd_notice,
};

static int sd_setup(sh_scn *s, sh_system *sys) {
  sd_world *wd = sh_scn_state(s);
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  const sh_addr *a;
  int rc = sh_tcp_serve(sys, &any, &sd_server_class, &(sh_scn_arg){s, 0}, 1, NULL, &wd->server);
  if (rc == 0) rc = sh_tcp_server_addr(wd->server, &wd->at);
  if (rc == 0) rc = sh_scn_spawn(s, sys, &sd_client_class, 0, 1, &a);
  return rc != 0 ? rc : sh_scn_kick(a);
}

static void sd_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  sd_world *wd = sh_scn_state(s);
  /* Every write resets the connection: the send cannot have succeeded. */
  SH_SCN_CHECK(s, !wd->sent || wd->send_error != 0, "a send on a reset connection succeeded");
}

static const sh_scenario review_send_reset = {
    .name = "review_send_reset",
    .summary = "a send after a sleep whose write resets the connection",
    .state_size = sizeof(sd_world),
    .setup = sd_setup,
    .verify = sd_verify,
};
SH_SCENARIO(review_send_reset);

/* ---- a close made in the last round of a leave ---------------------------------- */

/* The client sends one big chunk, then, each time the write buffer drains
 * below its low watermark (inside the channel's leave, round after round),
 * one chunk just past the high watermark; on the n-th drain it closes. */
#define LR_HIGH 1024u
#define LR_FIRST (100u << 10)

typedef struct lr_world {
  sh_tcp_server *server;
  sh_netaddr at;
  uint32_t close_at; /* the drain that closes */
  uint32_t drains;
  bool closed;
} lr_world;

static sh_yield lr_send(sh_stack *st, sd_locals *l, size_t n) {
  static const uint8_t zeros[LR_FIRST];
  sh_bytes *b = sh_bytes_new(zeros, n);
  l->f = b != NULL ? sh_channel_send(st, l->ch, &b->hdr) : NULL;
  return l->f != NULL ? sh_suspend(st, EO_ANSWERED) : sh_throw(st, -ENOMEM);
}

static sh_yield lr_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  lr_world *wd = sh_scn_state(s);
  sd_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case SH_START:
    l->f = sh_tcp_connect(st, &wd->at, &(sh_channel_opts){.write_high = LR_HIGH});
    return l->f != NULL ? sh_suspend(st, EO_CONNECTED) : sh_throw(st, -ENOMEM);
  case EO_CONNECTED:
    if (sh_future_failed(l->f)) break;
    l->ch = sh_future_reply(l->f, sh_channel_msg)->ch;
    return lr_send(st, l, LR_FIRST);
  case EO_ANSWERED:
    if (sh_future_failed(l->f)) break;
    /* Back-pressure: a send completes below the high watermark. */
    SH_SCN_CHECK(s, sh_channel_pending_bytes(l->ch) < LR_HIGH,
                 "a send completed with %zu bytes waiting", sh_channel_pending_bytes(l->ch));
    if (++wd->drains < wd->close_at) return lr_send(st, l, LR_HIGH + 76);
    /* Its CLOSED, which ends the workload, must follow. */
    sh_channel_close(l->ch);
    return sh_return(st, NULL);
  }
  sh_scn_done(s, sh_actor_system(self));
  return sh_return(st, NULL);
}

static void lr_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)ch, (void)error;
  sh_scn *s = sh_scn_of(self);
  lr_world *wd = sh_scn_state(s);
  if (ev != SH_CHANNEL_CLOSED) return;
  wd->closed = true;
  sh_scn_done(s, sh_actor_system(self));
}

static const sh_actor_class lr_client_class = {
    .name = "review_drainer",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(sd_locals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .notice = lr_notice,
    .channel_event = lr_event,
};

static uint32_t lr_close_at;

static int lr_setup(sh_scn *s, sh_system *sys) {
  lr_world *wd = sh_scn_state(s);
  wd->close_at = lr_close_at;
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  const sh_addr *a;
  int rc = sh_tcp_serve(sys, &any, &sd_server_class, &(sh_scn_arg){s, 0}, 1, NULL, &wd->server);
  if (rc == 0) rc = sh_tcp_server_addr(wd->server, &wd->at);
  if (rc == 0) rc = sh_scn_spawn(s, sys, &lr_client_class, 0, 1, &a);
  return rc != 0 ? rc : sh_scn_kick(a);
}

static void lr_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  lr_world *wd = sh_scn_state(s);
  SH_SCN_CHECK(s, wd->closed, "the channel closed by its actor was never torn down");
}

static const sh_scenario review_leave_rounds = {
    .name = "review_leave_rounds",
    .summary = "a close made in the last round of deferred work of a leave",
    .state_size = sizeof(lr_world),
    .setup = lr_setup,
    .verify = lr_verify,
};
SH_SCENARIO(review_leave_rounds);

/* ---- the tests ------------------------------------------------------------------ */

static void test_send_reset(void **state) {
  (void)state;
  run_seeds("review_send_reset", "sh/net/reset:1");
}

static void test_leave_rounds(void **state) {
  (void)state;
  for (lr_close_at = 1; lr_close_at <= 24; lr_close_at++) run_seeds("review_leave_rounds", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_leave_rounds),
      cmocka_unit_test(test_send_reset),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
