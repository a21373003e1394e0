/*
 * actor_chaos's actors under test (chaos.h): one of CH_NKINDS classes
 * (bounded mailboxes or not, per-sender order or not, small run budgets),
 * spawned into a cell by its driver, sometimes with an init that fails.
 *
 * A target checks, of every ask and notice it is handed, that it is meant
 * for this very incarnation, is handled once, and comes after the ones its
 * sender sent before (per mailbox; across both for an `.ordered` class).
 * An ask answers with its serial's value, or sleeps, asks another cell or
 * throws first, as the ask says. A notice may start a one-shot or periodic
 * timer or cancel one: the timeout handler checks that a timer runs only
 * while armed (never after sh_timer_cancel returned 0), a one-shot once,
 * and never before its delay; sh_timer_cancel's result is checked against
 * what already ran.
 */
#include <errno.h>
#include <stdatomic.h>

#include "chaos.h"

#define CH_LATE_MS 50 /* simulator: a first run this late is a failure */

static void ch_drop(sh_msg *m) {
  /* The serial and the world are in the same place in both types. */
  const ch_note *n = (const ch_note *)m;
  if (n->serial != 0) atomic_fetch_add_explicit(&n->wd->freed[n->serial], 1, memory_order_relaxed);
}

const sh_msg_type ch_note_type = {"ch_note", sizeof(ch_note), SH_NOTICE, 0, ch_drop, NULL};
const sh_msg_type ch_hold_type = {"ch_hold", sizeof(ch_hold), SH_NOTICE, SH_MSG_BARRIER, ch_drop,
                                  NULL};
const sh_msg_type ch_ask_type = {"ch_ask", sizeof(ch_ask), SH_ASK, 0, ch_drop, NULL};
_Static_assert(offsetof(ch_note, serial) == offsetof(ch_ask, serial), "ch_drop reads either");
_Static_assert(offsetof(ch_note, wd) == offsetof(ch_ask, wd), "ch_drop reads either");

uint32_t ch_serial(ch_world *wd) {
  /* relaxed: a counter; serials only name messages. */
  uint32_t n = atomic_fetch_add_explicit(&wd->next_serial, 1, memory_order_relaxed) + 1;
  return n < CH_MSGS ? n : 0;
}

ch_ask *ch_ask_new(ch_world *wd, const ch_inc *inc, uint32_t sender, uint32_t what) {
  uint32_t serial = ch_serial(wd);
  if (serial == 0) return NULL;
  return sh_msg_new(ch_ask, .wd = wd, .serial = serial, .cell = inc->cell, .gen = inc->gen,
                    .sender = sender, .what = what);
}

ch_note *ch_note_new(ch_world *wd, const ch_inc *inc, uint32_t sender, uint32_t what,
                     uint32_t arg) {
  uint32_t serial = ch_serial(wd);
  if (serial == 0) return NULL;
  ch_note *m = (ch_note *)sh_msg_alloc(what == CH_HOLD ? &ch_hold_type : &ch_note_type);
  if (m != NULL)
    *m = (ch_note){.hdr = m->hdr, .wd = wd, .serial = serial, .cell = inc->cell, .gen = inc->gen,
                   .sender = sender, .what = what, .arg = arg};
  return m;
}

/* ---- the target --------------------------------------------------------- */

enum { TM_FREE = 0, TM_ARMED, TM_DONE }; /* DONE: a one-shot that ran, or cancelled */

typedef struct ch_timer {
  uint64_t id;
  int64_t due_ms;
  uint32_t runs;
  bool periodic;
  uint8_t state;
} ch_timer;

typedef struct target {
  sh_actor base;
  ch_world *wd;
  uint32_t cell, gen;
  bool ordered;
  uint32_t last_ask[CH_SENDERS], last_note[CH_SENDERS];
  ch_timer tm[CH_TIMERS];
  uint64_t gone[CH_TIMERS * 4]; /* ids of timers that must not run again (a ring) */
  uint32_t ngone;
} target;

typedef struct tg_locals {
  sh_future *f;
  uint32_t nested; /* the nested ask's serial */
} tg_locals;

static int tg_init(sh_actor *self, void *arg) {
  const ch_spawn_arg *a = arg;
  if (a->fail) return -EIO;
  target *t = (target *)self;
  t->wd = a->wd;
  t->cell = a->cell;
  t->gen = a->gen;
  t->ordered = a->ordered;
  atomic_fetch_add(&a->wd->inits, 1);
  return 0;
}

static void tg_stop(sh_actor *self) {
  target *t = (target *)self;
  atomic_fetch_add(&t->wd->stops, 1);
}

/* The checks every request gets on arrival. */
static void tg_receive(target *t, uint32_t serial, uint32_t cell, uint32_t gen, uint32_t sender,
                       bool ask) {
  sh_scn *s = t->wd->s;
  SH_SCN_CHECK(s, cell == t->cell && gen == t->gen,
               "message #%u meant for cell %u gen %u handled by cell %u gen %u", serial, cell, gen,
               t->cell, t->gen);
  unsigned was = atomic_fetch_add(&t->wd->handled[serial], 1);
  SH_SCN_CHECK(s, was == 0, "message #%u handled twice", serial);
  if (sender >= CH_SENDERS) return; /* CH_NO_SENDER: a target's own ask */
  uint32_t *last = ask || t->ordered ? &t->last_ask[sender] : &t->last_note[sender];
  SH_SCN_CHECK(s, serial > *last, "cell %u: sender %u's #%u handled after its #%u (%s)", t->cell,
               sender, serial, *last, t->ordered ? "ordered" : ask ? "asks" : "notices");
  if (serial > *last) *last = serial;
}

static bool tg_gone(const target *t, uint64_t id) {
  for (uint32_t i = 0; i < t->ngone && i < CH_TIMERS * 4; i++)
    if (t->gone[i] == id) return true;
  return false;
}

static void tg_forget(target *t, ch_timer *tm) {
  t->gone[t->ngone++ % (CH_TIMERS * 4)] = tm->id;
  tm->state = TM_DONE;
}

static void tg_start(target *t, uint32_t delay, bool periodic) {
  ch_timer *tm = NULL;
  for (uint32_t i = 0; i < CH_TIMERS && tm == NULL; i++)
    if (t->tm[i].state != TM_ARMED) tm = &t->tm[i];
  if (tm == NULL) return; /* all armed: this start is skipped */
  uint64_t id;
  int rc = sh_timer_start(&t->base, delay, periodic ? 1 + delay % 3 : 0, tm, &id);
  /* -ESHUTDOWN: the actor was stopped while this handler ran. */
  SH_SCN_CHECK(t->wd->s, rc == 0 || rc == -ESHUTDOWN || sh_scn_fault_error(t->wd->s, rc),
               "sh_timer_start: %d", rc);
  if (rc != 0) return;
  *tm = (ch_timer){.id = id, .due_ms = sh_clock_ms() + delay, .periodic = periodic,
                   .state = TM_ARMED};
}

static void tg_cancel(target *t, uint32_t which) {
  ch_timer *tm = &t->tm[which % CH_TIMERS];
  if (tm->state == TM_FREE) return;
  int rc = sh_timer_cancel(&t->base, tm->id);
  if (tm->state == TM_ARMED) {
    /* Armed: its handler has not run (or, periodic, may run again): the
     * cancel must take it back, even if it expired and its event is on
     * its way. */
    SH_SCN_CHECK(t->wd->s, rc == 0, "cell %u: cancel of an armed %s timer: %d", t->cell,
                 tm->periodic ? "periodic" : "one-shot", rc);
    if (rc == 0) tg_forget(t, tm);
  } else {
    SH_SCN_CHECK(t->wd->s, rc == -ENOENT, "cell %u: cancel of a timer already done: %d", t->cell,
                 rc);
  }
}

static void tg_timeout(sh_actor *self, uint64_t id, void *arg) {
  target *t = (target *)self;
  sh_scn *s = t->wd->s;
  ch_timer *tm = arg;
  bool known = tm >= &t->tm[0] && tm < &t->tm[CH_TIMERS] && tm->id == id;
  SH_SCN_CHECK(s, !tg_gone(t, id), "cell %u: timer %llu ran after its cancel or last run",
               t->cell, (unsigned long long)id);
  SH_SCN_CHECK(s, known && tm->state == TM_ARMED, "cell %u: timer %llu ran, not armed", t->cell,
               (unsigned long long)id);
  if (!known || tm->state != TM_ARMED) return;
  /* The first run of a timer: never before its delay, and (simulator)
   * not much after it; a periodic one's later ticks may bunch up. */
  int64_t now = sh_clock_ms();
  if (tm->runs++ == 0) {
    SH_SCN_CHECK(s, now >= tm->due_ms, "cell %u: timer %llu ran %lld ms early", t->cell,
                 (unsigned long long)id, (long long)(tm->due_ms - now));
    SH_SCN_CHECK(s, !sh_scn_simulated(s) || now <= tm->due_ms + CH_LATE_MS,
                 "cell %u: timer %llu ran %lld ms late", t->cell, (unsigned long long)id,
                 (long long)(now - tm->due_ms));
  }
  if (!tm->periodic) tg_forget(t, tm);
}

static sh_yield tg_notice(sh_actor *self, sh_stack *st) {
  target *t = (target *)self;
  const ch_note *m = sh_stack_msg_as(st, ch_note);
  tg_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) != SH_START) { /* a barrier's sleep ended (or the actor stopped) */
    SH_SCN_CHECK(t->wd->s, sh_future_error(l->f) == 0 || sh_future_error(l->f) == -ESHUTDOWN,
                 "a barrier's sleep: %d", sh_future_error(l->f));
    return sh_return(st, NULL);
  }
  tg_receive(t, m->serial, m->cell, m->gen, m->sender, false);
  if (m->cell != t->cell || m->gen != t->gen) return sh_return(st, NULL);
  if (m->what == CH_ONE_SHOT || m->what == CH_PERIODIC) tg_start(t, m->arg, m->what == CH_PERIODIC);
  if (m->what == CH_CANCEL) tg_cancel(t, m->arg);
  if (m->what == CH_HOLD && (l->f = sh_sleep(st, 1 + m->arg)) != NULL) return sh_suspend(st, 1);
  return sh_return(st, NULL);
}

/* An ask to another cell (or this one) from inside a handler; the answer
 * is checked if one came. */
static sh_yield tg_nested(target *t, sh_stack *st, const ch_ask *m) {
  tg_locals *l = sh_stack_locals(st);
  ch_inc *to = ch_live(t->wd, (m->serial * 7u) % CH_CELLS);
  ch_ask *a = to != NULL ? ch_ask_new(t->wd, to, CH_NO_SENDER, CH_ANSWER) : NULL;
  if (a == NULL) return sh_scn_answer(st, ch_reply_of(m->serial));
  l->nested = a->serial;
  l->f = sh_ask(st, to->addr, &a->hdr, 3);
  SH_SCN_CHECK(t->wd->s, l->f != NULL, "a target's ask");
  return l->f != NULL ? sh_suspend(st, 2) : sh_scn_answer(st, ch_reply_of(m->serial));
}

static sh_yield tg_ask(sh_actor *self, sh_stack *st) {
  target *t = (target *)self;
  const ch_ask *m = sh_stack_msg_as(st, ch_ask);
  tg_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case SH_START:
    tg_receive(t, m->serial, m->cell, m->gen, m->sender, true);
    if (m->what == CH_THROW) return sh_throw(st, CH_THROWN);
    if (m->what == CH_NESTED) return tg_nested(t, st, m);
    if (m->what != CH_SLEEP) break;
    l->f = sh_sleep(st, 1 + m->serial % 4);
    if (l->f == NULL) break;
    return sh_suspend(st, 1);
  case 1: /* slept, or the actor stopped meanwhile (-ESHUTDOWN) */
    SH_SCN_CHECK(t->wd->s, sh_future_error(l->f) == 0 || sh_future_error(l->f) == -ESHUTDOWN,
                 "a target's sleep: %d", sh_future_error(l->f));
    break;
  case 2: { /* the nested ask's answer */
    uint64_t v;
    int err = sh_future_error(l->f);
    if (sh_scn_num_of(l->f, &v))
      SH_SCN_CHECK(t->wd->s, v == ch_reply_of(l->nested), "a nested reply to #%u with another's value",
                   l->nested);
    SH_SCN_CHECK(t->wd->s, err == 0 || err == -ETIMEDOUT || err == -ESHUTDOWN || err == -EAGAIN,
                 "a target's nested ask: %d", err);
    break;
  }
  default:
    break;
  }
  return sh_scn_answer(st, ch_reply_of(m->serial));
}

#define CH_CLASS(nm, ac, nc, ord, mpr)                                                             \
  {.name = nm, .size = sizeof(target), .locals_size = sizeof(tg_locals), .init = tg_init,         \
   .stop = tg_stop, .notice = tg_notice, .ask = tg_ask, .timeout = tg_timeout,                    \
   .ask_capacity = (ac), .notice_capacity = (nc), .ordered = (ord), .max_per_run = (mpr)}

const sh_actor_class ch_classes[CH_NKINDS] = {
    CH_CLASS("chaos_plain", 0, 0, false, 0),
    CH_CLASS("chaos_bounded", 1, 1, false, 1),
    CH_CLASS("chaos_ordered", 2, 0, true, 0),
    CH_CLASS("chaos_tight", 1, 2, false, 3),
    CH_CLASS("chaos_ordered_one", 1, 0, true, 1),
};
