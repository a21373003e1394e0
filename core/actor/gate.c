/*
 * Admission to a bounded mailbox: slots, the waiters' FIFO, hand-off.
 *
 * The no-lost-wakeup handshake. A sender about to queue counts itself in
 * `nwaiters` (seq_cst) and then looks for a free slot (seq_cst loads of
 * `used`); the actor gives a slot back (seq_cst decrement of `used`) and then
 * reads `nwaiters` (seq_cst). Under sequential consistency one of them sees
 * the other: the sender finds the slot and admits itself, or the actor sees
 * the sender and hands the slot over under the lock, where the sender, if it
 * did not admit itself, is already queued. Both paths admit under the lock,
 * so a slot is never given twice.
 *
 * Invariant: while a waiter is queued, every slot is taken (it queued
 * because none was free, and from then on a freed slot goes to a waiter
 * first). So a sender that finds a free slot with no lock held overtakes
 * nobody -- and fast senders also step aside when they see waiters counted.
 */
#include "actor/gate.h"

#include "base/atomic.h"

#include <fiu-local.h>

#include "base/faults.h"
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/model.h"
#include "mem/msg.h"

void sh_waiter_drop(sh_msg *m) {
  sh_waiter *w = (sh_waiter *)m;
  sh_msg_free(w->msg);
  w->msg = NULL;
}

sh_gate *sh_gate_new(uint32_t cap, uint32_t gen) {
  SH_ASSERT(cap >= 1 && cap <= SH_MAX_CAPACITY);
  sh_fault_return_on("sh/gate/new", NULL);
  sh_gate *g = aligned_alloc(64, (sizeof(sh_gate) + 63) & ~(size_t)63);
  if (g == NULL) return NULL;
  memset(g, 0, sizeof(*g));
  sh_atomic_init(&g->cap, cap);
  g->gen = gen;
  sh_atomic_init(&g->used, 0);
  sh_atomic_init(&g->nwaiters, 0);
  sh_spin_init(&g->lock);
  sh_atomic_init(&g->closed, false);
  sh_list_init(&g->fifo);
  sh_atomic_init(&g->queued, 0);
  sh_atomic_init(&g->high_water, 0);
  sh_atomic_init(&g->suspended, 0);
  sh_atomic_init(&g->refused, 0);
  SH_MODEL_NOTE(SH_MODEL_GATE_NEW, g, 0, cap);
  return g;
}

void sh_gate_free(sh_gate *g) {
  SH_ASSERT(g == NULL || sh_list_empty(&g->fifo));
  free(g);
}

static uint32_t cap_of(const sh_gate *g) {
  return sh_atomic_load(&g->cap, memory_order_relaxed); /* see the field */
}

/* Bounded: a failed CAS saw another thread's higher mark, or failed
 * spuriously, which a weak CAS does only now and then (not a count: the
 * other threads' progress; the mark itself is checked). */
static void note_high_water(sh_gate *g, uint32_t used) {
  /* take_slot's count: at most the capacity, itself at most SH_MAX_CAPACITY. */
  SH_ASSERT(used >= 1 && used <= SH_MAX_CAPACITY);
  /* relaxed: a metric. */
  uint32_t hw = sh_atomic_load(&g->high_water, memory_order_relaxed);
  while (used > hw && !sh_atomic_cas_weak(&g->high_water, &hw, used,
                                                             memory_order_relaxed,
                                                             memory_order_relaxed)) {
  }
}

/* Takes a free slot. seq_cst: the loads are the sender's half of the
 * handshake (file comment). The loop retries only when another sender or
 * the actor moved `used` meanwhile. */
static bool take_slot(sh_gate *g) {
  uint32_t u = sh_atomic_load(&g->used, memory_order_seq_cst);
  uint32_t cap = cap_of(g);
  while (u < cap) {
    if (sh_atomic_cas_weak(&g->used, &u, u + 1, memory_order_seq_cst,
                                              memory_order_seq_cst)) {
      SH_MODEL_NOTE(SH_MODEL_SLOT_TAKE, g, 0, cap);
      note_high_water(g, u + 1);
      return true;
    }
  }
  /* u > cap only for slots that messages of an older generation still
   * hold after a reset lowered the capacity (sh_gate_reset): never more
   * than the greatest capacity, which is at most SH_MAX_CAPACITY. */
  SH_ASSERT(u <= SH_MAX_CAPACITY);
  return false;
}

/* Under the lock, where the flag is written. relaxed: the lock orders it. */
static bool is_closed_locked(const sh_gate *g) {
  return sh_atomic_load(&g->closed, memory_order_relaxed);
}

static bool is_closed(const sh_gate *g) {
  /* acquire: pairs with the release store in sh_gate_close; a sender woken
   * by the refusal that follows it sees the gate closed. */
  return sh_atomic_load(&g->closed, memory_order_acquire);
}

void sh_gate_reset(sh_gate *g, uint32_t cap, uint32_t gen) {
  SH_ASSERT(cap >= 1 && cap <= SH_MAX_CAPACITY);
  sh_spin_lock(&g->lock);
  SH_ASSERT(is_closed_locked(g) && sh_list_empty(&g->fifo));
  g->gen = gen;
  /* release: metrics of the new generation; a reader of the last one's
   * that loads one of these (acquire) knows its house was taken (addr.c). */
  sh_atomic_store(&g->cap, cap, memory_order_release);
  sh_atomic_store(&g->high_water, 0, memory_order_release);
  sh_atomic_store(&g->suspended, 0, memory_order_release);
  sh_atomic_store(&g->refused, 0, memory_order_release);
  /* release: see is_closed; the new actor is published after this. */
  sh_atomic_store(&g->closed, false, memory_order_release);
  sh_spin_unlock(&g->lock);
}

int sh_gate_try(sh_gate *g) {
  SH_DEBUG_ASSERT(cap_of(g) >= 1); /* a gate exists for a bounded mailbox only */
  if (is_closed(g)) return -ESHUTDOWN;
  SH_MODEL_NOTE(SH_MODEL_TRY, g, 0, 0);
  /* seq_cst: a sender that counted itself before us is served first. */
  if (sh_atomic_load(&g->nwaiters, memory_order_seq_cst) == 0) {
    SH_YIELD("gate.try");
    if (take_slot(g)) return 0;
  }
  SH_MODEL_NOTE(SH_MODEL_TRY_REFUSED, g, 0, cap_of(g));
  return -EAGAIN;
}

void sh_gate_refused(sh_gate *g) {
  sh_atomic_fetch_add(&g->refused, 1, memory_order_relaxed); /* relaxed: a metric */
}

static void fifo_append(sh_gate *g, sh_waiter *w) {
  /* Under the lock: only senders of the gate's own generation queue. */
  SH_ASSERT(w->gen == g->gen);
  sh_list_push_back(&g->fifo, &w->link);
  SH_MODEL_NOTE(SH_MODEL_WAIT_QUEUE, g, w, 0);
  /* release: a reader of the metrics that sees this waiter queued (acquire)
   * also sees it counted in `suspended`, which enter bumps first. */
  sh_atomic_fetch_add(&g->queued, 1, memory_order_release);
}

static void fifo_unlink(sh_gate *g, sh_waiter *w) {
  sh_list_remove(&w->link);
  uint32_t queued = sh_atomic_fetch_sub(&g->queued, 1, memory_order_relaxed); /* a metric */
  /* relaxed: under the lock, which orders it against the next enter. */
  uint32_t waiters = sh_atomic_fetch_sub(&g->nwaiters, 1, memory_order_relaxed);
  SH_ASSERT(queued > 0 && waiters >= queued); /* nwaiters counts every queued waiter */
}

int sh_gate_enter(sh_gate *g, sh_waiter *w) {
  /* Entered once: a queued waiter is in the FIFO until popped or cancelled. */
  SH_ASSERT(sh_atomic_load(&w->state, memory_order_relaxed) != SH_WAITER_QUEUED);
  sh_spin_lock(&g->lock);
  if (is_closed(g)) {
    sh_spin_unlock(&g->lock);
    return -ESHUTDOWN;
  }
  /* Reset for a later generation since the sender looked at its target
   * (sh_send_wait): that target is gone, though the gate is open. Decided
   * here, under the lock that a reset takes: the sender's look was one
   * scheduling point away, and a queued waiter of an older generation would
   * wait for the newer actor's room, then be told it was admitted. */
  if (g->gen != w->gen) {
    sh_spin_unlock(&g->lock);
    return -ESHUTDOWN;
  }
  /* seq_cst: the store half of the sender's side of the handshake. */
  sh_atomic_fetch_add(&g->nwaiters, 1, memory_order_seq_cst);
  SH_MODEL_NOTE(SH_MODEL_WAIT_ENTER, g, 0, 0);
  SH_YIELD("gate.enter"); /* an actor's release may land here */
  if (sh_list_empty(&g->fifo) && take_slot(g)) {
    sh_atomic_fetch_sub(&g->nwaiters, 1, memory_order_relaxed);
    SH_MODEL_NOTE(SH_MODEL_WAIT_ADMIT, g, 0, 0);
    sh_spin_unlock(&g->lock);
    return 0;
  }
  sh_atomic_fetch_add(&g->suspended, 1, memory_order_relaxed); /* before queued: see fifo_append */
  fifo_append(g, w);
  /* relaxed: the waiter's state is read by its own sender under this lock
   * (cancel) or after the verdict's store. */
  sh_atomic_store(&w->state, SH_WAITER_QUEUED, memory_order_relaxed);
  /* It stays counted in nwaiters until popped or cancelled (fifo_unlink). */
  sh_spin_unlock(&g->lock);
  return -EINPROGRESS;
}

bool sh_gate_cancel(sh_gate *g, sh_waiter *w) {
  sh_spin_lock(&g->lock);
  bool queued = sh_atomic_load(&w->state, memory_order_relaxed) == SH_WAITER_QUEUED;
  if (queued) {
    SH_ASSERT(sh_list_linked(&w->link)); /* a queued waiter is in the FIFO */
    fifo_unlink(g, w);
    SH_MODEL_NOTE(SH_MODEL_WAIT_CANCEL, g, w, 0);
    sh_atomic_store(&w->state, SH_WAITER_CANCELLED, memory_order_relaxed);
  }
  sh_spin_unlock(&g->lock);
  return queued;
}

/* Pops the first waiter; under the lock. From POPPED on its sender can no
 * longer cancel it (a bridge thread just keeps waiting for the verdict), so
 * the caller may read it outside the lock. */
static sh_waiter *pop_first(sh_gate *g) {
  sh_waiter *w = SH_LIST_ENTRY(sh_list_first(&g->fifo), sh_waiter, link);
  SH_ASSERT(sh_atomic_load(&w->state, memory_order_relaxed) == SH_WAITER_QUEUED);
  /* A gate queues only senders of its own generation, and a stop refuses
   * them all before the house can be reused: whoever a gate hands a slot to
   * or refuses is of its generation. */
  SH_INVARIANT(w->gen == g->gen);
  fifo_unlink(g, w);
  SH_MODEL_NOTE(SH_MODEL_WAIT_POP, g, w, 0);
  /* relaxed: the lock orders it against a cancel. */
  sh_atomic_store(&w->state, SH_WAITER_POPPED, memory_order_relaxed);
  return w;
}

sh_waiter *sh_gate_pop_admitted(sh_gate *g) {
  sh_spin_lock(&g->lock);
  sh_waiter *w = NULL;
  if (!is_closed(g) && !sh_list_empty(&g->fifo) && take_slot(g)) w = pop_first(g);
  sh_spin_unlock(&g->lock);
  /* Admitted into this generation's mailbox: a sender of its own. */
  SH_ASSERT(w == NULL || w->gen == g->gen);
  SH_SOMETIMES(w != NULL, "gate: a waiting sender admitted");
  return w;
}

bool sh_gate_release(sh_gate *g) {
  /* seq_cst: the actor's half of the handshake (file comment). */
  uint32_t was = sh_atomic_fetch_sub(&g->used, 1, memory_order_seq_cst);
  SH_ASSERT(was > 0); /* a take gives back a slot its admission took */
  SH_MODEL_NOTE(SH_MODEL_SLOT_GIVE, g, 0, 0);
  SH_YIELD("gate.release");
  return sh_atomic_load(&g->nwaiters, memory_order_seq_cst) > 0;
}

void sh_gate_close(sh_gate *g, uint32_t gen) {
  sh_spin_lock(&g->lock);
  /* Under the lock, nwaiters counts every queued waiter (fifo_unlink). */
  SH_ASSERT(sh_gate_queued(g) <= sh_atomic_load(&g->nwaiters, memory_order_relaxed));
  /* release: see is_closed. Under the lock: enter and pop_admitted decide
   * on it there. A stop of an older generation closes nothing. */
  if (g->gen == gen) sh_atomic_store(&g->closed, true, memory_order_release);
  sh_spin_unlock(&g->lock);
}

sh_waiter *sh_gate_pop_refused(sh_gate *g, uint32_t gen) {
  sh_spin_lock(&g->lock);
  sh_waiter *w = NULL;
  if (g->gen == gen) {
    SH_ASSERT(is_closed_locked(g));
    if (!sh_list_empty(&g->fifo)) w = pop_first(g);
  }
  sh_spin_unlock(&g->lock);
  return w;
}

uint32_t sh_gate_queued(const sh_gate *g) {
  return sh_atomic_load(&g->queued, memory_order_relaxed);
}

void sh_gate_stats(const sh_gate *g, sh_mailbox_stats *out) {
  /* acquire: see fifo_append, and for the metrics sh_gate_reset. */
  out->waiting = sh_atomic_load(&g->queued, memory_order_acquire);
  out->capacity = sh_atomic_load(&g->cap, memory_order_acquire);
  SH_ASSERT(out->capacity >= 1 && out->capacity <= SH_MAX_CAPACITY);
  out->depth = sh_atomic_load(&g->used, memory_order_relaxed);
  uint32_t hw = sh_atomic_load(&g->high_water, memory_order_acquire);
  if (hw > out->high_water) out->high_water = hw;
  out->suspended = sh_atomic_load(&g->suspended, memory_order_acquire);
  out->refused = sh_atomic_load(&g->refused, memory_order_acquire);
}
