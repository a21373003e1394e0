/*
 * The outside-thread bridge: sends that may block for room, and the three
 * ways to receive (Kilim's get-b, get-nb and a timed get).
 *
 * The sleep handshake. The bridge's thread resets its event, stores
 * sleeping = 1 (seq_cst) and then looks (seq_cst) for what it waits for: an
 * answer counted in its mailboxes, its waiter popped, the system drained. A
 * waker first makes that visible (the mailbox count, the waiter's state, the
 * drained flag: each a seq_cst store) and then reads `sleeping` (seq_cst).
 * One of the two sees the other: the thread does not sleep, or the waker
 * sets the event. The event stays set until the next reset, so a set that
 * lands between the look and the wait is not lost.
 */
#include "bridge.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "system.h"
#include "worker.h"

static const sh_actor_class bridge_class = {.name = "sh_bridge", .size = sizeof(sh_actor)};

static sh_bridge *bridge_alloc(sh_system *sys) {
  sh_bridge *b = aligned_alloc(64, (sizeof(sh_bridge) + 63) & ~(size_t)63);
  if (b == NULL) return NULL;
  memset(b, 0, sizeof(*b));
  if (sh_plat_event_new(&b->ev) != 0) {
    free(b);
    return NULL;
  }
  sh_house_init(&b->house, sys, &bridge_class, SH_OUTSIDE);
  atomic_init(&b->sleeping, 0);
  atomic_init(&b->w.state, SH_WAITER_IDLE);
  return b;
}

static void bridge_destroy(sh_bridge *b) {
  for (int i = 0; i < SH_BOXES; i++) {
    sh_msg *m;
    while ((m = sh_mailbox_take(&b->house.mb[i])) != NULL) sh_msg_free(m);
  }
  sh_plat_event_free(b->ev);
  free(b);
}

/* Opens b for a new user; under the registry lock, which is what hands a
 * bridge between its thread and the registry (sh_bridge_shutdown drains
 * closed ones under it). */
static void bridge_open(sh_bridge *b) {
  /* Replies to the previous user's asks may still come: they are older. */
  b->id_floor = b->house.next_ask_id;
  b->pending = 0;
  b->open = true;
}

/* Under the registry lock: a closed bridge to reuse, else `fresh`
 * registered, else NULL. */
static sh_bridge *bridge_take(sh_system *sys, sh_bridge *fresh) {
  sh_bridge *b = sys->bridge_free;
  if (b != NULL) {
    sys->bridge_free = b->free_next;
    return b;
  }
  if (fresh != NULL) {
    fresh->house.seq = sys->nhouses++;
    fresh->all_next = sys->bridges;
    sys->bridges = fresh;
  }
  return fresh;
}

/* A closed bridge for reuse, or a new one registered with the system;
 * opened. -ESHUTDOWN once shutdown began (decided under the lock). */
static int bridge_get(sh_system *sys, sh_bridge **out) {
  sh_bridge *fresh = NULL;
  /* Two passes at most: the second has a new bridge in hand. */
  for (int pass = 0; pass < 2; pass++) {
    sh_spin_lock(&sys->reg_lock);
    int rc = sh_system_is_shut(sys) ? -ESHUTDOWN : 0;
    sh_bridge *b = rc == 0 ? bridge_take(sys, fresh) : NULL;
    if (b != NULL) bridge_open(b);
    sh_spin_unlock(&sys->reg_lock);
    if (b == fresh) fresh = NULL; /* registered (or both NULL) */
    if (b != NULL || rc != 0) {
      if (fresh != NULL) bridge_destroy(fresh); /* a closed one came back meanwhile */
      *out = b;
      return rc;
    }
    fresh = bridge_alloc(sys);
    if (fresh == NULL) return -ENOMEM;
  }
  assert(!"the second pass always has a bridge");
  return -ENOMEM;
}

int sh_bridge_new(sh_system *sys, sh_bridge **out) {
  /* A worker has stacks; blocking one would stall every actor it owns. */
  if (sys == NULL || out == NULL || sh_worker_current() != NULL) return -EINVAL;
  sh_bridge *b;
  int rc = bridge_get(sys, &b);
  if (rc == 0) *out = b;
  return rc;
}

/* A message nobody will receive: the bridge closed, or it answers an ask
 * of the bridge's previous user. */
static void drop_answer(sh_bridge *b, sh_msg *m) {
  sh_count(b->house.sys, SH_C_REPLIES_UNKNOWN);
  sh_msg_free(m);
}

/* Drops every answer that has arrived; the bridge's thread (or the
 * shutdown, alone) is the consumer. Bounded by the messages counted in. */
static void drop_all(sh_bridge *b) {
  for (int box = SH_BOX_REPLY; box <= SH_BOX_EXCEPTION; box++) {
    sh_msg *m;
    while ((m = sh_mailbox_take(&b->house.mb[box])) != NULL) drop_answer(b, m);
  }
}

void sh_bridge_free(sh_bridge *b) {
  if (b == NULL) return;
  assert(b->open);
  sh_system *sys = b->house.sys;
  drop_all(b);
  /* Asks still out are given up: resolved here, their replies dropped. */
  sh_count_n(sys, SH_C_ASKS_RESOLVED, b->pending);
  b->pending = 0;
  /* From here the registry owns it (and shutdown may drain it). */
  sh_spin_lock(&sys->reg_lock);
  b->open = false;
  b->free_next = sys->bridge_free;
  sys->bridge_free = b;
  sh_spin_unlock(&sys->reg_lock);
}

uint32_t sh_bridge_pending(const sh_bridge *b) { return b != NULL ? b->pending : 0; }

void sh_bridge_wake(sh_bridge *b) {
  /* seq_cst: the load half of the waker's side (file comment); loading
   * before the exchange keeps a wake of a thread that is not asleep free of
   * writes. */
  if (atomic_load_explicit(&b->sleeping, memory_order_seq_cst) == 0) return;
  if (atomic_exchange_explicit(&b->sleeping, 0, memory_order_seq_cst) == 0) return;
  sh_plat_event_set(b->ev);
}

/* ---- waiting --------------------------------------------------------- */

static uint64_t deadline_of(int64_t timeout_ms) {
  if (timeout_ms < 0) return SH_PLAT_NO_DEADLINE;
  uint64_t now = sh_plat_now_ns();
  uint64_t ns = (uint64_t)timeout_ms * 1000000u;
  return ns >= SH_PLAT_NO_DEADLINE - now ? SH_PLAT_NO_DEADLINE - 1 : now + ns;
}

typedef bool (*ready_fn)(sh_bridge *b);

/* Sleeps until ready(b) may have become true, or the deadline: 0 or
 * -ETIMEDOUT (the caller looks again either way). */
static int bridge_sleep(sh_bridge *b, uint64_t deadline, ready_fn ready) {
  sh_plat_event_reset(b->ev);
  /* seq_cst: the store half of the thread's side (file comment). */
  atomic_store_explicit(&b->sleeping, 1, memory_order_seq_cst);
  SH_YIELD("bridge.sleep"); /* a waker may publish here */
  if (ready(b)) {
    /* relaxed: nobody was asked to wake us; a waker that already took the
     * flag only sets the event, which the next reset clears. */
    atomic_store_explicit(&b->sleeping, 0, memory_order_relaxed);
    /* What is ready may be a message the mailbox cannot hand out yet: a
     * later producer swapped the head but has not linked (mailbox.c). Let
     * it finish. */
    sh_plat_yield_cpu();
    return 0;
  }
  int rc = sh_plat_event_wait_until(b->ev, deadline);
  atomic_store_explicit(&b->sleeping, 0, memory_order_relaxed);
  return rc;
}

/* ---- sending --------------------------------------------------------- */

static bool decided(int state) { return state == SH_WAITER_ADMITTED || state == SH_WAITER_REFUSED; }

static bool waiter_decided(sh_bridge *b) {
  /* seq_cst: the load half of the thread's side (file comment). */
  return decided(atomic_load_explicit(&b->w.state, memory_order_seq_cst));
}

/* The target's bounded mailbox is full: queue the bridge's waiter and sleep
 * until the gate admits or refuses it, or the deadline. */
static int wait_for_room(sh_bridge *b, sh_gate *g, sh_house *t, sh_box box, sh_msg *m,
                         uint64_t deadline) {
  sh_waiter *w = &b->w;
  w->msg = m;
  w->target = t;
  w->box = box;
  w->bridge = b;
  w->sender = NULL;
  int rc = sh_gate_enter(g, w);
  if (rc == 0) sh_house_put(t, box, m);
  if (rc != -EINPROGRESS) return rc;
  /* Bounded by the deadline, then by the gate carrying out a verdict it
   * already took (a few instructions): each turn sleeps or finds it. */
  for (;;) {
    int s = atomic_load_explicit(&w->state, memory_order_seq_cst);
    if (s == SH_WAITER_ADMITTED) return 0; /* the gate put m for us */
    if (s == SH_WAITER_REFUSED) return -ESHUTDOWN;
    if (bridge_sleep(b, deadline, waiter_decided) != -ETIMEDOUT) continue;
    if (sh_gate_cancel(g, w)) {
      sh_gate_refused(g);
      return -ETIMEDOUT;
    }
    /* Too late to take it back: popped, its verdict on the way. */
    sh_plat_yield_cpu();
  }
}

static int bridge_send(sh_bridge *b, const sh_addr *to, sh_msg *m, sh_box box,
                       int64_t timeout_ms) {
  sh_house *t = sh_addr_pick(to);
  /* acquire: a fast refusal only; a send that misses a concurrent stop is
   * refused by the gate or dropped (counted) by the stopped house. */
  if (atomic_load_explicit(&t->stopped, memory_order_acquire)) return -ESHUTDOWN;
  sh_gate *g = t->gate[box];
  int rc = g != NULL ? sh_gate_try(g) : 0;
  if (rc == 0) {
    sh_house_put(t, box, m);
    return 0;
  }
  if (rc == -ESHUTDOWN) return rc;
  if (timeout_ms == SH_NOWAIT) {
    sh_gate_refused(g);
    return -EAGAIN;
  }
  return wait_for_room(b, g, t, box, m, deadline_of(timeout_ms));
}

/* A bridge blocks its thread: never a worker's, which runs actors. */
static bool bridge_usable(const sh_bridge *b) {
  return b != NULL && b->open && sh_worker_current() == NULL;
}

static bool usable(const sh_bridge *b, const sh_addr *to, const sh_msg *m, sh_msg_kind kind) {
  return bridge_usable(b) && to != NULL && m != NULL && m->type->kind == kind;
}

int sh_bridge_notice(sh_bridge *b, const sh_addr *to, sh_msg *m, int64_t timeout_ms) {
  if (!usable(b, to, m, SH_NOTICE)) return -EINVAL;
  m->sender = NULL;
  m->id = 0;
  return bridge_send(b, to, m, SH_BOX_NOTICE, timeout_ms);
}

int sh_bridge_ask(sh_bridge *b, const sh_addr *to, sh_msg *m, int64_t timeout_ms,
                  uint64_t *ticket) {
  if (!usable(b, to, m, SH_ASK)) return -EINVAL;
  sh_house *h = &b->house;
  uint64_t id = ++h->next_ask_id;
  m->sender = h;
  m->id = id;
  const char *name = m->type->name; /* m may be handled and freed once sent */
  (void)name;                       /* traced in the simulator only */
  int rc = bridge_send(b, to, m, SH_BOX_ASK, timeout_ms);
  if (rc != 0) return rc;
  b->pending++;
  sh_count(h->sys, SH_C_ASKS);
  SH_TRACE(SH_TRACE_ASK, h->seq, name, SH_TRACE_FLOW(h->seq, id));
  if (ticket != NULL) *ticket = id;
  return 0;
}

/* ---- receiving ------------------------------------------------------- */

static bool answer_ready(sh_bridge *b) {
  /* seq_cst (both): the load half of the thread's side (file comment). */
  return sh_mailbox_nonempty(&b->house.mb[SH_BOX_REPLY]) ||
         sh_mailbox_nonempty(&b->house.mb[SH_BOX_EXCEPTION]) ||
         atomic_load_explicit(&b->house.sys->drained, memory_order_seq_cst);
}

/* The next answer to one of this user's asks, or NULL. Bounded: each
 * stale answer dropped is one fewer in the mailboxes. */
static sh_msg *take_answer(sh_bridge *b) {
  for (;;) {
    sh_msg *m = sh_mailbox_take(&b->house.mb[SH_BOX_REPLY]);
    if (m == NULL) m = sh_mailbox_take(&b->house.mb[SH_BOX_EXCEPTION]);
    if (m == NULL || m->id > b->id_floor) return m;
    drop_answer(b, m);
  }
}

static void hand_over(sh_bridge *b, sh_msg *m, sh_bridge_reply *out) {
  sh_house *h = &b->house;
  out->ticket = m->id;
  SH_TRACE(SH_TRACE_REPLY, h->seq, m->type->name, SH_TRACE_FLOW(h->seq, m->id));
  if (m->type == &sh_exception_type) {
    out->error = m->error < 0 ? m->error : -EPROTO;
    out->msg = NULL;
    sh_msg_free(m);
  } else {
    out->error = 0;
    out->msg = m;
  }
  assert(b->pending > 0);
  b->pending--;
  sh_count(h->sys, SH_C_DELIVERED);
  sh_count(h->sys, SH_C_ASKS_RESOLVED);
}

int sh_bridge_recv(sh_bridge *b, int64_t timeout_ms, sh_bridge_reply *out) {
  if (!bridge_usable(b) || out == NULL) return -EINVAL;
  uint64_t deadline = deadline_of(timeout_ms);
  /* Bounded by the deadline: each turn hands over, gives up, or sleeps. */
  for (;;) {
    sh_msg *m = take_answer(b);
    if (m != NULL) {
      hand_over(b, m, out);
      return 0;
    }
    /* Nothing can come: waiting would be forever. */
    if (b->pending == 0) return -ENOMSG;
    /* seq_cst: see answer_ready. */
    if (atomic_load_explicit(&b->house.sys->drained, memory_order_seq_cst)) return -ESHUTDOWN;
    if (timeout_ms == SH_NOWAIT) return -EAGAIN;
    if (bridge_sleep(b, deadline, answer_ready) == -ETIMEDOUT && !answer_ready(b))
      return -ETIMEDOUT;
  }
}

/* ---- the system's end ------------------------------------------------ */

void sh_bridge_shutdown(sh_system *sys) {
  /* The closed bridges belong to the registry: take them all, so that this
   * is their mailboxes' only consumer (a bridge thread woken by this very
   * shutdown may be closing its own right now, or reopening one), and drop
   * their answers outside the lock (drop hooks are users' code). */
  sh_spin_lock(&sys->reg_lock);
  sh_bridge *closed = sys->bridge_free;
  sys->bridge_free = NULL;
  sh_spin_unlock(&sys->reg_lock);
  sh_bridge *last = NULL;
  for (sh_bridge *b = closed; b != NULL; b = b->free_next) {
    drop_all(b);
    last = b;
  }
  if (last != NULL) {
    sh_spin_lock(&sys->reg_lock);
    last->free_next = sys->bridge_free;
    sys->bridge_free = closed;
    sh_spin_unlock(&sys->reg_lock);
  }
  /* `shut` was set under the lock before this: no bridge joins the list any
   * more, so it can be walked without the lock. Bounded by the bridges. */
  for (sh_bridge *b = sys->bridges; b != NULL; b = b->all_next) sh_bridge_wake(b);
}

void sh_bridge_destroy_all(sh_system *sys) {
  sh_bridge *b = sys->bridges;
  while (b != NULL) {
    sh_bridge *next = b->all_next;
    bridge_destroy(b);
    b = next;
  }
  sys->bridges = NULL;
  sys->bridge_free = NULL;
}
