/*
 * stop_contract's messages and the actors its stopping subjects talk to
 * (stop_contract.h): P0, unbounded, which answers a "stuck" ask only after
 * its asker stopped and meanwhile sends to it; P1, whose notice mailbox
 * (capacity 1) a barrier holds full until every subject stopped, so that a
 * put into it waits across the stop; the poker, which stops a subject
 * when asked and sends to every subject whose stop returned.
 */
#include <errno.h>
#include <stdatomic.h>

#include "stop_contract.h"

static void sc_drop(sh_msg *m) {
  /* The serial and the world are in the same place in both types. */
  const sc_note *n = (const sc_note *)m;
  if (n->serial != 0) atomic_fetch_add_explicit(&n->wd->freed[n->serial], 1, memory_order_relaxed);
}
_Static_assert(offsetof(sc_note, serial) == offsetof(sc_ask, serial), "sc_drop reads either");
_Static_assert(offsetof(sc_note, wd) == offsetof(sc_ask, wd), "sc_drop reads either");

const sh_msg_type sc_note_type = {"sc_note", sizeof(sc_note), SH_NOTICE, 0, sc_drop, NULL};
const sh_msg_type sc_hold_type = {"sc_hold", sizeof(sc_hold), SH_NOTICE, SH_MSG_BARRIER, sc_drop,
                                  NULL};
const sh_msg_type sc_ask_type = {"sc_ask", sizeof(sc_ask), SH_ASK, 0, sc_drop, NULL};

static uint32_t serial_new(sc_world *wd) {
  /* relaxed: a counter; serials only name messages. */
  uint32_t n = atomic_fetch_add_explicit(&wd->next_serial, 1, memory_order_relaxed) + 1;
  return n < SC_MSGS ? n : 0;
}

sc_note *sc_note_new(sc_world *wd, uint32_t what, uint32_t from) {
  uint32_t serial = serial_new(wd);
  if (serial == 0) return NULL;
  sc_note *m = (sc_note *)sh_msg_alloc(what == SC_HOLD ? &sc_hold_type : &sc_note_type);
  if (m != NULL) *m = (sc_note){.hdr = m->hdr, .wd = wd, .serial = serial, .what = what, .from = from};
  return m;
}

sc_ask *sc_ask_new(sc_world *wd, uint32_t stuck, uint32_t from) {
  uint32_t serial = serial_new(wd);
  if (serial == 0) return NULL;
  return sh_msg_new(sc_ask, .wd = wd, .serial = serial, .stuck = stuck, .from = from);
}

void sc_expect(sc_world *wd, uint32_t serial, int exp) {
  SH_SCN_CHECK(wd->s, serial < SC_MSGS, "serial %u out of range", serial);
  if (serial >= SC_MSGS) return;
  unsigned char was = SC_EXP_UNKNOWN;
  bool first = atomic_compare_exchange_strong(&wd->expect[serial], &was, (unsigned char)exp);
  SH_SCN_CHECK(wd->s, first, "message #%u: two outcomes (%u, then %d)", serial, was, exp);
}

void sc_handled(sc_world *wd, uint32_t serial) {
  if (serial == 0 || serial >= SC_MSGS) return;
  unsigned was = atomic_fetch_add(&wd->handled[serial], 1);
  SH_SCN_CHECK(wd->s, was == 0, "message #%u handled twice", serial);
}

void sc_peer_sent(sc_world *wd, uint32_t serial) {
  sc_expect(wd, serial, SC_EXP_ONCE);
  /* seq_cst: counted before the sender's stop hook is (sc_maybe_done). */
  atomic_fetch_add(&wd->peer_sent, 1);
}

void sc_maybe_done(sc_world *wd) {
  /* seq_cst, all four: a peer counts what it handled, then looks at the
   * hooks; a subject's hook counts itself, then looks at what was handled:
   * one of the two sees the other. A subject's deliveries all come before
   * its hook (the hook runs after its last handler). */
  if (atomic_load(&wd->hooks) != SC_SUBJECTS) return;
  if (atomic_load(&wd->peer_got) == atomic_load(&wd->peer_sent)) sh_scn_done(wd->s, wd->sys);
}

void sc_stop(sc_world *wd, uint32_t i) {
  /* release: a stack the stop resumes sees the mark. */
  atomic_store_explicit(&wd->began[i], true, memory_order_release);
  int rc = sh_stop(wd->subj[i]);
  SH_SCN_CHECK(wd->s, rc == 0, "sh_stop of subject %u: %d", i, rc);
  /* release: a sender that sees the flag sends after the stop returned. */
  atomic_store_explicit(&wd->stopped[i], true, memory_order_release);
  atomic_fetch_add(&wd->nstopped, 1);
}

/* A future that must have failed at once with -ESHUTDOWN. */
static void refused_now(sc_world *wd, const sh_future *f, const char *what, uint32_t i) {
  SH_SCN_CHECK(wd->s, f != NULL, "%s to stopped subject %u: no future", what, i);
  if (f == NULL) return;
  SH_SCN_CHECK(wd->s, sh_future_done(f) && sh_future_error(f) == -ESHUTDOWN,
               "%s to stopped subject %u: %s %d, want failed at once with -ESHUTDOWN", what, i,
               sh_future_done(f) ? "done" : "pending", sh_future_error(f));
}

/* One kind of send to stopped subject i (k: which). */
static void send_one_to_stopped(sc_world *wd, sh_stack *st, uint32_t i, uint32_t k) {
  const sh_addr *to = wd->subj[i];
  if (k >= 3) {
    sc_ask *a = sc_ask_new(wd, 0, i);
    if (a == NULL) return;
    uint32_t serial = a->serial;
    sc_expect(wd, serial, SC_EXP_NEVER);
    if (k == 3) {
      refused_now(wd, sh_ask(st, to, &a->hdr, SH_FOREVER), "sh_ask", i);
      return;
    }
    sh_future *f = NULL;
    int rc = sh_ask_try(st, to, &a->hdr, SH_FOREVER, &f);
    SH_SCN_CHECK(wd->s, rc == 0, "sh_ask_try to stopped subject %u: %d, want 0", i, rc);
    if (rc != 0) sh_msg_free(&a->hdr);
    if (rc == 0) refused_now(wd, f, "sh_ask_try", i);
    return;
  }
  sc_note *n = sc_note_new(wd, SC_PLAIN, i);
  if (n == NULL) return;
  sc_expect(wd, n->serial, SC_EXP_NEVER);
  if (k == 2) {
    sh_future *f = sh_put(st, to, &n->hdr, SH_FOREVER);
    refused_now(wd, f, "sh_put", i);
    SH_SCN_CHECK(wd->s, f == NULL || sh_future_msg(f) == &n->hdr,
                 "a refused put to subject %u does not hold its notice", i);
    return;
  }
  int rc = k == 0 ? sh_notice(to, &n->hdr) : sh_notice_try(to, &n->hdr);
  SH_SCN_CHECK(wd->s, rc == -ESHUTDOWN, "%s to stopped subject %u: %d, want -ESHUTDOWN",
               k == 0 ? "sh_notice" : "sh_notice_try", i, rc);
  if (k == 1 && rc != 0) sh_msg_free(&n->hdr); /* a refused try leaves it ours */
}

void sc_send_to_stopped(sc_world *wd, sh_stack *st, uint32_t i) {
  SH_SCN_CHECK(wd->s, sc_is_stopped(wd, i), "subject %u: not stopped yet", i);
  /* Every kind, in a drawn order: notice, try, put, ask, ask_try. */
  uint32_t first = (uint32_t)sh_scn_below(wd->s, 5);
  for (uint32_t k = 0; k < 5; k++) send_one_to_stopped(wd, st, i, (first + k) % 5);
}

/* ---- P0: answers a stuck ask after its asker stopped --------------------- */

typedef struct peer_locals {
  sh_future *f;
  uint32_t turns;
} peer_locals;

static sh_yield peer_notice(sh_actor *self, sh_stack *st) {
  sc_world *wd = sh_scn_state(sh_scn_of(self));
  peer_locals *l = sh_stack_locals(st);
  const sc_note *m = sh_stack_msg_as(st, sc_note);
  if (sh_stack_state(st) == SH_START) {
    sc_handled(wd, m->serial);
    atomic_fetch_add(&wd->peer_got, 1);
    sc_maybe_done(wd);
  }
  /* The barrier holds P1's mailbox full until every subject stopped (or
   * SC_HOLD_MS passed: then a stop was lost, which the checks see). */
  if (m->what != SC_HOLD || atomic_load(&wd->nstopped) == SC_SUBJECTS || l->turns++ >= SC_HOLD_MS)
    return sh_return(st, NULL);
  l->f = sh_sleep(st, 1);
  return l->f != NULL ? sh_suspend(st, 1) : sh_return(st, NULL);
}

/* A send to subject i while it may be stopping: refused, or accepted (and
 * then handled at most once); refused for sure once its stop returned. */
static void send_racing(sc_world *wd, uint32_t i) {
  bool after = sc_is_stopped(wd, i);
  sc_note *n = sc_note_new(wd, SC_PLAIN, i);
  if (n == NULL) return;
  uint32_t serial = n->serial;
  int rc = sh_notice(wd->subj[i], &n->hdr);
  SH_SCN_CHECK(wd->s, rc == -ESHUTDOWN || (rc == 0 && !after),
               "a notice to subject %u %s its stop returned: %d", i, after ? "after" : "around", rc);
  sc_expect(wd, serial, rc == 0 ? SC_EXP_MAYBE : SC_EXP_NEVER);
}

static sh_yield p0_ask(sh_actor *self, sh_stack *st) {
  sc_world *wd = sh_scn_state(sh_scn_of(self));
  peer_locals *l = sh_stack_locals(st);
  const sc_ask *m = sh_stack_msg_as(st, sc_ask);
  if (sh_stack_state(st) == SH_START) {
    sc_handled(wd, m->serial);
    atomic_fetch_add(&wd->peer_got, 1);
    sc_maybe_done(wd);
  }
  /* Answered only once its asker's stop returned: the asker's future must
   * have failed with -ESHUTDOWN by then. Bounded by SC_HOLD_MS turns. */
  if (!m->stuck || m->from >= SC_SUBJECTS || sc_is_stopped(wd, m->from) || l->turns++ >= SC_HOLD_MS)
    return sh_scn_answer(st, m->serial);
  if (l->turns % 2 == 1) send_racing(wd, m->from);
  l->f = sh_sleep(st, 1);
  return l->f != NULL ? sh_suspend(st, 1) : sh_scn_answer(st, m->serial);
}

const sh_actor_class sc_p0_class = {
    .name = "stop_p0", .size = sizeof(sh_scn_actor), .locals_size = sizeof(peer_locals),
    .init = sh_scn_actor_init, .notice = peer_notice, .ask = p0_ask};

const sh_actor_class sc_p1_class = {
    .name = "stop_p1", .size = sizeof(sh_scn_actor), .locals_size = sizeof(peer_locals),
    .init = sh_scn_actor_init, .notice = peer_notice, .ask = p0_ask, .notice_capacity = 1};

/* ---- the poker: stops a subject on request, sends to stopped ones ------- */

static sh_yield poker_notice(sh_actor *self, sh_stack *st) {
  sc_world *wd = sh_scn_state(sh_scn_of(self));
  const sc_note *m = sh_stack_msg_as(st, sc_note);
  sc_handled(wd, m->serial);
  uint32_t i = m->from;
  if (i < SC_SUBJECTS && m->what == SC_STOP_ME) sc_stop(wd, i);
  if (i < SC_SUBJECTS && (m->what == SC_STOP_ME || m->what == SC_STOPPED))
    sc_send_to_stopped(wd, st, i);
  /* Counted last: the workload may end at once. */
  atomic_fetch_add(&wd->peer_got, 1);
  sc_maybe_done(wd);
  return sh_return(st, NULL);
}

const sh_actor_class sc_poker_class = {
    .name = "stop_poker", .size = sizeof(sh_scn_actor), .init = sh_scn_actor_init,
    .notice = poker_notice};
