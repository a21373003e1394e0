/*
 * The reference model (model.h): a small state machine per thing the
 * runtime promises something about, kept in the model's table (modeltab.h),
 * changed and checked by each note the core makes (core/base/model.h).
 *
 * Rules, by the names a failure reports:
 *   mailbox.once  every message pushed into a mailbox is taken out of it at
 *                 most once, and only out of that mailbox: a take of a
 *                 message that is not queued there was delivered twice or
 *                 never sent; a push of one still queued, twice.
 *   mailbox.fifo  takes from a mailbox follow its queue's order, the order
 *                 of the pushes' exchanges (mailbox.c link_last).
 *   ask.once      an ask is answered (a reply or an exception sent) at most
 *                 once, and an answer reaches its asker at most once.
 *   ask.made      an answer is sent, and handed to a future, only for an ask
 *                 that was made; one dropped as late (its future gone) was
 *                 sent as an answer to an ask that was made.
 *   timer.cancel  no timeout call for an actor timer after sh_timer_cancel
 *                 of it succeeded.
 *   timer.once    a timeout call only for a started timer, and a one-shot's
 *                 at most once (a timer is forgotten once its node is
 *                 freed; a call after that is reported here, not as
 *                 timer.cancel).
 *   timer.early   the wheel hands a timer over (an actor timer's run or
 *                 tick, an ask's or a sleep's timeout) only once the
 *                 virtual clock reached its expiry, in ns (modeltimer.c).
 *   timer.armed   ...and only a node armed in it, once per arming.
 *   gate.capacity a bounded mailbox's slots taken never exceed its capacity.
 *   gate.slot     a slot is given back only if one was taken.
 *   gate.fifo     waiting senders leave the queue (admitted or refused) in
 *                 the order they queued; a cancelled one leaves from
 *                 anywhere.
 *   gate.try      a _try is refused (-EAGAIN) only when the mailbox is full
 *                 or a sender waits for room (queued, or entering the gate).
 *   inflight.*    a channel's inflight queues: fifo, limit, barrier, order
 *                 (modelifl.c).
 *   run.order     each take of a run is from the highest mailbox (reply,
 *                 exception, ask, notice) with a counted message, but those
 *                 a barrier holds and those the run found stuck; deferred
 *                 stacks run at most once a run, before its first request.
 *   run.budget    a run takes at most max_per_run messages (deferred stacks
 *                 counted), and events up to what is left or 16.
 *   run.stuck     a mailbox a run passes over as held up had a counted
 *                 message and a push half-way.
 *   stop.handled  no request of a stopped generation, or of an earlier one,
 *                 is handed to a handler (each take decides on the stop as
 *                 it reads it, and a batch at its hand-over).
 *   stop.refused  a request is refused only when its generation is stopped
 *                 or gone.
 *   model.bound   the model's table is full (modeltab.h).
 *
 * A mailbox's life begins at its init (SH_MODEL_BOX_NEW): messages the
 * model remembers in an earlier life of its memory are forgotten. Things
 * are numbered in the order the model first hears of them (mailbox #n, a
 * message's place in its queue), never by address, so a failure's text is
 * the same from run to run.
 */
#include "model.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/check.h"
#include "base/model.h"
#include "memmodel.h"
#include "modelrules.h"
#include "modeltab.h"
#include "run.h"

/* What a table entry's key names. */
enum {
  K_BOX = 1, /* (box key, 0): v mailbox number, w pushed, x taken, y counted, z unlinked */
  K_MSG,     /* (message, 0): v its mailbox's number, w its place, x the box key */
  K_ASK,     /* (asker house, id): v ASKED or ANSWERED */
  K_TIMER,   /* (house, id): v LIVE or CANCELLED, w periodic */
  K_LIFE,    /* (house key, 0): v its generation, w stopped */
  K_FIRST_GATE, /* modelgate.c's kinds follow (modelrules.h) */
};
_Static_assert((int)K_FIRST_GATE == (int)SH_SIMMODEL_K_GATE, "modelrules.h's kinds follow");
enum { ASKED = 1, ANSWERED };
enum { LIVE = 1, CANCELLED };

/* A house's run, from its begin to its end, is on one fiber (a worker's):
 * the run under way on each fiber, without a look-up. */
typedef struct run {
  uintptr_t hk;     /* its house's key; 0: none under way */
  uint64_t budget;  /* max_per_run */
  uint64_t n;       /* requests and answers taken, deferred stacks run */
  uint64_t events;  /* events taken */
  int64_t ev0;      /* events counted and within reach as the run began */
  uint64_t ew0;     /* pushes the event mailbox had had by then */
  uint32_t stuck;   /* the mailboxes passed over as held up by a push half-way */
  bool ready_ran;   /* the deferred stacks had their turn */
  bool requests;    /* an ask or a notice was taken */
  uint32_t stale;   /* the stale reads when the run's last note came */
} run;
static run runs[SH_SIM_MAX_FIBERS];

static uint64_t boxes; /* mailbox numbers given in this run */
static uint64_t events;

static const char *const box_names[] = {"reply", "exception", "ask", "notice", "event",
                                        "mailbox 5", "mailbox 6", "mailbox 7"};

void sh_simmodel_reset(void) {
  sh_simmodeltab_reset();
  memset(runs, 0, sizeof(runs));
  boxes = 0;
  events = 0;
}

uint64_t sh_simmodel_events(void) { return events; }

void sh_simmodel_fiber_gone(uint32_t f) {
  SH_ASSERT(f < SH_SIM_MAX_FIBERS);
  runs[f] = (run){0};
}

void sh_simmodel_forget(bool (*dead)(const void *ctx, uintptr_t a), const void *ctx) {
  sh_simmodeltab_forget(dead, ctx);
}

void sh_simmodel_violation(const char *fmt, ...) {
  char d[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d, sizeof(d), fmt, ap);
  va_end(ap);
  sh_simrun_fail("model", d);
}

sh_simmodel_entry *sh_simmodel_get(uint32_t kind, uintptr_t a, uint64_t b) {
  int made;
  return sh_simmodeltab_get(kind, a, b, &made);
}

#define get sh_simmodel_get
#define violation sh_simmodel_violation

/* ---- mailboxes ------------------------------------------------------------- */

static void box_new(uintptr_t box) {
  sh_simmodel_entry *e = sh_simmodeltab_find(K_BOX, box, 0);
  if (e != NULL) sh_simmodeltab_del(e);
}

static sh_simmodel_entry *box_of(uintptr_t box) {
  int made;
  sh_simmodel_entry *e = sh_simmodeltab_get(K_BOX, box, 0, &made);
  if (made) e->v = ++boxes;
  return e;
}

/* A message the model still holds queued: its mailbox's life is the same
 * one and it was not taken (a take forgets it). */
static int still_queued(const sh_simmodel_entry *m) {
  const sh_simmodel_entry *b = sh_simmodeltab_find(K_BOX, (uintptr_t)m->x, 0);
  return b != NULL && b->v == m->v;
}

static void push(uintptr_t box, uintptr_t msg, uint64_t i) {
  if (msg == 0) return; /* the sentinel, put back by a take */
  sh_simmodel_entry *b = box_of(box);
  int made;
  sh_simmodel_entry *m = sh_simmodeltab_get(K_MSG, msg, 0, &made);
  if (!made && still_queued(m))
    violation("mailbox.once: a message pushed into %s mailbox #%llu while still queued "
              "(as #%llu of mailbox #%llu)", box_names[i & 7], (unsigned long long)b->v,
              (unsigned long long)m->w + 1, (unsigned long long)m->v);
  m->v = b->v;
  m->w = b->w++;
  m->x = box;
  b->z++;
}

static void linked(uintptr_t box, uintptr_t msg) {
  if (msg == 0) return; /* the sentinel */
  sh_simmodel_entry *b = sh_simmodeltab_find(K_BOX, box, 0);
  SH_ASSERT(b != NULL && b->z > 0); /* pushed, not yet linked */
  b->z--;
}

static void count(uintptr_t box) { box_of(box)->y++; }

static void run_take(uintptr_t box, uint64_t i);

static void take(uintptr_t box, uintptr_t msg, uint64_t i) {
  sh_simmodel_entry *m = sh_simmodeltab_find(K_MSG, msg, 0);
  sh_simmodel_entry *b = sh_simmodeltab_find(K_BOX, box, 0);
  unsigned long long n = b != NULL ? b->v : 0;
  if (m == NULL)
    violation("mailbox.once: %s mailbox #%llu handed out a message that is not queued in it "
              "(taken twice, or never sent)", box_names[i & 7], n);
  if (b == NULL || m->v != b->v)
    violation("mailbox.once: %s mailbox #%llu handed out a message queued in mailbox #%llu",
              box_names[i & 7], n, (unsigned long long)m->v);
  if (m->w != b->x)
    violation("mailbox.fifo: %s mailbox #%llu handed out its message #%llu while #%llu "
              "is first in its queue", box_names[i & 7], n, (unsigned long long)m->w + 1,
              (unsigned long long)b->x + 1);
  b->x++;
  sh_simmodeltab_del(m);
  run_take(box, i);
}

/* ---- asks ------------------------------------------------------------------- */

static void ask(uintptr_t h, uint64_t id) {
  if (id == 0) return; /* a bridge's notice: ask ids count from 1 */
  /* A house's ask ids only grow; an entry of the same key is an earlier
   * life of the house's memory, whose asks are over. */
  get(K_ASK, h, id)->v = ASKED;
}

static void answer(uintptr_t h, uint64_t id) {
  sh_simmodel_entry *e = sh_simmodeltab_find(K_ASK, h, id);
  if (e == NULL)
    violation("ask.made: an answer sent to ask %llu, which was never made (or was answered "
              "and its answer reached the asker)", (unsigned long long)id);
  if (e->v != ASKED) violation("ask.once: ask %llu answered twice", (unsigned long long)id);
  e->v = ANSWERED;
}

static void answer_in(uintptr_t h, uint64_t id, uint64_t handed) {
  sh_simmodel_entry *e = sh_simmodeltab_find(K_ASK, h, id);
  const char *how = handed ? "handed to its future" : "dropped as late";
  if (e == NULL)
    violation("ask.once: an answer to ask %llu %s, which already had its answer (or was "
              "never made)", (unsigned long long)id, how);
  if (e->v != ANSWERED)
    violation("ask.made: an answer to ask %llu %s, which nobody answered",
              (unsigned long long)id, how);
  sh_simmodeltab_del(e);
}

/* An ask whose message never reached its target: forgotten, so that a long
 * run of refused asks does not fill the table. Ids of puts and notices
 * (never asked) are not there. */
static void withdrawn(uintptr_t h, uint64_t id) {
  sh_simmodel_entry *e = sh_simmodeltab_find(K_ASK, h, id);
  if (e == NULL) return;
  if (e->v != ASKED)
    violation("ask.made: ask %llu withdrawn (its message never delivered) after it was "
              "answered", (unsigned long long)id);
  sh_simmodeltab_del(e);
}

/* ---- actor timers ----------------------------------------------------------- */

static void timer_start(uintptr_t h, uint64_t id, uint64_t periodic) {
  sh_simmodel_entry *e = get(K_TIMER, h, id);
  e->v = LIVE;
  e->w = periodic;
}

static void timer_cancel(uintptr_t h, uint64_t id) {
  sh_simmodel_entry *e = sh_simmodeltab_find(K_TIMER, h, id);
  if (e == NULL) violation("timer.once: timer %llu cancelled, never started",
                           (unsigned long long)id);
  e->v = CANCELLED;
}

static void timer_call(uintptr_t h, uint64_t id) {
  sh_simmodel_entry *e = sh_simmodeltab_find(K_TIMER, h, id);
  if (e == NULL)
    violation("timer.once: a timeout call for timer %llu, not started or a one-shot "
              "already called", (unsigned long long)id);
  if (e->v == CANCELLED)
    violation("timer.cancel: a timeout call for timer %llu after its cancel succeeded",
              (unsigned long long)id);
  if (!e->w) sh_simmodeltab_del(e);
}

/* A timer's node is freed: a one-shot's event came, or never will
 * (cancelled before it fired); a periodic timer was cancelled. Forgotten,
 * so that a run's timers do not fill the table: a tick of a periodic timer
 * still on its way is refused by the runtime (its timer is not found), and
 * one that got through would fail timer.once instead of timer.cancel. */
static void timer_gone(uintptr_t h, uint64_t id, uint64_t actors) {
  if (!actors) return; /* an ask's timeout: its future's */
  sh_simmodel_entry *e = sh_simmodeltab_find(K_TIMER, h, id);
  if (e != NULL) sh_simmodeltab_del(e);
}

/* ---- a house's run --------------------------------------------------------- */

#define EVENT_BOX 4u   /* SH_BOX_EVENT (actor/house.h): last, apart */
#define EVENT_SHARE 16 /* SH_EVENT_SHARE (actor/dispatch.h) */

/* The key of mailbox i's house: its mailboxes' first head. */
static uintptr_t house_of(uintptr_t box, uint64_t i) { return box - i * sizeof(void *); }

/* Counted messages not yet taken in the mailbox, as the runner reckons
 * them (mailbox.h sh_mailbox_size: a take may come before its count). */
static int64_t counted(uintptr_t box) {
  const sh_simmodel_entry *b = sh_simmodeltab_find(K_BOX, box, 0);
  return b == NULL ? 0 : (int64_t)b->y - (int64_t)b->x;
}


/* The run of house key hk, if one is under way on the running fiber. */
static run *run_of(uintptr_t hk) {
  uint32_t f = sh_simrun_cur();
  SH_ASSERT(f < SH_SIM_MAX_FIBERS);
  return runs[f].hk == hk && hk != 0 ? &runs[f] : NULL;
}

/* Whether no load read a stale value since the run's last note: what the
 * runner looked at since then is what the model holds. */
static int exact(run *r) {
  uint32_t now = (uint32_t)sh_simmem_stale_reads();
  int same = r->stale == now;
  r->stale = now;
  return same;
}

static void run_begin(uintptr_t hk, uint64_t budget) {
  uint32_t f = sh_simrun_cur();
  SH_ASSERT(f < SH_SIM_MAX_FIBERS && runs[f].hk == 0); /* runs of a fiber do not nest */
  runs[f] = (run){.hk = hk, .budget = budget, .stale = (uint32_t)sh_simmem_stale_reads()};
  /* Behind a push half-way, counted events are out of reach (mailbox.c). */
  uintptr_t ebox = hk + EVENT_BOX * sizeof(void *);
  const sh_simmodel_entry *eb = sh_simmodeltab_find(K_BOX, ebox, 0);
  runs[f].ev0 = eb != NULL && eb->z == 0 ? counted(ebox) : 0;
  runs[f].ew0 = eb != NULL ? eb->w : 0;
}

static void run_look(uintptr_t hk, uint64_t end, uint64_t box) {
  run *r = run_of(hk);
  SH_ASSERT(r != NULL && end <= EVENT_BOX && box <= EVENT_BOX);
  if (!exact(r)) return;
  uint64_t upto = box < end ? box : end;
  for (uint64_t b = 0; b < upto; b++)
    if (!(r->stuck & 1u << b) && counted(hk + b * sizeof(void *)) > 0)
      violation("run.order: a run takes from its %s mailbox while its %s mailbox, above it, "
                "holds a counted message", box < EVENT_BOX ? box_names[box] : "event",
                box_names[b]);
}

static void run_stuck(uintptr_t box, uint64_t i) {
  run *r = run_of(house_of(box, i));
  SH_ASSERT(r != NULL && i < EVENT_BOX);
  r->stuck |= 1u << i;
  if (!exact(r)) return;
  const sh_simmodel_entry *b = sh_simmodeltab_find(K_BOX, box, 0);
  if (b == NULL || b->z == 0 || counted(box) <= 0)
    violation("run.stuck: a run passed over its %s mailbox as held up by a push half-way, "
              "with %s", box_names[i], b == NULL || counted(box) <= 0 ? "nothing counted"
                                                                     : "no push half-way");
}

static void run_count(run *r, uint64_t ran) {
  r->n += ran;
  if (r->n > r->budget)
    violation("run.budget: a run handled %llu messages and deferred stacks, max_per_run %llu",
              (unsigned long long)r->n, (unsigned long long)r->budget);
}

static void run_ready(uintptr_t hk, uint64_t ran) {
  run *r = run_of(hk);
  SH_ASSERT(r != NULL);
  if (r->ready_ran || r->requests)
    violation("run.order: a run's deferred stacks ran %s", r->ready_ran ? "twice" :
              "after a request of the run");
  r->ready_ran = true;
  run_count(r, ran);
}

static void run_take(uintptr_t box, uint64_t i) {
  run *r = run_of(house_of(box, i));
  if (r == NULL) return; /* a bridge's, a shutdown's, a retired house's */
  exact(r);
  if (i != EVENT_BOX) {
    r->requests |= i == 2 || i == 3; /* SH_BOX_ASK, SH_BOX_NOTICE */
    run_count(r, 1);
    return;
  }
  uint64_t left = r->budget - r->n, share = left > EVENT_SHARE ? left : EVENT_SHARE;
  if (++r->events > share)
    violation("run.budget: a run took %llu events, its share %llu",
              (unsigned long long)r->events, (unsigned long long)share);
}

static void run_end(uintptr_t hk) {
  run *r = run_of(hk);
  SH_ASSERT(r != NULL);
  r->hk = 0;
  /* Events always get their share, whatever the requests left of the
   * budget: those there from the run's start, up to the share, are taken;
   * but the last of them, if a push began meanwhile (a take of the last
   * message waits for a push half-way behind it: mailbox.c). */
  const sh_simmodel_entry *eb = sh_simmodeltab_find(K_BOX, hk + EVENT_BOX * sizeof(void *), 0);
  int64_t reach = eb != NULL && eb->w != r->ew0 ? r->ev0 - 1 : r->ev0;
  int64_t due = reach < EVENT_SHARE ? reach : EVENT_SHARE;
  if (exact(r) && (int64_t)r->events < due)
    violation("run.events: a run took %llu events while %lld were in its event mailbox from its "
              "start (each run takes up to %d)",
              (unsigned long long)r->events, (long long)r->ev0, EVENT_SHARE);
}

/* ---- generations and sh_stop -------------------------------------------------- */

static void life_begins(uintptr_t hk, uint64_t gen) {
  sh_simmodel_entry *e = get(K_LIFE, hk, 0);
  e->v = gen;
  e->w = 0;
}

static void life_stops(uintptr_t hk, uint64_t gen) {
  sh_simmodel_entry *e = sh_simmodeltab_find(K_LIFE, hk, 0);
  if (e != NULL && e->v == gen) e->w = 1;
}

static void decide(uintptr_t hk, uint64_t tag, uint64_t how) {
  SH_ASSERT(how == 0 || how == SH_MODEL_REFUSED);
  run *r = run_of(hk);
  const sh_simmodel_entry *e = sh_simmodeltab_find(K_LIFE, hk, 0);
  /* Outside a run: a retired house's refusals (dispatch.c run_vacant). */
  if (r == NULL || !exact(r) || e == NULL) return;
  int gone = tag != SH_MODEL_BATCH && tag != e->v;
  int live = !e->w && !gone;
  const char *what = tag == SH_MODEL_BATCH ? "a batch" : "a request";
  if (!(how & SH_MODEL_REFUSED) && !live)
    violation("stop.handled: %s of generation %llu handed to its handler, %s", what,
              (unsigned long long)(gone ? tag : e->v),
              gone ? "an earlier generation" : "stopped");
  if ((how & SH_MODEL_REFUSED) && live)
    violation("stop.refused: %s refused while generation %llu lives and is not stopped", what,
              (unsigned long long)e->v);
}

/* ---- the seam --------------------------------------------------------------- */

void sh_plat_model_note(sh_model_event ev, const volatile void *a, uintptr_t b, uint64_t c) {
  uintptr_t p = (uintptr_t)a;
  SH_ASSERT(p != 0);
  events++;
  sh_simmodeltab_room();
  switch (ev) {
  case SH_MODEL_BOX_NEW: box_new(p); break;
  case SH_MODEL_PUSH: push(p, b, c); break;
  case SH_MODEL_TAKE: take(p, b, c); break;
  case SH_MODEL_LINK: linked(p, b); break;
  case SH_MODEL_COUNT: count(p); break;
  case SH_MODEL_RUN: run_begin(p, b); break;
  case SH_MODEL_LOOK: run_look(p, b, c); break;
  case SH_MODEL_STUCK: run_stuck(p, c); break;
  case SH_MODEL_READY_RAN: run_ready(p, b); break;
  case SH_MODEL_RUN_END: run_end(p); break;
  case SH_MODEL_LIVE: life_begins(p, b); break;
  case SH_MODEL_STOP: life_stops(p, b); break;
  case SH_MODEL_DECIDE: decide(p, b, c); break;
  case SH_MODEL_ASK: ask(p, b); break;
  case SH_MODEL_ANSWER: answer(p, b); break;
  case SH_MODEL_ANSWER_IN: answer_in(p, b, c); break;
  case SH_MODEL_ASK_WITHDRAWN: withdrawn(p, b); break;
  case SH_MODEL_TIMER_START: timer_start(p, b, c); break;
  case SH_MODEL_TIMER_CANCEL: timer_cancel(p, b); break;
  case SH_MODEL_TIMER_CALL: timer_call(p, b); break;
  case SH_MODEL_TIMER_GONE: timer_gone(p, b, c); break;
  case SH_MODEL_TIMER_ARM:
  case SH_MODEL_TIMER_FIRE:
  case SH_MODEL_TIMER_DISARM: sh_simmodel_timer(ev, p, c); break;
  case SH_MODEL_GATE_NEW:
  case SH_MODEL_SLOT_TAKE:
  case SH_MODEL_SLOT_GIVE:
  case SH_MODEL_WAIT_QUEUE:
  case SH_MODEL_WAIT_POP:
  case SH_MODEL_WAIT_CANCEL:
  case SH_MODEL_WAIT_ENTER:
  case SH_MODEL_WAIT_ADMIT:
  case SH_MODEL_TRY:
  case SH_MODEL_TRY_REFUSED: sh_simmodel_gate(ev, p, b, c); break;
  case SH_MODEL_IFL_INIT:
  case SH_MODEL_IFL_ADD:
  case SH_MODEL_IFL_START:
  case SH_MODEL_IFL_FINISH:
  case SH_MODEL_IFL_RELEASE:
  case SH_MODEL_IFL_MATCH:
  case SH_MODEL_IFL_GONE: sh_simmodel_ifl(ev, p, b, c); break;
  default: SH_ASSERT(0 && "an event the model does not know");
  }
}
