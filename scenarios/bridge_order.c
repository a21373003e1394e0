/*
 * bridge_order: one outside thread's sends reach an actor in the order it
 * made them, also when they waited for room (stackhouse.h: "Per-sender
 * order: one sender's asks and notices are handled in the order sent";
 * each mailbox is FIFO; waiting senders get the room in FIFO order).
 *
 * Two outside threads each send BO_SENDS numbered messages through their
 * own bridge to one actor with small bounded mailboxes (capacity 1 to 3,
 * drawn), blocking while a mailbox is full: notices, and asks whose replies
 * they receive at the end. About one message in four is a barrier whose
 * stack sleeps 1 to 3 ms, so that the mailboxes fill and the senders queue
 * at the gate, then are admitted one by one as the actor takes. The class
 * keeps per-sender order across asks and notices (ordered) in half the
 * runs. Checked as each handler starts: a sender's numbers rise (within
 * each kind; across both when ordered); at the end every message was
 * handled once and every ask answered with its own number.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <stackhouse/bridge.h>
#include <stackhouse/probe.h>
#include <stackhouse/scenario.h>

#define BO_THREADS 2u
#define BO_SENDS 24u /* per thread */

typedef struct bo_note {
  sh_msg hdr;
  uint32_t thread, seq;
  bool pause;
} bo_note;
static bool bo_pause_filter(sh_actor *self, const sh_msg *m);
SH_MSG_DEFINE(bo_note, SH_NOTICE, 0);

typedef struct world {
  sh_scn *s;
  sh_system *sys;
  sh_actor_class cls;
  const sh_addr *to;
  bool ordered;
  /* The actor's own: the last number it started per thread and kind (ask
   * 0, notice 1; both in [0] when ordered); plain, it is one house. */
  int64_t last[BO_THREADS][2];
  uint32_t handled[BO_THREADS];
  sh_thread *threads[BO_THREADS];
  uint32_t total;   /* messages the actor started */
  atomic_uint left; /* the threads, and the actor's last message: then the end */
  atomic_uint answered[BO_THREADS];
} world;

typedef struct bo_locals {
  sh_future *f;
} bo_locals;

static world *world_of(sh_actor *self) { return sh_scn_state(sh_scn_of(self)); }

/* A handler starts message (thread, seq) of kind k: the order check. */
static void started(world *wd, uint32_t thread, uint32_t seq, uint32_t k) {
  if (!SH_SCN_CHECK(wd->s, thread < BO_THREADS && seq < BO_SENDS, "a stray message")) return;
  int64_t *last = &wd->last[thread][wd->ordered ? 0 : k];
  SH_SCN_CHECK(wd->s, (int64_t)seq > *last, "thread %u's %s #%u started after its #%lld", thread,
               k == 0 ? "ask" : "notice", seq, (long long)*last);
  if ((int64_t)seq > *last) *last = seq;
  wd->handled[thread]++;
  if (++wd->total == BO_THREADS * BO_SENDS) sh_scn_count_down(wd->s, wd->sys, &wd->left);
}

static sh_yield bo_notice(sh_actor *self, sh_stack *st) {
  world *wd = world_of(self);
  bo_locals *l = sh_stack_locals(st);
  const bo_note *m = (const bo_note *)sh_stack_msg(st);
  if (sh_stack_state(st) == SH_START) {
    started(wd, m->thread, m->seq, 1);
    if (m->pause) {
      l->f = sh_sleep(st, 1 + (int64_t)(m->seq % 3));
      if (l->f != NULL) return sh_suspend(st, 1);
    }
  }
  return sh_return(st, NULL);
}

static sh_yield bo_ask(sh_actor *self, sh_stack *st) {
  const sh_scn_num_ask *m = (const sh_scn_num_ask *)sh_stack_msg(st);
  started(world_of(self), (uint32_t)(m->v >> 32), (uint32_t)m->v, 0);
  return sh_scn_answer(st, m->v);
}

static bool bo_pause_filter(sh_actor *self, const sh_msg *m) {
  (void)self;
  return sh_msg_is(m, &bo_note_type) && ((const bo_note *)m)->pause;
}

/* One thread's sends, blocking while the mailbox is full; then its replies. */
static void sender_main(void *arg);

typedef struct sender_arg {
  world *wd;
  uint32_t thread;
} sender_arg;
static sender_arg args[BO_THREADS];

static void sender_send(world *wd, sh_bridge *b, uint32_t t, uint32_t seq, bool ask, bool pause) {
  int rc;
  if (ask) {
    sh_scn_num_ask *m = sh_msg_new(sh_scn_num_ask, .v = (uint64_t)t << 32 | seq);
    rc = m == NULL ? -ENOMEM : sh_bridge_ask(b, wd->to, &m->hdr, SH_FOREVER, NULL);
  } else {
    bo_note *m = sh_msg_new(bo_note, .thread = t, .seq = seq, .pause = pause);
    rc = m == NULL ? -ENOMEM : sh_bridge_notice(b, wd->to, &m->hdr, SH_FOREVER);
  }
  SH_SCN_CHECK(wd->s, rc == 0, "thread %u's send #%u: %d", t, seq, rc);
}

static void sender_main(void *arg) {
  sender_arg *a = arg;
  world *wd = a->wd;
  sh_bridge *b = NULL;
  if (!SH_SCN_CHECK(wd->s, sh_bridge_new(wd->sys, &b) == 0, "no bridge")) return;
  uint32_t asks = 0;
  for (uint32_t seq = 0; seq < BO_SENDS; seq++) {
    uint64_t r = sh_scn_rand(wd->s);
    bool ask = (r & 3) == 0;
    asks += ask;
    sender_send(wd, b, a->thread, seq, ask, (r >> 2 & 3) == 0);
  }
  for (uint32_t i = 0; i < asks; i++) {
    sh_bridge_reply rep;
    int rc = sh_bridge_recv(b, SH_FOREVER, &rep);
    if (!SH_SCN_CHECK(wd->s, rc == 0 && rep.error == 0, "a reply: %d %d", rc, rep.error)) break;
    const sh_scn_num *n = (const sh_scn_num *)rep.msg;
    SH_SCN_CHECK(wd->s, n->v >> 32 == a->thread, "thread %u got thread %llu's reply", a->thread,
                 (unsigned long long)(n->v >> 32));
    sh_msg_free(rep.msg);
    atomic_fetch_add(&wd->answered[a->thread], 1);
  }
  sh_bridge_free(b);
  sh_scn_count_down(wd->s, wd->sys, &wd->left);
}

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  wd->s = s;
  wd->sys = sys;
  wd->ordered = sh_scn_below(s, 2) == 0;
  uint32_t cap = 1 + (uint32_t)sh_scn_below(s, 3);
  wd->cls = (sh_actor_class){.name = "bo_target", .size = sizeof(sh_scn_actor),
                             .locals_size = sizeof(bo_locals), .init = sh_scn_actor_init,
                             .ask = bo_ask, .notice = bo_notice, .barrier = bo_pause_filter,
                             .ask_capacity = cap, .notice_capacity = wd->ordered ? 0 : cap,
                             .ordered = wd->ordered};
  for (uint32_t t = 0; t < BO_THREADS; t++) wd->last[t][0] = wd->last[t][1] = -1;
  atomic_init(&wd->left, BO_THREADS + 1);
  int rc = sh_scn_spawn(s, sys, &wd->cls, 0, 1, &wd->to);
  for (uint32_t t = 0; t < BO_THREADS && rc == 0; t++) {
    args[t] = (sender_arg){wd, t};
    rc = sh_thread_start(sender_main, &args[t], &wd->threads[t]);
  }
  return rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  world *wd = sh_scn_state(s);
  for (uint32_t t = 0; t < BO_THREADS; t++)
    if (wd->threads[t] != NULL) sh_thread_join(wd->threads[t]);
  for (uint32_t t = 0; t < BO_THREADS; t++)
    SH_SCN_CHECK_EQ(s, wd->handled[t], BO_SENDS, "messages of a thread handled");
}

static const sh_scenario bridge_order = {
    .name = "bridge_order",
    .summary = "two threads' bridge sends to small bounded mailboxes, per-sender order checked",
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(bridge_order);
