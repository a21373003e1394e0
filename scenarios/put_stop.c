/*
 * put_stop: a put waiting for room in a bounded mailbox, whose sender stops
 * while both the put's timeout and the gate's hand-off are on their way to
 * it as events.
 *
 * The sender A (one message per run, so its events are taken 16 a run)
 * starts FILLERS actor timers and then puts into B's full mailbox
 * (capacity 1) with the same timeout: the timeout's node lands behind the
 * fillers in the same wheel slot. B holds its mailbox shut with a barrier
 * that waits on an ask to itself with the same timeout. When the tick comes
 * every timer fires in one advance; B's barrier ends, B takes the notice
 * that filled its mailbox, which hands the freed slot to A's put (its
 * return is queued behind the timeout's event), and stops A. A's stop fails
 * its futures, keeping the put (its waiter was popped: the return decides)
 * and cancelling its timeout, which already fired. When A then reaches the
 * timeout's event, the put is still in its table.
 *
 * Expected: the put completes with 0 (the notice got in), A's stop hook
 * runs and ends the workload; every shared invariant holds.
 */
#include <stdatomic.h>

#include <stackhouse/scenario.h>

#define FILLERS 64
#define T_MS 5

typedef struct hold {
  sh_msg hdr;
} hold;
SH_MSG_DEFINE(hold, SH_NOTICE, SH_MSG_BARRIER);

typedef struct world {
  const sh_addr *a, *b;
  atomic_int put_error;
  atomic_uint put_seen;
} world;

typedef struct a_locals {
  sh_future *put;
} a_locals;

static void no_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)self;
  (void)id;
  (void)arg;
}

/* ---- B: the bounded mailbox ------------------------------------------------ */

static sh_yield b_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_scn_answer(st, 0);
}

/* The barrier: held until the ask to ourselves times out (our own ask
 * mailbox is held by this very barrier). */
static sh_yield b_hold(sh_actor *self, sh_stack *st) {
  if (sh_stack_state(st) == SH_START) {
    if (sh_scn_ask_num(st, sh_self(self), 0, T_MS) == NULL) return sh_throw(st, -ENOMEM);
    return sh_suspend(st, 1);
  }
  return sh_return(st, NULL);
}

static sh_yield b_notice(sh_actor *self, sh_stack *st) {
  world *wd = sh_scn_state(sh_scn_of(self));
  if (sh_msg_is(sh_stack_msg(st), &hold_type)) return b_hold(self, st);
  if (sh_scn_go_n(st) == 1) sh_stop(wd->a);
  return sh_return(st, NULL);
}

static const sh_actor_class b_class = {
    .name = "put_stop_b",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .ask = b_ask,
    .notice = b_notice,
    .notice_capacity = 1,
};

/* ---- A: the sender ------------------------------------------------------- */


static void a_stop(sh_actor *self) { sh_scn_done(sh_scn_of(self), sh_actor_system(self)); }

static sh_yield a_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  a_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    for (int i = 0; i < FILLERS; i++)
      SH_SCN_CHECK(s, sh_timer_start(self, T_MS, 0, NULL, NULL) == 0, "sh_timer_start");
    sh_scn_go *fill = sh_msg_new(sh_scn_go, .n = 1);
    SH_SCN_CHECK(s, fill != NULL && sh_notice(wd->b, &fill->hdr) == 0, "the notice that fills B");
    sh_scn_go *late = sh_msg_new(sh_scn_go, .n = 2);
    l->put = sh_put(st, wd->b, late ? &late->hdr : NULL, T_MS);
    SH_SCN_CHECK(s, l->put != NULL, "sh_put failed");
    SH_SCN_CHECK(s, sh_future_error(l->put) == -EINPROGRESS, "the put did not wait (%d)",
                 sh_future_error(l->put));
    return sh_suspend(st, 1);
  }
  atomic_store(&wd->put_error, sh_future_error(l->put));
  atomic_fetch_add(&wd->put_seen, 1);
  sh_msg_free(sh_future_take(l->put));
  return sh_return(st, NULL);
}

static const sh_actor_class a_class = {
    .name = "put_stop_a",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(a_locals),
    .init = sh_scn_actor_init,
    .notice = a_notice,
    .timeout = no_timeout,
    .stop = a_stop,
    .max_per_run = 1,
};

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  int rc = sh_scn_spawn_on(s, sys, &b_class, 1, 0, &wd->b);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &a_class, 0, 0, &wd->a);
  /* B takes the hold before A runs: B is queued first. */
  hold *h = rc == 0 ? sh_msg_new(hold) : NULL;
  if (rc == 0) rc = h == NULL ? -ENOMEM : sh_notice(wd->b, &h->hdr);
  if (rc == 0) rc = sh_scn_kick(wd->a);
  return rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  world *wd = sh_scn_state(s);
  SH_SCN_CHECK_EQ(s, atomic_load(&wd->put_seen), 1, "put outcomes seen");
}

static const sh_scenario put_stop = {
    .name = "put_stop",
    .summary = "a put handed a slot while its timeout fired, in a sender that stops",
    .workers = 1,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(put_stop);
