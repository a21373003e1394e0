/*
 * A bug the original design of this runtime had, which it must not repeat
 * (bugs.c has the others): a message put during the drain is not
 * stranded. The scenario fails if the bug comes back; the comment below
 * says what the bug was and how it would show.
 *
 * Counters the actors share are seq_cst (the default): they are few, off
 * any hot path, and the end condition reads them together.
 */
#include <stdatomic.h>
#include <stdbool.h>

#include <stackhouse/scenario.h>

/* ============================================================================
 * bug2_flag_clear
 *
 * The original cleared its "has messages" flag after draining, so a message
 * put during the drain, once the mailbox it went to had been drained, was
 * left there until some later message woke the actor. Here actor X builds a
 * chain in which nothing else ever wakes it:
 *   a notice starts a one-shot timer (delay 0); the timer's handler runs in
 *   X's run after its notice mailbox was drained (events come last) and puts
 *   a notice to X itself; that notice's handler starts the next timer.
 * X is running while each of those notices is put, so the put does not
 * queue X: only the end of X's run, looking at its mailboxes afresh, can.
 * After B2_STEPS links, X has peers on every worker send it B2_PEER_N
 * notices each in bursts (the racy version: a put landing while X ends its
 * run); the workload ends when X has them all.
 * With the bug the chain stops at its first link (or a burst's last notices
 * stay unread): no message would ever come to X again, so the workload never
 * ends; a watchdog actor's one-shot (B2_WATCHDOG_MS, never reached
 * otherwise) then fails the run with X's progress.
 * ========================================================================== */

#define B2_STEPS 16
#define B2_PEERS_MAX 16
#define B2_PEER_N 64
#define B2_WATCHDOG_MS 2000

enum { B2_KICK = 0, B2_STEP = 1, B2_PEER = 2, B2_BURST = 3 };

typedef struct b2_world {
  const sh_addr *x;
  const sh_addr *peers[B2_PEERS_MAX];
  uint32_t npeers;
  atomic_int steps, peer_notices;
} b2_world;

static void b2_start_link(sh_actor *self) {
  int rc = sh_timer_start(self, 0, 0, NULL, NULL);
  SH_SCN_CHECK(sh_scn_of(self), rc == 0, "X's timer did not start: %d", rc);
}

/* The timer's handler: in X's run, after its notice mailbox was drained. */
static void b2_x_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)id;
  (void)arg;
  SH_SCN_CHECK(sh_scn_of(self), sh_scn_kick_n(sh_self(self), B2_STEP) == 0,
               "X's step notice failed");
}

static void b2_x_step(sh_actor *self) {
  sh_scn *s = sh_scn_of(self);
  b2_world *wd = sh_scn_state(s);
  if (atomic_fetch_add(&wd->steps, 1) + 1 < B2_STEPS) {
    b2_start_link(self);
    return;
  }
  for (uint32_t i = 0; i < wd->npeers; i++)
    SH_SCN_CHECK(s, sh_scn_kick_n(wd->peers[i], B2_BURST) == 0, "burst notice failed");
}

static sh_yield b2_x_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  b2_world *wd = sh_scn_state(s);
  switch (sh_scn_go_n(st)) {
  case B2_KICK: b2_start_link(self); break;
  case B2_STEP: b2_x_step(self); break;
  default:
    if (atomic_fetch_add(&wd->peer_notices, 1) + 1 == (int)(wd->npeers * B2_PEER_N))
      sh_scn_done(s, sh_actor_system(self));
    break;
  }
  return sh_return(st, NULL);
}

static const sh_actor_class b2_x_class = {
    .name = "x",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = b2_x_notice,
    .timeout = b2_x_timeout,
};

/* A peer: on a burst notice, B2_PEER_N notices to X in a row. */
static sh_yield b2_peer_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  b2_world *wd = sh_scn_state(s);
  for (int i = 0; i < B2_PEER_N; i++)
    SH_SCN_CHECK(s, sh_scn_kick_n(wd->x, B2_PEER) == 0, "peer notice failed");
  return sh_return(st, NULL);
}

static const sh_actor_class b2_peer_class = {
    .name = "peer",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = b2_peer_notice,
};

static sh_yield b2_watchdog_notice(sh_actor *self, sh_stack *st) {
  int rc = sh_timer_start(self, B2_WATCHDOG_MS, 0, NULL, NULL);
  SH_SCN_CHECK(sh_scn_of(self), rc == 0, "the watchdog did not start: %d", rc);
  return sh_return(st, NULL);
}

static void b2_watchdog_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)id;
  (void)arg;
  sh_scn *s = sh_scn_of(self);
  b2_world *wd = sh_scn_state(s);
  /* Past a workload that ended (the framework's idle stretch comes after
   * it): nothing was stranded. */
  if (atomic_load(&wd->peer_notices) == (int)(wd->npeers * B2_PEER_N)) return;
  SH_SCN_CHECK(s, false, "X stranded: %d of %d chain links, %d of %u peer notices",
               atomic_load(&wd->steps), B2_STEPS, atomic_load(&wd->peer_notices),
               wd->npeers * B2_PEER_N);
  sh_scn_done(s, sh_actor_system(self));
}

static const sh_actor_class b2_watchdog_class = {
    .name = "watchdog",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = b2_watchdog_notice,
    .timeout = b2_watchdog_timeout,
};

static int b2_setup(sh_scn *s, sh_system *sys) {
  b2_world *wd = sh_scn_state(s);
  wd->npeers = sh_scn_workers(s) < B2_PEERS_MAX ? sh_scn_workers(s) : B2_PEERS_MAX;
  const sh_addr *w;
  int rc = sh_scn_spawn_on(s, sys, &b2_watchdog_class, 0, 0, &w);
  if (rc == 0) rc = sh_scn_kick(w);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &b2_x_class, 0, 0, &wd->x);
  if (rc == 0)
    rc = sh_scn_spawn_each(s, sys, &b2_peer_class, wd->npeers, SH_SCN_EACH_PINNED, wd->peers);
  if (rc == 0) rc = sh_scn_kick_n(wd->x, B2_KICK);
  return rc;
}

static void b2_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  b2_world *wd = sh_scn_state(s);
  SH_SCN_CHECK(s, atomic_load(&wd->steps) == B2_STEPS, "%d of %d chain links",
               atomic_load(&wd->steps), B2_STEPS);
  SH_SCN_CHECK(s, atomic_load(&wd->peer_notices) == (int)(wd->npeers * B2_PEER_N),
               "%d of %u peer notices", atomic_load(&wd->peer_notices), wd->npeers * B2_PEER_N);
}

static const sh_scenario bug2_flag_clear = {
    .name = "bug2_flag_clear",
    .summary = "known bug 2: notices put during the actor's own run are delivered with no later poke",
    .workers = 2,
    .state_size = sizeof(b2_world),
    .setup = b2_setup,
    .verify = b2_verify,
};
SH_SCENARIO(bug2_flag_clear);
