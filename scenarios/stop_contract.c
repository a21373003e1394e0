/*
 * stop_contract: what a stopping actor may still do, and what others may
 * do to it, checked against the documented rules (stop_contract.h).
 *
 * SC_SUBJECTS subjects each park three stacks before they stop: one on an
 * ask P0 answers only after the subject's stop returned, one on a long
 * sleep, one on a put into P1's mailbox (held full by a barrier until every
 * subject stopped, so the put waits across the stop, or is refused when
 * the mailbox is full as it is sent). Then the subject stops, drawn per
 * subject: itself, in a handler that then tries every kind of send, or by
 * the poker, whose sh_stop may land while any of the subject's stacks run.
 * Each parked stack that resumes (its future failed by the stop, or, the
 * put, ended either way) tries every kind of send again, suspends on the
 * futures that made, and looks at them once more; the stop hook tries the
 * sends a hook can make. Meanwhile P0 sends to the subject while it stops,
 * and the poker sends every kind to a subject whose stop returned.
 */
#include <errno.h>
#include <stdatomic.h>

#include "stop_contract.h"

typedef struct subject {
  sh_scn_actor a; /* a.id: the subject's index */
  bool hooked;    /* its stop hook ran */
  bool self_stop; /* a handler of ours called sh_stop */
} subject;

/* What a stack that tried every send keeps across its suspend. */
typedef struct subj_locals {
  sh_future *park;
  sh_future *put, *ask, *ask_try, *sleep;
  uint32_t park_serial, put_serial;
} subj_locals;

static sc_world *world_of(const sh_actor *self) { return sh_scn_state(sh_scn_of(self)); }

/* ---- every send a stopping actor can make -------------------------------- */

/* A target for the next send: P0, P1 (bounded), the poker, ourselves, or
 * the other subject (maybe stopped too). */
enum { T_P0, T_P1, T_POKER, T_SELF, T_OTHER, T_KINDS };

static const sh_addr *target_addr(sc_world *wd, uint32_t me, uint32_t t) {
  switch (t) {
  case T_P0: return wd->p0;
  case T_P1: return wd->p1;
  case T_POKER: return wd->poker;
  case T_SELF: return wd->subj[me];
  default: return wd->subj[(me + 1) % SC_SUBJECTS];
  }
}

/* A notice from a stopping subject: refused only for its target's sake. */
static void stopping_notice(sc_world *wd, uint32_t me, bool try_only) {
  uint32_t t = (uint32_t)sh_scn_below(wd->s, T_KINDS);
  sc_note *n = sc_note_new(wd, SC_PLAIN, me);
  if (n == NULL) return;
  uint32_t serial = n->serial;
  const sh_addr *to = target_addr(wd, me, t);
  int rc = try_only ? sh_notice_try(to, &n->hdr) : sh_notice(to, &n->hdr);
  bool ok = t == T_SELF ? rc == -ESHUTDOWN
            : t == T_OTHER ? rc == 0 || rc == -ESHUTDOWN
            : t == T_P1 ? rc == 0 || rc == -EAGAIN
                        : rc == 0;
  SH_SCN_CHECK(wd->s, ok, "stopping subject %u: %s to target %u: %d", me,
               try_only ? "sh_notice_try" : "sh_notice", t, rc);
  if (try_only && rc != 0) sh_msg_free(&n->hdr); /* a refused try leaves it ours */
  if (rc == 0 && t != T_OTHER)
    sc_peer_sent(wd, serial);
  else
    sc_expect(wd, serial, rc == 0 ? SC_EXP_MAYBE : SC_EXP_NEVER);
}

/* A future a stopping actor made: failed at once with -ESHUTDOWN. */
static void failed_now(sc_world *wd, uint32_t me, const sh_future *f, const char *what) {
  SH_SCN_CHECK(wd->s, f != NULL, "stopping subject %u: %s made no future", me, what);
  if (f == NULL) return;
  SH_SCN_CHECK(wd->s, sh_future_done(f) && sh_future_error(f) == -ESHUTDOWN,
               "stopping subject %u: %s %s with %d, want failed at once with -ESHUTDOWN", me,
               what, sh_future_done(f) ? "done" : "pending", sh_future_error(f));
}

/* sh_put, sh_ask, sh_ask_try from a stopping subject, to a drawn target. */
static void stopping_futures(sc_world *wd, uint32_t me, sh_stack *st, subj_locals *l) {
  sc_note *n = sc_note_new(wd, SC_PLAIN, me);
  if (n != NULL) {
    l->put_serial = n->serial;
    sc_expect(wd, n->serial, SC_EXP_NEVER);
    int64_t timeout = (int64_t)sh_scn_below(wd->s, 3) - 1; /* SH_FOREVER, NOWAIT or 1 ms */
    l->put = sh_put(st, target_addr(wd, me, (uint32_t)sh_scn_below(wd->s, T_KINDS)), &n->hdr,
                    timeout);
    failed_now(wd, me, l->put, "sh_put");
  }
  sc_ask *a = sc_ask_new(wd, 0, me);
  if (a != NULL) {
    sc_expect(wd, a->serial, SC_EXP_NEVER);
    l->ask = sh_ask(st, target_addr(wd, me, (uint32_t)sh_scn_below(wd->s, T_KINDS)), &a->hdr,
                    sh_scn_below(wd->s, 2) ? SH_FOREVER : 1);
    failed_now(wd, me, l->ask, "sh_ask");
  }
  a = sc_ask_new(wd, 0, me);
  if (a != NULL) {
    sc_expect(wd, a->serial, SC_EXP_NEVER);
    int rc = sh_ask_try(st, target_addr(wd, me, (uint32_t)sh_scn_below(wd->s, T_KINDS)), &a->hdr,
                        SH_FOREVER, &l->ask_try);
    SH_SCN_CHECK(wd->s, rc == 0, "stopping subject %u: sh_ask_try: %d, want 0", me, rc);
    if (rc == 0) failed_now(wd, me, l->ask_try, "sh_ask_try");
    if (rc != 0) sh_msg_free(&a->hdr);
    if (rc != 0) l->ask_try = NULL;
  }
}

/* Every kind of send, a sleep and a timer, from a stack of a subject whose
 * stop returned; the futures stay in l for the next state's look. */
static void try_all(sh_actor *self, sh_stack *st, subj_locals *l) {
  sc_world *wd = world_of(self);
  uint32_t me = sh_scn_id(self);
  SH_SCN_CHECK(wd->s, sc_began(wd, me), "subject %u: try_all before its stop", me);
  stopping_notice(wd, me, false);
  stopping_notice(wd, me, true);
  stopping_futures(wd, me, st, l);
  l->sleep = sh_sleep(st, 1 + (int64_t)sh_scn_below(wd->s, 3));
  failed_now(wd, me, l->sleep, "sh_sleep");
  uint64_t id;
  int rc = sh_timer_start(self, 1, 0, NULL, &id);
  SH_SCN_CHECK(wd->s, rc == -ESHUTDOWN, "stopping subject %u: sh_timer_start: %d", me, rc);
}

/* After the suspend on try_all's futures: still failed, the put's notice
 * still held by its future. */
static void look_again(sc_world *wd, uint32_t me, const subj_locals *l) {
  const sh_future *fs[] = {l->put, l->ask, l->ask_try, l->sleep};
  for (uint32_t i = 0; i < 4; i++)
    if (fs[i] != NULL)
      SH_SCN_CHECK(wd->s, sh_future_error(fs[i]) == -ESHUTDOWN,
                   "stopping subject %u: future %u resumed with %d", me, i,
                   sh_future_error(fs[i]));
  const sc_note *n = l->put != NULL ? (const sc_note *)sh_future_msg(l->put) : NULL;
  SH_SCN_CHECK(wd->s, l->put == NULL || (n != NULL && n->serial == l->put_serial),
               "stopping subject %u: a refused put's future lost its notice", me);
}

static void no_timeout(sh_actor *self, uint64_t id, void *arg) {
  (void)id;
  (void)arg;
  SH_SCN_CHECK(world_of(self)->s, false, "a stopping subject's timer ran");
}

/* ---- the subject's stacks -------------------------------------------------- */

/* A parked stack's future, as the stop left it. */
static void check_park(sc_world *wd, uint32_t me, uint32_t what, const subj_locals *l) {
  int err = sh_future_error(l->park);
  if (what == SC_PARK_SLEEP) {
    SH_SCN_CHECK(wd->s, err == -ESHUTDOWN, "subject %u: parked sleep ended with %d", me, err);
    return;
  }
  if (what == SC_PARK_ASK) {
    /* P0 answers after sh_stop returned only. A reply taken before the
     * stopped actor's run fails its futures still completes the ask (as
     * tests/test_e2e_shutdown.c expects of replies already queued): then
     * it carries its own value. */
    uint64_t v = 0;
    bool answered = err == 0 && sh_scn_num_of(l->park, &v) && v == l->park_serial;
    SH_SCN_CHECK(wd->s, err == -ESHUTDOWN || answered,
                 "subject %u: parked ask ended with %d (value %llu, want -ESHUTDOWN or #%u)", me,
                 err, (unsigned long long)v, l->park_serial);
    return;
  }
  /* A put's outcome is exact: in the mailbox, or handed back. */
  const sc_note *n = (const sc_note *)sh_future_msg(l->park);
  if (err == 0) {
    sc_peer_sent(wd, l->park_serial);
  } else {
    SH_SCN_CHECK(wd->s, err == -ESHUTDOWN, "subject %u: parked put ended with %d", me, err);
    SH_SCN_CHECK(wd->s, n != NULL && n->serial == l->park_serial,
                 "subject %u: a failed put does not hold its notice", me);
    sc_expect(wd, l->park_serial, SC_EXP_NEVER);
  }
}

/* Starts a parked stack: the future it waits on across the stop. */
static sh_yield park(sh_actor *self, sh_stack *st, uint32_t what, subj_locals *l) {
  sc_world *wd = world_of(self);
  uint32_t me = sh_scn_id(self);
  if (what == SC_PARK_SLEEP) {
    l->park = sh_sleep(st, 60000);
  } else if (what == SC_PARK_ASK) {
    sc_ask *a = sc_ask_new(wd, 1, me);
    if (a == NULL) return sh_return(st, NULL);
    l->park_serial = a->serial;
    sc_peer_sent(wd, a->serial); /* our own stop comes later: not refused */
    l->park = sh_ask(st, wd->p0, &a->hdr, SH_FOREVER);
  } else {
    sc_note *n = sc_note_new(wd, SC_PLAIN, me);
    if (n == NULL) return sh_return(st, NULL);
    l->park_serial = n->serial;
    l->park = sh_put(st, wd->p1, &n->hdr, SH_FOREVER);
  }
  SH_SCN_CHECK(wd->s, l->park != NULL, "subject %u: park %u made no future", me, what);
  return l->park != NULL ? sh_suspend(st, 1) : sh_return(st, NULL);
}

/* Stops this subject: itself now, or through the poker. */
static sh_yield stop_req(sh_actor *self, sh_stack *st, subj_locals *l) {
  subject *sj = (subject *)self;
  sc_world *wd = world_of(self);
  uint32_t me = sh_scn_id(self);
  bool external = wd->external[me];
  sc_note *n = sc_note_new(wd, external ? SC_STOP_ME : SC_STOPPED, me);
  if (!external) {
    sc_stop(wd, me);
    sj->self_stop = true;
  }
  if (n != NULL) {
    uint32_t serial = n->serial;
    int rc = sh_notice(wd->poker, &n->hdr);
    SH_SCN_CHECK(wd->s, rc == 0, "subject %u: a notice to the poker: %d", me, rc);
    if (rc == 0) sc_peer_sent(wd, serial);
  }
  if (external) return sh_return(st, NULL);
  try_all(self, st, l);
  return sh_suspend(st, 2);
}

/* A parked stack the stop resumed: every send again. */
static sh_yield resumed(sh_actor *self, sh_stack *st, subj_locals *l) {
  sc_world *wd = world_of(self);
  uint32_t me = sh_scn_id(self);
  SH_SCN_CHECK(wd->s, sc_began(wd, me), "subject %u: a parked stack resumed before the stop", me);
  if (!sc_began(wd, me)) return sh_return(st, NULL);
  try_all(self, st, l);
  return sh_suspend(st, 2);
}

static sh_yield subj_notice(sh_actor *self, sh_stack *st) {
  subject *sj = (subject *)self;
  sc_world *wd = world_of(self);
  subj_locals *l = sh_stack_locals(st);
  const sc_note *m = sh_stack_msg_as(st, sc_note);
  uint32_t me = sh_scn_id(self);
  SH_SCN_CHECK(wd->s, !sj->hooked, "subject %u: a handler after its stop hook", me);
  switch (sh_stack_state(st)) {
  case SH_START:
    /* Nothing queued starts once our own handler's sh_stop returned. */
    SH_SCN_CHECK(wd->s, !sj->self_stop, "subject %u: message #%u (%u) started after its stop",
                 me, m->serial, m->what);
    sc_handled(wd, m->serial);
    if (m->what == SC_STOP_REQ) return stop_req(self, st, l);
    if (m->what >= SC_PARK_ASK && m->what <= SC_PARK_PUT) return park(self, st, m->what, l);
    return sh_return(st, NULL);
  case 1: /* a parked stack's future ended */
    check_park(wd, me, m->what, l);
    if (m->what == SC_PARK_PUT) {
      /* A put may get in before the stop: wait for the stop then. */
      l->park = sh_sleep(st, 60000);
      return l->park != NULL ? sh_suspend(st, 3) : sh_return(st, NULL);
    }
    return resumed(self, st, l);
  case 3: /* the put's stack, parked again on a sleep */
    SH_SCN_CHECK(wd->s, sh_future_error(l->park) == -ESHUTDOWN,
                 "subject %u: a sleep across the stop ended with %d", me,
                 sh_future_error(l->park));
    return resumed(self, st, l);
  default: /* try_all's futures, all failed at once */
    look_again(wd, me, l);
    return sh_return(st, NULL);
  }
}

/* Asks come only from senders racing the stop (P0 does not ask). */
static sh_yield subj_ask(sh_actor *self, sh_stack *st) {
  subject *sj = (subject *)self;
  const sc_ask *m = sh_stack_msg_as(st, sc_ask);
  sc_world *wd = world_of(self);
  SH_SCN_CHECK(wd->s, !sj->self_stop && !sj->hooked, "subject %u: ask #%u started after its stop",
               sh_scn_id(self), m->serial);
  sc_handled(wd, m->serial);
  return sh_scn_answer(st, m->serial);
}

/* The hook's sends: notices only (no stack). Once, after the last handler. */
static void subj_stop(sh_actor *self) {
  subject *sj = (subject *)self;
  sc_world *wd = world_of(self);
  uint32_t me = sh_scn_id(self);
  SH_SCN_CHECK(wd->s, !sj->hooked, "subject %u: stop hook run twice", me);
  SH_SCN_CHECK(wd->s, sc_began(wd, me), "subject %u: stop hook before sh_stop", me);
  sj->hooked = true;
  stopping_notice(wd, me, false);
  stopping_notice(wd, me, true);
  atomic_fetch_add(&wd->hooks, 1);
  sc_maybe_done(wd);
}

static const sh_actor_class subj_class = {
    .name = "stop_subject",
    .size = sizeof(subject),
    .locals_size = sizeof(subj_locals),
    .init = sh_scn_actor_init,
    .stop = subj_stop,
    .notice = subj_notice,
    .ask = subj_ask,
    .timeout = no_timeout,
};

/* ---- the run -------------------------------------------------------------- */

/* A notice of `what` to a, counted delivered when `counted` and sent. */
static int send_note(sc_world *wd, const sh_addr *a, uint32_t what, uint32_t from, bool counted) {
  sc_note *n = sc_note_new(wd, what, from);
  if (n == NULL) return -ENOMEM;
  uint32_t serial = n->serial;
  int rc = sh_notice(a, &n->hdr);
  if (rc == 0 && counted) sc_peer_sent(wd, serial);
  if (rc == 0 && !counted) sc_expect(wd, serial, SC_EXP_ONCE);
  if (rc != 0) sc_expect(wd, serial, SC_EXP_NEVER);
  return rc == -EAGAIN ? 0 : rc; /* P1's fill may find the hold in the slot */
}

static int setup(sh_scn *s, sh_system *sys) {
  sc_world *wd = sh_scn_state(s);
  wd->s = s;
  wd->sys = sys;
  int rc = sh_scn_spawn(s, sys, &sc_p0_class, 0, 1, &wd->p0);
  if (rc == 0) rc = sh_scn_spawn(s, sys, &sc_p1_class, 1, 1, &wd->p1);
  if (rc == 0) rc = sh_scn_spawn(s, sys, &sc_poker_class, 2, 1, &wd->poker);
  /* P1's mailbox: held by the barrier, then filled. */
  if (rc == 0) rc = send_note(wd, wd->p1, SC_HOLD, 0, true);
  if (rc == 0) rc = send_note(wd, wd->p1, SC_PLAIN, 0, true);
  for (uint32_t i = 0; i < SC_SUBJECTS && rc == 0; i++) {
    wd->external[i] = sh_scn_below(s, 2) == 0;
    rc = sh_scn_spawn(s, sys, &subj_class, i, 1, &wd->subj[i]);
  }
  /* One notice mailbox, FIFO: the parks run (and suspend) before the stop. */
  static const uint32_t plan[] = {SC_PARK_ASK, SC_PARK_SLEEP, SC_PARK_PUT, SC_STOP_REQ};
  for (uint32_t k = 0; k < sizeof(plan) / sizeof(plan[0]); k++)
    for (uint32_t i = 0; i < SC_SUBJECTS && rc == 0; i++)
      rc = send_note(wd, wd->subj[i], plan[k], i, false);
  return rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  sc_world *wd = sh_scn_state(s);
  uint32_t made = atomic_load(&wd->next_serial);
  SH_SCN_CHECK_EQ(s, atomic_load(&wd->hooks), SC_SUBJECTS, "stop hooks run");
  for (uint32_t i = 1; i <= made && i < SC_MSGS; i++) {
    unsigned h = atomic_load(&wd->handled[i]), e = atomic_load(&wd->expect[i]);
    SH_SCN_CHECK(s, atomic_load(&wd->freed[i]) == 1, "message #%u freed %u times", i,
                 (unsigned)atomic_load(&wd->freed[i]));
    SH_SCN_CHECK(s, e != SC_EXP_UNKNOWN, "message #%u: its send's outcome unrecorded", i);
    SH_SCN_CHECK(s, e != SC_EXP_ONCE || h == 1, "message #%u delivered, handled %u times", i, h);
    SH_SCN_CHECK(s, e != SC_EXP_NEVER || h == 0, "message #%u refused, handled %u times", i, h);
  }
}

static const sh_scenario stop_contract = {
    .name = "stop_contract",
    .summary = "stopping actors try every send; each result checked against the sh_stop rules",
    .state_size = sizeof(sc_world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(stop_contract);
