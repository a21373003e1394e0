/*
 * The reference model's rules of bounded mailboxes (model.c has the
 * others and the list): gate.capacity, gate.slot, gate.fifo, gate.try.
 * A gate's entry counts the slots taken, the places given in its queue of
 * waiting senders, and the senders entering it (counted as waiting by the
 * runtime before they are admitted at once or queued).
 */
#include "modelrules.h"

#include <stddef.h>

#include "base/check.h"
#include "memmodel.h"
#include "run.h"

#define get sh_simmodel_get
#define violation sh_simmodel_violation

static void slot_take(uintptr_t g, uint64_t cap) {
  sh_simmodel_entry *e = get(SH_SIMMODEL_K_GATE, g, 0);
  if (++e->v > cap)
    violation("gate.capacity: %llu slots taken of a bounded mailbox of capacity %llu",
              (unsigned long long)e->v, (unsigned long long)cap);
}

static void slot_give(uintptr_t g) {
  sh_simmodel_entry *e = sh_simmodeltab_find(SH_SIMMODEL_K_GATE, g, 0);
  if (e == NULL || e->v == 0)
    violation("gate.slot: a slot given back to a bounded mailbox that had none taken");
  e->v--;
}

static void wait_queue(uintptr_t g, uintptr_t w) {
  sh_simmodel_entry *ge = get(SH_SIMMODEL_K_GATE, g, 0);
  if (ge->y > 0) ge->y--; /* it entered first (WAIT_ENTER): now it is queued */
  uint64_t place = ge->x++;
  sh_simmodel_entry *we = get(SH_SIMMODEL_K_WAITER, w, 0);
  we->v = g;
  we->w = place;
  get(SH_SIMMODEL_K_WAITQ, g, place)->v = w;
}

/* The first place still queued at gate entry ge. Bounded by the places
 * given (x): each turn passes one left by a cancel. */
static uint64_t first_queued(sh_simmodel_entry *ge, uintptr_t g) {
  while (ge->w < ge->x && sh_simmodeltab_find(SH_SIMMODEL_K_WAITQ, g, ge->w) == NULL) ge->w++;
  return ge->w;
}

static void wait_leave(uintptr_t g, uintptr_t w, int popped) {
  sh_simmodel_entry *we = sh_simmodeltab_find(SH_SIMMODEL_K_WAITER, w, 0);
  if (we == NULL || we->v != g)
    violation("gate.fifo: a waiter %s that is not queued at that bounded mailbox",
              popped ? "popped" : "cancelled");
  uint64_t place = we->w;
  sh_simmodeltab_del(we);
  if (popped) {
    sh_simmodel_entry *ge = sh_simmodeltab_find(SH_SIMMODEL_K_GATE, g, 0);
    SH_ASSERT(ge != NULL); /* made by the waiter's queueing */
    uint64_t first = first_queued(ge, g);
    if (place != first)
      violation("gate.fifo: the waiter queued #%llu popped while #%llu waits before it",
                (unsigned long long)place + 1, (unsigned long long)first + 1);
  }
  sh_simmodel_entry *q = sh_simmodeltab_find(SH_SIMMODEL_K_WAITQ, g, place);
  SH_ASSERT(q != NULL && q->v == w); /* made with the waiter's entry */
  sh_simmodeltab_del(q);
}

static void gate_new(uintptr_t g) {
  sh_simmodel_entry *e = get(SH_SIMMODEL_K_GATE, g, 0);
  e->v = e->w = e->x = 0;
  e->y = 0;
}

/* A sender entering the gate (between WAIT_ENTER and its admission or its
 * queueing) counts as waiting: a _try meanwhile may be refused. */
static void wait_enter(uintptr_t g, int delta) {
  sh_simmodel_entry *e = get(SH_SIMMODEL_K_GATE, g, 0);
  SH_ASSERT(delta > 0 || e->y > 0); /* an admission or queueing follows an entry */
  e->y = delta > 0 ? e->y + 1 : e->y - 1;
}

/* A _try's look is judged only if it read nothing stale: a load may miss a
 * waiter's leaving (a relaxed decrement), as it may on a weakly ordered
 * machine, and the refusal is then one the model cannot tell from a race. */
static sh_simmodel_entry *try_of_fiber(void) {
  return get(SH_SIMMODEL_K_TRY, (uintptr_t)sh_simrun_cur() + 1, 0);
}

static void try_begin(void) { try_of_fiber()->v = sh_simmem_stale_reads(); }

static void try_refused(uintptr_t g, uint64_t cap) {
  if (try_of_fiber()->v != sh_simmem_stale_reads()) return;
  sh_simmodel_entry *e = get(SH_SIMMODEL_K_GATE, g, 0);
  if (e->v < cap && e->y == 0 && first_queued(e, g) == e->x)
    violation("gate.try: a _try refused while %llu of %llu slots are taken and no sender waits",
              (unsigned long long)e->v, (unsigned long long)cap);
}

void sh_simmodel_gate(sh_model_event ev, uintptr_t g, uintptr_t b, uint64_t c) {
  switch (ev) {
  case SH_MODEL_GATE_NEW: gate_new(g); break;
  case SH_MODEL_SLOT_TAKE: slot_take(g, c); break;
  case SH_MODEL_SLOT_GIVE: slot_give(g); break;
  case SH_MODEL_WAIT_QUEUE: wait_queue(g, b); break;
  case SH_MODEL_WAIT_POP: wait_leave(g, b, 1); break;
  case SH_MODEL_WAIT_CANCEL: wait_leave(g, b, 0); break;
  case SH_MODEL_WAIT_ENTER: wait_enter(g, 1); break;
  case SH_MODEL_WAIT_ADMIT: wait_enter(g, -1); break;
  case SH_MODEL_TRY: try_begin(); break;
  case SH_MODEL_TRY_REFUSED: try_refused(g, c); break;
  default: SH_ASSERT(0 && "not a bounded mailbox's event");
  }
}
