/*
 * Test scenarios for the simulator's report of a program that leaves the
 * simulated world: each misuses it on purpose, in one way, and must end
 * with the failure that names the culprit instead of a stall or a wrong
 * result. Hidden and simulator only (on the epoll backend each of them is
 * a correct, if poor, program, or a hang).
 *
 *   test_misuse_sleep   setup polls with usleep in a loop until an actor
 *                       has run (FAIL:blocking: usleep by the outside
 *                       thread; every worker is a fiber of that thread);
 *   test_misuse_thread  setup starts a real pthread that sends to an actor
 *                       (FAIL:blocking: pthread_create; a thread started
 *                       before the run, which then enters the runtime, is
 *                       FAIL:thread, which the simulator's tests check);
 *   test_misuse_spin    an actor sends to its peer on its own worker, then
 *                       spins on an atomic flag the peer's handler sets,
 *                       passing no scheduling point (FAIL:hang after one
 *                       second of real time). On a real machine it hangs
 *                       too: the peer's worker is the spinning one.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <unistd.h>

#include <stackhouse/scenario.h>

/* Real time a spinning run may take without a step before FAIL:hang. */
#define TM_HANG_MS 1000
#define TM_POLL_US 1000

typedef struct tm_state {
  atomic_bool ran; /* set by the actor that must run */
  const sh_addr *actor;
} tm_state;

/* Sets the flag, and ends the workload unless told (n = 1) to leave that
 * to its sender. */
static sh_yield tm_flagger_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  tm_state *t = sh_scn_state(s);
  atomic_store(&t->ran, true);
  if (sh_scn_go_n(st) == 0) sh_scn_done(s, sh_actor_system(self));
  return sh_return(st, NULL);
}

static const sh_actor_class tm_flagger = {
    .name = "flagger",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = tm_flagger_notice,
};

/* ---- test_misuse_sleep --------------------------------------------------------- */

static int tm_sleep_setup(sh_scn *s, sh_system *sys) {
  tm_state *t = sh_scn_state(s);
  int rc = sh_scn_spawn_on(s, sys, &tm_flagger, 0, 0, &t->actor);
  if (rc == 0) rc = sh_scn_kick_n(t->actor, 1);
  /* The misuse: a real sleep while the actor should run. */
  while (rc == 0 && !atomic_load(&t->ran)) usleep(TM_POLL_US);
  if (rc == 0) sh_scn_done(s, sys);
  return rc;
}

static const sh_scenario test_misuse_sleep = {
    .name = "test_misuse_sleep",
    .summary = "must fail: setup polls with usleep until an actor ran (a real sleep)",
    .flags = SH_SCN_HIDDEN | SH_SCN_SIM_ONLY,
    .expect = "blocking",
    .state_size = sizeof(tm_state),
    .setup = tm_sleep_setup,
};
SH_SCENARIO(test_misuse_sleep);

/* ---- test_misuse_thread ------------------------------------------------------- */

static void *tm_thread_main(void *arg) {
  tm_state *t = arg;
  (void)sh_scn_kick(t->actor);
  return NULL;
}

static int tm_thread_setup(sh_scn *s, sh_system *sys) {
  tm_state *t = sh_scn_state(s);
  int rc = sh_scn_spawn_on(s, sys, &tm_flagger, 0, 0, &t->actor);
  pthread_t th;
  /* The misuse: a real thread of the program's own. */
  if (rc == 0) rc = -pthread_create(&th, NULL, tm_thread_main, t);
  if (rc == 0) rc = -pthread_join(th, NULL);
  return rc;
}

static const sh_scenario test_misuse_thread = {
    .name = "test_misuse_thread",
    .summary = "must fail: setup starts a real pthread that sends to an actor",
    .flags = SH_SCN_HIDDEN | SH_SCN_SIM_ONLY,
    .expect = "blocking",
    .state_size = sizeof(tm_state),
    .setup = tm_thread_setup,
};
SH_SCENARIO(test_misuse_thread);

/* ---- test_misuse_spin --------------------------------------------------------- */

/* Starts the flagger, then waits for it by spinning on its flag with no
 * call at all: the flagger is queued on this very worker, which never
 * passes a scheduling point again. */
static sh_yield tm_spinner_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  tm_state *t = sh_scn_state(s);
  int rc = sh_scn_kick_n(t->actor, 1);
  SH_SCN_CHECK(s, rc == 0, "kick: %d", rc);
  while (rc == 0 && !atomic_load_explicit(&t->ran, memory_order_relaxed)) {
  }
  sh_scn_done(s, sh_actor_system(self));
  return sh_return(st, NULL);
}

static const sh_actor_class tm_spinner = {
    .name = "spinner",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = tm_spinner_notice,
};

static int tm_spin_setup(sh_scn *s, sh_system *sys) {
  tm_state *t = sh_scn_state(s);
  const sh_addr *spinner;
  int rc = sh_scn_spawn_on(s, sys, &tm_spinner, 0, 0, &spinner);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &tm_flagger, 1, 0, &t->actor);
  return rc == 0 ? sh_scn_kick(spinner) : rc;
}

static const sh_scenario test_misuse_spin = {
    .name = "test_misuse_spin",
    .summary = "must fail: an actor spins on a flag its peer on its own worker would set",
    .hang_real_ms = TM_HANG_MS,
    .flags = SH_SCN_HIDDEN | SH_SCN_SIM_ONLY,
    .expect = "hang",
    .state_size = sizeof(tm_state),
    .setup = tm_spin_setup,
};
SH_SCENARIO(test_misuse_spin);
