/*
 * The outside-thread bridge: sends that may block for room, and the three
 * ways to receive (blocking, non-blocking, and with a deadline). The
 * thread sleeps through its sleeper (sleeper.h): a reply's push, its
 * waiter's verdict and the end of the shutdown each wake it.
 */
#include "actor/bridge.h"

#include "base/atomic.h"

#include <fiu-local.h>

#include "base/faults.h"
#include <stdlib.h>
#include <string.h>

#include "actor/addr.h"
#include "base/check.h"
#include "base/model.h"
#include "mem/msg.h"
#include "actor/send.h"
#include "sched/system.h"
#include "time/timeout.h"
#include "sched/worker.h"

static const sh_actor_class bridge_class = {.name = "sh_bridge", .size = sizeof(sh_actor)};

static sh_bridge *bridge_alloc(sh_system *sys) {
  /* A bridge blocks its thread: never a worker's (sh_bridge_new). */
  SH_ASSERT(sys != NULL && sh_worker_current() == NULL);
  sh_fault_return_on("sh/bridge/new", NULL);
  sh_bridge *b = aligned_alloc(64, (sizeof(sh_bridge) + 63) & ~(size_t)63);
  if (b == NULL) return NULL;
  memset(b, 0, sizeof(*b));
  if (sh_sleeper_init(&b->sleeper) != 0) {
    free(b);
    return NULL;
  }
  sh_house_init(&b->house, sys, &bridge_class, SH_OUTSIDE);
  b->house.outside = &b->sleeper;
  sh_atomic_init(&b->w.state, SH_WAITER_IDLE);
  return b;
}

static void bridge_destroy(sh_bridge *b) {
  sh_house_free_messages(&b->house);
  sh_sleeper_destroy(&b->sleeper);
  free(b);
}

/* Opens b for a new user; under the registry lock, which is what hands a
 * bridge between its thread and the registry (sh_bridge_shutdown drains
 * closed ones under it). */
static void bridge_open(sh_bridge *b) {
  SH_ASSERT(!b->open); /* from the free list, or new */
  /* Replies to the previous user's asks may still come: they are older. */
  b->id_floor = b->house.next_ask_id;
  b->pending = 0;
  b->open = true;
}

/* Under the registry lock, once the caller found the system not shut: a
 * closed bridge to reuse, else `fresh` registered, else NULL. Not `shut`
 * read again here: shutdown stores it without the lock, so it may have
 * turned since the caller's look. What bounds sh_bridge_shutdown's walk is
 * that it takes this lock after that store: a take that saw `shut` false
 * and holds the lock joins the list before the walk begins. */
static sh_bridge *bridge_take(sh_system *sys, sh_bridge *fresh) {
  sh_bridge *b = sys->bridge_free;
  SH_ASSERT(fresh == NULL || !fresh->open);
  if (b != NULL) {
    SH_ASSERT(!b->open); /* the free list holds closed bridges (sh_bridge_free) */
    sys->bridge_free = b->free_next;
    return b;
  }
  if (fresh != NULL) {
    fresh->house.seq = sh_system_next_seq(sys);
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
  SH_ASSERT(!"the second pass always has a bridge");
  return -ENOMEM;
}

int sh_bridge_new(sh_system *sys, sh_bridge **out) {
  SH_FROM_USER();
  /* A worker has stacks; blocking one would stall every actor it owns. */
  if (sys == NULL || out == NULL || sh_worker_current() != NULL) return -EINVAL;
  sh_bridge *b;
  int rc = bridge_get(sys, &b);
  SH_ASSERT(rc != 0 || (b != NULL && b->open));
  if (rc == 0) *out = b;
  return rc;
}

/* A message nobody will receive: the bridge closed, or it answers an ask
 * of the bridge's previous user. */
static void drop_answer(sh_bridge *b, sh_msg *m) {
  SH_MODEL_NOTE(SH_MODEL_ANSWER_IN, &b->house, m->id, 0);
  sh_count(b->house.sys, SH_C_REPLIES_UNKNOWN);
  sh_msg_free(m);
}

/* Drops every answer that has arrived; the bridge's thread (or the
 * shutdown, alone) is the consumer. Bounded by the messages counted in,
 * which is not counted here: answers may still arrive meanwhile, each to
 * an ask this bridge made, so the asks made bound it. */
static void drop_all(sh_bridge *b) {
  for (int box = SH_BOX_REPLY; box <= SH_BOX_EXCEPTION; box++) {
    sh_msg *m;
    while ((m = sh_mailbox_take(&b->house.mb, box)) != NULL) {
      SH_ASSERT(m->id <= b->house.next_ask_id); /* it answers one of our asks */
      drop_answer(b, m);
    }
  }
}

void sh_bridge_free(sh_bridge *b) {
  SH_FROM_USER();
  if (b == NULL) return;
  SH_ASSERT(b->open);
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

static uint64_t deadline_of(int64_t timeout_ms) {
  return timeout_ms == SH_NOWAIT ? sh_plat_now_ns() : sh_timeout_deadline(timeout_ms);
}

/* ---- sending --------------------------------------------------------- */

static bool decided(int state) { return state == SH_WAITER_ADMITTED || state == SH_WAITER_REFUSED; }

static bool waiter_decided(void *ctx) {
  sh_bridge *b = ctx;
  /* seq_cst: the load half of the thread's side of the sleeper's handshake. */
  return decided(sh_atomic_load(&b->w.state, memory_order_seq_cst));
}

/* The target's bounded mailbox is full: queue the bridge's waiter and sleep
 * until the gate admits or refuses it, or the deadline. */
static int wait_for_room(sh_bridge *b, sh_house *t, uint32_t gen, sh_box box, sh_msg *m,
                         uint64_t deadline) {
  sh_waiter *w = &b->w;
  /* The bridge's one waiter is in no gate: its last wait ended. seq_cst:
   * as the loads of the wait below. */
  int was = sh_atomic_load(&w->state, memory_order_seq_cst);
  SH_ASSERT(was != SH_WAITER_QUEUED && was != SH_WAITER_POPPED);
  w->msg = m;
  w->target = t;
  w->gen = gen;
  w->box = box;
  w->sleeper = &b->sleeper;
  w->sender = NULL;
  if (!sh_system_outside_begin(t->sys)) return -ESHUTDOWN;
  int rc = sh_send_wait(w);
  sh_system_outside_end(t->sys);
  if (rc != -EINPROGRESS) return rc;
  /* Bounded by the deadline, then by the gate carrying out a verdict it
   * already took (a few instructions): each turn sleeps or finds it. A
   * time, not a count: nothing here to check it against. */
  for (;;) {
    int s = sh_atomic_load(&w->state, memory_order_seq_cst);
    if (s == SH_WAITER_ADMITTED) return 0; /* the gate pushed m for us */
    if (s == SH_WAITER_REFUSED) return -ESHUTDOWN;
    if (sh_sleeper_sleep(&b->sleeper, deadline, waiter_decided, b) != -ETIMEDOUT) continue;
    if (sh_gate_cancel(t->gate_mem[sh_req(box)], w)) {
      sh_send_refused(t, box);
      return -ETIMEDOUT;
    }
    /* Too late to take it back: popped, its verdict on the way. */
    sh_plat_yield_cpu();
  }
}

/* One send through the send path; m stays the caller's on any error. */
static int bridge_send(sh_bridge *b, sh_house *t, uint32_t gen, sh_msg *m, sh_box box,
                       int64_t timeout_ms) {
  if (!sh_system_outside_begin(t->sys)) return -ESHUTDOWN;
  int rc = sh_send_now(t, gen, box, m);
  sh_system_outside_end(t->sys);
  SH_ASSERT(rc == 0 || rc == -EAGAIN || rc == -ESHUTDOWN); /* send.h */
  if (rc != -EAGAIN) return rc;
  if (timeout_ms == SH_NOWAIT) {
    sh_send_refused(t, box);
    return -EAGAIN;
  }
  return wait_for_room(b, t, gen, box, m, deadline_of(timeout_ms));
}

/* A bridge blocks its thread: never a worker's, which runs actors. */
static bool bridge_usable(const sh_bridge *b) {
  return b != NULL && b->open && sh_worker_current() == NULL;
}

static bool usable(const sh_bridge *b, const sh_addr *to, const sh_msg *m, sh_msg_kind kind) {
  return bridge_usable(b) && to != NULL && m != NULL && m->type->kind == kind;
}

/* Notices and asks alike: `try_only` keeps m the caller's on an error,
 * otherwise the call takes m and frees it on an error (stackhouse.h). */
static int bridge_call(sh_bridge *b, const sh_addr *to, sh_msg *m, sh_msg_kind kind,
                       int64_t timeout_ms, bool try_only, uint64_t *ticket) {
  if (!usable(b, to, m, kind) || !sh_timeout_valid(timeout_ms)) {
    if (!try_only) sh_msg_free(m);
    return -EINVAL;
  }
  uint32_t gen;
  sh_house *h = &b->house, *t = sh_addr_pick(to, &gen);
  uint64_t id = 0;
  if (kind == SH_ASK) id = ++h->next_ask_id;
  /* Above the floor, or its answer would be dropped as a previous user's. */
  SH_ASSERT(kind != SH_ASK || id > b->id_floor);
  m->sender = kind == SH_ASK ? h : NULL;
  m->id = id;
  SH_MODEL_NOTE(SH_MODEL_ASK, h, id, 0); /* a notice's id, 0, is no ask */
  const char *name = m->type->name; /* m may be handled and freed once sent */
  (void)name;                       /* traced in the simulator only */
  int rc = bridge_send(b, t, gen, m, sh_send_box(t, kind), timeout_ms);
  if (rc != 0 && kind == SH_ASK) SH_MODEL_NOTE(SH_MODEL_ASK_WITHDRAWN, h, id, 0);
  if (rc != 0) {
    if (try_only) return rc;
    if (rc == -ESHUTDOWN)
      sh_send_drop_stopped(h->sys, m);
    else
      sh_msg_free(m);
    return rc;
  }
  if (kind == SH_ASK) {
    b->pending++;
    sh_count(h->sys, SH_C_ASKS);
    SH_TRACE(SH_TRACE_ASK, h->seq, name, SH_TRACE_FLOW(h->seq, id));
    if (ticket != NULL) *ticket = id;
  }
  return 0;
}

int sh_bridge_notice(sh_bridge *b, const sh_addr *to, sh_msg *m, int64_t timeout_ms) {
  SH_FROM_USER();
  return bridge_call(b, to, m, SH_NOTICE, timeout_ms, false, NULL);
}

int sh_bridge_notice_try(sh_bridge *b, const sh_addr *to, sh_msg *m) {
  SH_FROM_USER();
  return bridge_call(b, to, m, SH_NOTICE, SH_NOWAIT, true, NULL);
}

int sh_bridge_ask(sh_bridge *b, const sh_addr *to, sh_msg *m, int64_t timeout_ms,
                  uint64_t *ticket) {
  SH_FROM_USER();
  return bridge_call(b, to, m, SH_ASK, timeout_ms, false, ticket);
}

int sh_bridge_ask_try(sh_bridge *b, const sh_addr *to, sh_msg *m, uint64_t *ticket) {
  SH_FROM_USER();
  return bridge_call(b, to, m, SH_ASK, SH_NOWAIT, true, ticket);
}

/* ---- receiving ------------------------------------------------------- */

static bool answer_ready(void *ctx) {
  sh_bridge *b = ctx;
  SH_ASSERT(b->open); /* its own thread, in sh_bridge_recv */
  /* seq_cst (both): the load half of the thread's side of the sleeper's
   * handshake. */
  return sh_mailbox_nonempty(&b->house.mb, SH_BOX_REPLY) ||
         sh_mailbox_nonempty(&b->house.mb, SH_BOX_EXCEPTION) ||
         sh_atomic_load(&b->house.sys->drained, memory_order_seq_cst);
}

/* The next answer to one of this user's asks, or NULL. Bounded: each
 * stale answer dropped is one fewer in the mailboxes, which only this
 * bridge's asks fill (as drop_all). */
static sh_msg *take_answer(sh_bridge *b) {
  for (;;) {
    sh_msg *m = sh_mailbox_take(&b->house.mb, SH_BOX_REPLY);
    if (m == NULL) m = sh_mailbox_take(&b->house.mb, SH_BOX_EXCEPTION);
    SH_ASSERT(m == NULL || m->id <= b->house.next_ask_id);
    if (m == NULL || m->id > b->id_floor) return m;
    drop_answer(b, m);
  }
}

static void hand_over(sh_bridge *b, sh_msg *m, sh_bridge_reply *out) {
  sh_house *h = &b->house;
  out->ticket = m->id;
  SH_MODEL_NOTE(SH_MODEL_ANSWER_IN, h, m->id, 1);
  SH_TRACE_MSG(SH_TRACE_REPLY, h->seq, m, SH_TRACE_FLOW(h->seq, m->id));
  if (sh_msg_is_exception(m)) {
    out->error = m->error < 0 ? m->error : -EPROTO;
    out->msg = NULL;
    sh_msg_free(m);
  } else {
    out->error = 0;
    out->msg = m;
  }
  SH_ASSERT(b->pending > 0);
  b->pending--;
  sh_count(h->sys, SH_C_DELIVERED);
  sh_count(h->sys, SH_C_ASKS_RESOLVED);
}

int sh_bridge_recv(sh_bridge *b, int64_t timeout_ms, sh_bridge_reply *out) {
  SH_FROM_USER();
  if (!bridge_usable(b) || out == NULL || !sh_timeout_valid(timeout_ms)) return -EINVAL;
  uint64_t deadline = deadline_of(timeout_ms);
  /* Bounded by the deadline: each turn hands over, gives up, or sleeps (a
   * time, not a count: nothing to check it against). */
  for (;;) {
    sh_msg *m = take_answer(b);
    if (m != NULL) {
      SH_ASSERT(m->id > b->id_floor); /* never a previous user's answer */
      hand_over(b, m, out);
      return 0;
    }
    /* Nothing can come: waiting would be forever. */
    if (b->pending == 0) return -ENOMSG;
    /* seq_cst: see answer_ready. */
    if (sh_atomic_load(&b->house.sys->drained, memory_order_seq_cst)) return -ESHUTDOWN;
    if (timeout_ms == SH_NOWAIT) return -EAGAIN;
    if (sh_sleeper_sleep(&b->sleeper, deadline, answer_ready, b) == -ETIMEDOUT && !answer_ready(b))
      return -ETIMEDOUT;
  }
}

/* ---- the system's end ------------------------------------------------ */

void sh_bridge_shutdown(sh_system *sys) {
  SH_ASSERT(sh_system_is_shut(sys)); /* no bridge joins any more (bridge_take) */
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
    SH_ASSERT(!b->open);
    drop_all(b);
    last = b;
  }
  if (last != NULL) {
    sh_spin_lock(&sys->reg_lock);
    last->free_next = sys->bridge_free;
    sys->bridge_free = closed;
    sh_spin_unlock(&sys->reg_lock);
  }
  /* `shut` was stored before the lock was taken above: no bridge joins the
   * list any more (bridge_get looks under it), so it can be walked without
   * the lock.
   * Bounded by the bridges, which nothing counts: a list that no longer
   * grows. */
  for (sh_bridge *b = sys->bridges; b != NULL; b = b->all_next) sh_sleeper_wake(&b->sleeper);
}

void sh_bridge_destroy_all(sh_system *sys) {
  sh_bridge *b = sys->bridges;
  while (b != NULL) {
    sh_bridge *next = b->all_next;
    SH_ASSERT(sh_atomic_load(&b->house.state, memory_order_relaxed) == SH_OUTSIDE);
    bridge_destroy(b);
    b = next;
  }
  sys->bridges = NULL;
  sys->bridge_free = NULL;
}
