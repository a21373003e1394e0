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
#include "gate.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "bridge.h"
#include "house.h"
#include "msg.h"

static void waiter_drop(sh_msg *m) {
  sh_waiter *w = (sh_waiter *)m;
  sh_msg_free(w->msg);
  w->msg = NULL;
}

const sh_msg_type sh_waiter_type = {"sh_waiter", sizeof(sh_waiter), SH_NOTICE, 0, waiter_drop};

sh_gate *sh_gate_new(uint32_t cap) {
  assert(cap >= 1 && cap <= SH_MAX_CAPACITY);
  sh_gate *g = aligned_alloc(64, (sizeof(sh_gate) + 63) & ~(size_t)63);
  if (g == NULL) return NULL;
  memset(g, 0, sizeof(*g));
  g->cap = cap;
  atomic_init(&g->used, 0);
  atomic_init(&g->nwaiters, 0);
  sh_spin_init(&g->lock);
  atomic_init(&g->closed, false);
  atomic_init(&g->queued, 0);
  atomic_init(&g->high_water, 0);
  atomic_init(&g->suspended, 0);
  atomic_init(&g->refused, 0);
  return g;
}

void sh_gate_free(sh_gate *g) {
  assert(g == NULL || g->head == NULL);
  free(g);
}

static void note_high_water(sh_gate *g, uint32_t used) {
  /* relaxed: a metric. Bounded: each failed CAS saw a higher mark. */
  uint32_t hw = atomic_load_explicit(&g->high_water, memory_order_relaxed);
  while (used > hw && !atomic_compare_exchange_weak_explicit(&g->high_water, &hw, used,
                                                             memory_order_relaxed,
                                                             memory_order_relaxed)) {
  }
}

/* Takes a free slot. seq_cst: the loads are the sender's half of the
 * handshake (file comment). The loop retries only when another sender or
 * the actor moved `used` meanwhile. */
static bool take_slot(sh_gate *g) {
  uint32_t u = atomic_load_explicit(&g->used, memory_order_seq_cst);
  while (u < g->cap) {
    if (atomic_compare_exchange_weak_explicit(&g->used, &u, u + 1, memory_order_seq_cst,
                                              memory_order_seq_cst)) {
      note_high_water(g, u + 1);
      return true;
    }
  }
  return false;
}

static bool is_closed(const sh_gate *g) {
  /* acquire: pairs with the release store in sh_gate_close; a sender woken
   * by the refusal that follows it sees the gate closed. */
  return atomic_load_explicit(&g->closed, memory_order_acquire);
}

int sh_gate_try(sh_gate *g) {
  if (is_closed(g)) return -ESHUTDOWN;
  /* seq_cst: a sender that counted itself before us is served first. */
  if (atomic_load_explicit(&g->nwaiters, memory_order_seq_cst) > 0) return -EAGAIN;
  SH_YIELD("gate.try");
  return take_slot(g) ? 0 : -EAGAIN;
}

void sh_gate_refused(sh_gate *g) {
  atomic_fetch_add_explicit(&g->refused, 1, memory_order_relaxed); /* relaxed: a metric */
}

static void fifo_append(sh_gate *g, sh_waiter *w) {
  w->next = NULL;
  w->prev = g->tail;
  if (g->tail != NULL)
    g->tail->next = w;
  else
    g->head = w;
  g->tail = w;
  /* release: a reader of the metrics that sees this waiter queued (acquire)
   * also sees it counted in `suspended`, which enter bumps first. */
  atomic_fetch_add_explicit(&g->queued, 1, memory_order_release);
}

static void fifo_unlink(sh_gate *g, sh_waiter *w) {
  if (w->prev != NULL)
    w->prev->next = w->next;
  else
    g->head = w->next;
  if (w->next != NULL)
    w->next->prev = w->prev;
  else
    g->tail = w->prev;
  w->prev = w->next = NULL;
  atomic_fetch_sub_explicit(&g->queued, 1, memory_order_relaxed); /* relaxed: a metric */
  /* relaxed: under the lock, which orders it against the next enter. */
  atomic_fetch_sub_explicit(&g->nwaiters, 1, memory_order_relaxed);
}

int sh_gate_enter(sh_gate *g, sh_waiter *w) {
  sh_spin_lock(&g->lock);
  if (is_closed(g)) {
    sh_spin_unlock(&g->lock);
    return -ESHUTDOWN;
  }
  /* seq_cst: the store half of the sender's side of the handshake. */
  atomic_fetch_add_explicit(&g->nwaiters, 1, memory_order_seq_cst);
  SH_YIELD("gate.enter"); /* an actor's release may land here */
  if (g->head == NULL && take_slot(g)) {
    atomic_fetch_sub_explicit(&g->nwaiters, 1, memory_order_relaxed);
    sh_spin_unlock(&g->lock);
    return 0;
  }
  atomic_fetch_add_explicit(&g->suspended, 1, memory_order_relaxed); /* before queued: see fifo_append */
  fifo_append(g, w);
  /* relaxed: the waiter's state is read by its own sender under this lock
   * (cancel) or after the pop's release store. */
  atomic_store_explicit(&w->state, SH_WAITER_QUEUED, memory_order_relaxed);
  /* It stays counted in nwaiters until popped or cancelled (fifo_unlink). */
  sh_spin_unlock(&g->lock);
  return -EINPROGRESS;
}

bool sh_gate_cancel(sh_gate *g, sh_waiter *w) {
  sh_spin_lock(&g->lock);
  bool queued = atomic_load_explicit(&w->state, memory_order_relaxed) == SH_WAITER_QUEUED;
  if (queued) {
    fifo_unlink(g, w);
    atomic_store_explicit(&w->state, SH_WAITER_CANCELLED, memory_order_relaxed);
  }
  sh_spin_unlock(&g->lock);
  return queued;
}

/* What a popped waiter needs done, copied under the lock: once its state
 * says popped, a bridge may reuse its waiter at once. */
typedef struct popped {
  sh_waiter *w;
  struct sh_bridge *bridge; /* NULL for a stack waiter */
  struct sh_house *target;
  int box;
  sh_msg *msg;
} popped;

/* Pops the first waiter; under the lock. From POPPED on, its sender can no
 * longer cancel it, and nobody else reads its FIFO links. */
static popped pop_first(sh_gate *g) {
  sh_waiter *w = g->head;
  fifo_unlink(g, w);
  popped p = {w, w->bridge, w->target, w->box, w->msg};
  /* relaxed: the lock orders it against a cancel; a bridge thread that
   * sees it just keeps waiting for the verdict. */
  atomic_store_explicit(&w->state, SH_WAITER_POPPED, memory_order_relaxed);
  return p;
}

/* Carries out a verdict outside the lock: the admitted message goes into
 * the mailbox first, then the sender hears of it (a bridge thread told
 * ADMITTED sends its next message after this one, never before). */
static void deliver(const popped *p, bool admitted) {
  sh_waiter_state verdict = admitted ? SH_WAITER_ADMITTED : SH_WAITER_REFUSED;
  if (p->bridge == NULL) {
    sh_waiter *w = p->w; /* ours until its return is put */
    if (admitted) {
      w->msg = NULL;
      sh_house_put(p->target, (sh_box)p->box, p->msg);
    }
    w->hdr.error = admitted ? 0 : -ESHUTDOWN;
    sh_house_put(w->sender, SH_BOX_EVENT, &w->hdr);
    return;
  }
  if (admitted) sh_house_put(p->target, (sh_box)p->box, p->msg);
  /* seq_cst: the waker's store in the bridge's sleep handshake (bridge.c).
   * The thread may reuse the waiter the moment it sees this: it is our last
   * touch of it. */
  atomic_store_explicit(&p->w->state, verdict, memory_order_seq_cst);
  sh_bridge_wake(p->bridge);
}

/* Gives free slots to waiters, first come first served. Bounded: each turn
 * admits one waiter into one of `cap` slots, or stops. */
static void hand_off(sh_gate *g) {
  for (uint32_t i = 0; i < g->cap; i++) {
    sh_spin_lock(&g->lock);
    if (is_closed(g) || g->head == NULL || !take_slot(g)) {
      sh_spin_unlock(&g->lock);
      return;
    }
    popped p = pop_first(g);
    sh_spin_unlock(&g->lock);
    deliver(&p, true);
  }
}

void sh_gate_release(sh_gate *g) {
  /* seq_cst: the actor's half of the handshake (file comment). */
  uint32_t was = atomic_fetch_sub_explicit(&g->used, 1, memory_order_seq_cst);
  assert(was > 0);
  (void)was;
  SH_YIELD("gate.release");
  if (atomic_load_explicit(&g->nwaiters, memory_order_seq_cst) > 0) hand_off(g);
}

void sh_gate_close(sh_gate *g) {
  sh_spin_lock(&g->lock);
  /* release: see is_closed. Under the lock: enter and hand_off decide on
   * it there. */
  atomic_store_explicit(&g->closed, true, memory_order_release);
  sh_spin_unlock(&g->lock);
}

void sh_gate_refuse(sh_gate *g) {
  assert(is_closed(g));
  /* Bounded: a closed gate queues no new waiter, so this ends with the ones
   * queued when it began. One at a time: a refused bridge waiter may be
   * reused the moment its state is stored. */
  for (;;) {
    sh_spin_lock(&g->lock);
    if (g->head == NULL) {
      sh_spin_unlock(&g->lock);
      return;
    }
    popped p = pop_first(g);
    sh_spin_unlock(&g->lock);
    deliver(&p, false);
  }
}

void sh_gate_stats(const sh_gate *g, sh_mailbox_stats *out) {
  /* acquire: see fifo_append; the others are relaxed, figures for a report. */
  out->waiting = atomic_load_explicit(&g->queued, memory_order_acquire);
  out->capacity = g->cap;
  out->depth = atomic_load_explicit(&g->used, memory_order_relaxed);
  uint32_t hw = atomic_load_explicit(&g->high_water, memory_order_relaxed);
  if (hw > out->high_water) out->high_water = hw;
  out->suspended = atomic_load_explicit(&g->suspended, memory_order_relaxed);
  out->refused = atomic_load_explicit(&g->refused, memory_order_relaxed);
}
