/*
 * Test scenarios for the simulator itself: each must fail, in the way its
 * `expect` names, so a test can check that the simulator notices. Hidden
 * (not in `all`, never in a sweep) and simulator only: on the epoll backend
 * they would hang.
 *
 *   test_deadlock  two actors each hold an ask of the other's behind a
 *                  barrier: every fiber blocks, no timer can wake one;
 *   test_livelock  an actor notices itself forever: the step bound ends it.
 *
 * Neither workload calls sh_scn_done.
 */
#include <errno.h>

#include <stackhouse/scenario.h>

/* ---- test_deadlock ---------------------------------------------------------- */

/* A barrier ask: while its stack waits, the actor takes no other ask. */
typedef struct dl_lock {
  sh_msg hdr;
} dl_lock;
static SH_MSG_DEFINE(dl_lock, SH_ASK, SH_MSG_BARRIER);

typedef struct dl_world {
  const sh_addr *a, *b; /* the lockers, with ids 0 and 1 */
} dl_world;

typedef struct dl_locals {
  sh_future *f[2];
} dl_locals;

static sh_future *dl_ask(sh_scn *s, sh_stack *st, const sh_addr *to) {
  dl_lock *m = sh_msg_new(dl_lock);
  sh_future *f = sh_ask(st, to, m != NULL ? &m->hdr : NULL, SH_FOREVER);
  SH_SCN_CHECK(s, f != NULL, "lock ask failed");
  return f;
}

/* Whichever lock an actor takes first (the starter's or the peer's), its
 * barrier stack asks the other actor, with no timeout, and that ask waits
 * behind the other's barrier: A waits for B, B for A. Shutdown, which would
 * end it, never comes. */
static sh_yield dl_lock_ask(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  dl_world *wd = sh_scn_state(s);
  dl_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f[0] = dl_ask(s, st, sh_scn_id(self) == 0 ? wd->b : wd->a);
    return l->f[0] != NULL ? sh_suspend(st, 1) : sh_throw(st, -ENOMEM);
  }
  SH_SCN_CHECK(s, false, "a deadlocked lock resumed (error %d)", sh_future_error(l->f[0]));
  return sh_throw(st, -EPROTO);
}

static const sh_actor_class dl_class = {
    .name = "locker",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(dl_locals),
    .init = sh_scn_actor_init,
    .ask = dl_lock_ask,
};

/* The starter: one notice stack asks both lockers at once. */
static sh_yield dl_start_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  dl_world *wd = sh_scn_state(s);
  dl_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f[0] = dl_ask(s, st, wd->a);
    l->f[1] = dl_ask(s, st, wd->b);
    return sh_suspend(st, 1);
  }
  SH_SCN_CHECK(s, false, "the starter resumed");
  return sh_return(st, NULL);
}

static const sh_actor_class dl_start_class = {
    .name = "starter",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(dl_locals),
    .init = sh_scn_actor_init,
    .notice = dl_start_notice,
};

static int dl_setup(sh_scn *s, sh_system *sys) {
  dl_world *wd = sh_scn_state(s);
  const sh_addr *starter;
  int rc = sh_scn_spawn_on(s, sys, &dl_class, 0, 0, &wd->a);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &dl_class, 1, sh_scn_workers(s) > 1 ? 1 : 0, &wd->b);
  if (rc == 0) rc = sh_scn_spawn(s, sys, &dl_start_class, 0, 1, &starter);
  return rc == 0 ? sh_scn_kick(starter) : rc;
}

static const sh_scenario test_deadlock = {
    .name = "test_deadlock",
    .summary = "must fail: two actors wait on each other's asks behind barriers",
    .workers = 2,
    /* Far beyond any timer the runtime itself keeps (pool trimming), so
     * that the end is the deadlock, not the virtual-time bound. */
    .vtime_limit_ms = 24ull * 3600 * 1000,
    .flags = SH_SCN_HIDDEN | SH_SCN_SIM_ONLY,
    .expect = "deadlock",
    .state_size = sizeof(dl_world),
    .setup = dl_setup,
};
SH_SCENARIO(test_deadlock);

/* ---- test_livelock ------------------------------------------------------------ */

typedef struct ll_spin {
  sh_msg hdr;
  uint64_t n;
} ll_spin;
static SH_MSG_DEFINE(ll_spin, SH_NOTICE, 0);

/* Each notice sends the next: the actor is never idle and never done. */
static sh_yield ll_notice(sh_actor *self, sh_stack *st) {
  ll_spin *next = sh_msg_new(ll_spin, .n = sh_stack_msg_as(st, ll_spin)->n + 1);
  if (next != NULL) sh_notice(sh_self(self), &next->hdr);
  return sh_return(st, NULL);
}

static const sh_actor_class ll_class = {
    .name = "spinner",
    .size = sizeof(sh_actor),
    .notice = ll_notice,
};

static int ll_setup(sh_scn *s, sh_system *sys) {
  (void)s;
  const sh_addr *a;
  int rc = sh_spawn(sys, &ll_class, NULL, 1, &a);
  ll_spin *m = rc == 0 ? sh_msg_new(ll_spin, .n = 0) : NULL;
  if (rc == 0) rc = m != NULL ? sh_notice(a, &m->hdr) : -ENOMEM;
  return rc;
}

static const sh_scenario test_livelock = {
    .name = "test_livelock",
    .summary = "must fail: an actor notices itself forever and never ends the workload",
    .workers = 2,
    /* The step bound must end it, whatever the virtual cost of a step; a
     * low one keeps the expected failure quick (a normal run takes ~30k). */
    .vtime_limit_ms = 24ull * 3600 * 1000,
    .max_steps = 2000000,
    .flags = SH_SCN_HIDDEN | SH_SCN_SIM_ONLY,
    .expect = "livelock",
    .setup = ll_setup,
};
SH_SCENARIO(test_livelock);
