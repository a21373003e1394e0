/*
 * bridge_shutdown: an outside thread keeps sending notices through its
 * bridge while the system shuts down.
 *
 * The thread sends to a sink with sh_bridge_notice_try until a send says
 * -ESHUTDOWN; the sink ends the workload at the first notice it gets, so
 * the shutdown (its stop of every house, its final drain) always runs while
 * the thread is still sending (ended from setup, it could come before the
 * thread had even made its bridge, and then nothing raced). A send
 * that read its target as not stopped before the shutdown stopped it must
 * still end delivered or dropped: after the thread is joined, the
 * accounting is checked again (sent == delivered + replies_unknown +
 * dropped_stopped), and the thread's last send must have been refused.
 */
#include <stdatomic.h>

#include <stackhouse/probe.h>

#include <stackhouse/scenario.h>

#define MAX_SENDS 100000u

typedef struct world {
  sh_scn *s;
  sh_system *sys;
  const sh_addr *sink;
  sh_thread *t;
  atomic_uint sent;
  atomic_int last_rc;
} world;

static sh_yield sink_notice(sh_actor *self, sh_stack *st) {
  sh_scn_done(sh_scn_of(self), sh_actor_system(self)); /* idempotent */
  return sh_return(st, NULL);
}

static const sh_actor_class sink_class = {
    .name = "bridge_shutdown_sink",
    .size = sizeof(sh_scn_actor),
    .init = sh_scn_actor_init,
    .notice = sink_notice,
};

static void sender(void *arg) {
  world *wd = arg;
  sh_bridge *b = NULL;
  int rc = sh_bridge_new(wd->sys, &b);
  /* Bounded: the shutdown stops the sink, and then every send is refused. */
  for (uint32_t i = 0; rc == 0 && i < MAX_SENDS; i++) {
    sh_scn_go *m = sh_msg_new(sh_scn_go, .n = i);
    rc = m != NULL ? sh_bridge_notice_try(b, wd->sink, &m->hdr) : -ENOMEM;
    if (rc != 0) sh_msg_free(m ? &m->hdr : NULL);
    if (rc == -EAGAIN) rc = 0;
    if (rc == 0) atomic_fetch_add(&wd->sent, 1);
    sh_yield_point("bridge_shutdown.send");
  }
  atomic_store(&wd->last_rc, rc);
  sh_bridge_free(b);
}

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  wd->s = s;
  wd->sys = sys;
  int rc = sh_scn_spawn(s, sys, &sink_class, 0, 1, &wd->sink);
  if (rc == 0) rc = sh_thread_start(sender, wd, &wd->t);
  return rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)st;
  world *wd = sh_scn_state(s);
  if (wd->t != NULL) sh_thread_join(wd->t);
  sh_stats now;
  sh_system_stats(sys, &now);
  SH_SCN_CHECK_EQ(s, now.sent, now.delivered + now.replies_unknown + now.dropped_stopped,
                  "sent, after the sending thread was joined");
  int last = atomic_load(&wd->last_rc);
  SH_SCN_CHECK(s, last == -ESHUTDOWN, "the thread's last send: %d", last);
}

static const sh_scenario bridge_shutdown = {
    .name = "bridge_shutdown",
    .summary = "an outside thread sends through its bridge while the system shuts down",
    .workers = 2,
    /* The shutdown must meet the thread still sending: no idle stretch. */
    .flags = SH_SCN_NO_IDLE,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(bridge_shutdown);
