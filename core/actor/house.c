/*
 * ActorHouse: pushes, scheduling, settling, stopping, and carrying out the
 * gates' verdicts.
 *
 * The push/settle handshake. A producer links its message, counts it
 * (puts++, seq_cst) and then reads the state (seq_cst); the runner, when it
 * finds nothing to do, stores WAITING (seq_cst) and then reads the counts
 * again (seq_cst). Under sequential consistency at least one of them sees
 * the other's write, so a message is never left in a waiting house: either
 * the producer sees WAITING and queues the house, or the runner sees the
 * count and does (for the last producer to count, every message is linked).
 * This is why "has messages" is settled after the run from fresh reads,
 * never from a flag cleared after draining (a flag cleared after the drain
 * loses a message pushed during it).
 */
#include "actor/house.h"

#include "base/atomic.h"
#include "base/check.h"
#include "base/model.h"
#include "mem/msg.h"
#include "actor/sleeper.h"
#include "sched/system.h"
#include "sched/worker.h"

/* seq_cst: sh_stop's store of `stopped` and its poke's load of the state
 * form a store-load handshake with settle's store of WAITING and its load
 * of `stopped`; with release/acquire both sides could miss each other and
 * leave a stopped house waiting with its stop work undone. */
static bool stopped(const sh_house *h) {
  return sh_atomic_load(&h->life, memory_order_seq_cst) & SH_LIFE_STOPPED;
}

/* What the runner knows of its house, taken while it still owns it: after
 * settle stores WAITING another worker may own the house, so the re-check
 * must read nothing but this view and atomics. */
typedef struct work_view {
  uint32_t taken[SH_BOXES];
  bool held;      /* a barrier holds asks and notices back */
  bool ready;     /* deferred stacks wait to run again */
  bool owes_stop; /* mounted, and the stop hook or pending-ask failures due */
  bool live;      /* a stack is live (what a deferred one is); checked builds only */
} work_view;

static work_view view_of(const sh_house *h) {
  work_view v;
  for (int b = 0; b < SH_BOXES; b++) v.taken[b] = h->mb.taken[b];
  v.held = h->barrier;
  v.ready = !sh_list_empty(&h->ready);
#ifdef SH_CHECKED
  v.live = !sh_list_empty(&h->stacks);
#else
  v.live = true; /* read by no check */
#endif
  /* Stop work: futures to fail, or the hook once every future ended. Futures
   * kept for their waiter's return are not work: that return pokes us. */
  uint32_t futures = sh_futtable_count(&h->futures);
  SH_ASSERT(h->stop_kept <= futures);
  v.owes_stop = h->mounted && (futures > h->stop_kept || (!h->stop_done && futures == 0));
  return v;
}

static bool view_has_work(const sh_house *h, const work_view *v) {
  /* A deferred stack is a live one: it leaves the ready list as it ends. */
  SH_INVARIANT(!v->ready || v->live);
  bool stop = stopped(h);
  if (v->ready || (stop && v->owes_stop)) return true;
  for (int b = 0; b < SH_BOXES; b++) {
    if (v->held && !stop && (b == SH_BOX_ASK || b == SH_BOX_NOTICE)) continue;
    /* seq_cst: the load half of the push/settle handshake (file comment). */
    if (sh_mailbox_backlog((uint32_t)sh_atomic_load(&h->mb.pushed[b], memory_order_seq_cst),
                           v->taken[b]) > 0)
      return true;
  }
  return false;
}

bool sh_house_has_work(const sh_house *h) {
  work_view v = view_of(h);
  return view_has_work(h, &v);
}

void sh_house_init(sh_house *h, sh_system *sys, const sh_actor_class *c, sh_house_state state) {
  /* A slab's houses start waiting, a bridge's outside, for good. */
  SH_ASSERT(sys != NULL && (state == SH_WAITING || state == SH_OUTSIDE));
  sh_atomic_init(&h->state, (int)state);
  /* A new actor has no pending future: high priority. */
  sh_atomic_init(&h->high, true);
  sh_atomic_init(&h->notice_box, SH_BOX_NOTICE);
  sh_atomic_init(&h->life, sh_life(0, false));
  sh_mailbox_init(&h->mb);
  sh_futtable_init(&h->futures, SH_FUTTABLE_INITIAL);
  for (int i = 0; i < SH_REQ_BOXES; i++) sh_atomic_init(&h->high_water[i], 0);
  sh_list_init(&h->stacks);
  sh_list_init(&h->ready);
  sh_list_init(&h->timers);
  sh_list_init(&h->attached);
  h->sys = sys;
  h->cls = c;
}

/* A worker with this many houses ready keeps no more that others ready:
 * a fan-out (one actor readying many) would gather everything on it. */
#define SH_FOLLOW_MAX_READY 2u

/* A house readied by a send on another worker moves to that worker: the
 * two actors talk, and a message between workers costs a wakeup, or a
 * wait for a peer the operating system has descheduled; idle workers
 * steal to spread the load again. Only the one that made the house READY
 * (or its runner, settling it) enqueues it, so `owner` has one writer at a
 * time, ordered before the runner by the run queue's lock. */
static void follow(sh_house *h) {
  sh_worker *w = sh_worker_current();
  if (w != NULL && w->sys == h->sys && w->index != h->owner && !h->pinned &&
      h->sys->cfg.affinity == SH_AFFINITY_FOLLOW && h->cls->kind != SH_IO_ACTOR &&
      sh_hq_count(&w->state) < SH_FOLLOW_MAX_READY)
    h->owner = w->index;
  SH_INVARIANT(h->owner < h->sys->nworkers);
}

static void enqueue(sh_house *h) {
  /* Only the one that made it READY queues it, once (sh_hq_link: one queue
   * at a time); nobody else moves it on until a worker pops it. */
  SH_INVARIANT(sh_atomic_load(&h->state, memory_order_relaxed) == SH_READY);
  follow(h);
  /* relaxed: priority is a hint decided at enqueue; a stale value costs
   * order, not correctness. */
  bool high = sh_atomic_load(&h->high, memory_order_relaxed);
  sh_worker_enqueue(h->sys, h->owner, &h->qlink, high, h->cls->kind == SH_IO_ACTOR);
}

void sh_house_poke(sh_house *h) {
  /* seq_cst: the load half of the push/settle handshake (file comment). */
  int s = sh_atomic_load(&h->state, memory_order_seq_cst);
  SH_DEBUG_ASSERT((unsigned)s <= SH_OUTSIDE);
  SH_YIELD("house.poke");
  if (s != SH_WAITING) {
    /* A bridge's thread is its house's runner: wake it instead. The push's
     * seq_cst count is the waker's store in the sleeper's handshake. */
    if (s == SH_OUTSIDE) sh_sleeper_wake(h->outside);
    return;
  }
  /* One winner among concurrent producers (and the runner's re-check). */
  if (sh_atomic_cas(&h->state, &s, SH_READY, memory_order_seq_cst,
                                              memory_order_seq_cst))
    enqueue(h);
}

void sh_house_push(sh_house *h, sh_box box, sh_msg *m) {
  /* Only a request holds a slot of a bounded mailbox; a take gives it back. */
  SH_DEBUG_ASSERT(!(m->internal & SH_MSG_SLOT) || box == SH_BOX_ASK || box == SH_BOX_NOTICE);
  if (box != SH_BOX_EVENT) sh_count(h->sys, SH_C_SENT);
  uint32_t n = sh_mailbox_push(&h->mb, box, m);
  /* Priority is decided at enqueue: a producer may raise it, only the owner
   * lowers it (settle). relaxed: a hint read when the house is queued. */
  if ((box == SH_BOX_REPLY && n > SH_HIGH_REPLIES) || (box == SH_BOX_EVENT && n > SH_HIGH_EVENTS))
    sh_atomic_store(&h->high, true, memory_order_relaxed);
  sh_house_poke(h);
}

/* Carries out a gate's verdict on waiter w, outside the gate's lock: the
 * admitted message goes into the mailbox first, then the sender hears of
 * it (a bridge thread told ADMITTED sends its next message after this one,
 * never before). */
static void verdict(sh_waiter *w, bool admitted) {
  sh_house *target = w->target;
  sh_box box = (sh_box)w->box;
  sh_msg *m = w->msg;
  SH_ASSERT(m != NULL && (box == SH_BOX_ASK || box == SH_BOX_NOTICE));
  if (w->sleeper == NULL) {
    /* A stack's waiter is ours until its return is pushed. */
    if (admitted) {
      w->msg = NULL;
      sh_house_push(target, box, m);
    }
    w->hdr.error = admitted ? 0 : -ESHUTDOWN;
    sh_house_push(w->sender, SH_BOX_EVENT, &w->hdr);
    return;
  }
  struct sh_sleeper *s = w->sleeper;
  if (admitted) sh_house_push(target, box, m);
  /* seq_cst: the waker's store in the sleeper's handshake. The thread may
   * reuse the waiter the moment it sees this: it is our last touch of it. */
  sh_atomic_store(&w->state, admitted ? SH_WAITER_ADMITTED : SH_WAITER_REFUSED,
                        memory_order_seq_cst);
  sh_sleeper_wake(s);
}

void sh_house_hand_off(sh_gate *g) {
  /* Bounded by the capacity: each turn fills one of `cap` slots, or stops. */
  uint32_t cap = sh_atomic_load(&g->cap, memory_order_relaxed); /* see the field */
  SH_ASSERT(cap >= 1 && cap <= SH_MAX_CAPACITY);
  for (uint32_t i = 0; i < cap; i++) {
    sh_waiter *w = sh_gate_pop_admitted(g);
    if (w == NULL) return;
    verdict(w, true);
  }
}

/* Refuses every waiter of a gate closed for gen. Bounded: a closed gate
 * queues no new waiter, so this ends with the ones queued when it began
 * (or at once, once the gate is reset for a later generation): counted.
 * One at a time: a refused bridge waiter may be reused the moment it is
 * told. */
static void refuse_waiters(sh_gate *g, uint32_t gen) {
  /* After the close: its lock orders every waiter queued before it. */
  uint32_t queued = sh_gate_queued(g), n = 0;
  sh_waiter *w;
  while ((w = sh_gate_pop_refused(g, gen)) != NULL) {
    SH_ASSERT(++n <= queued);
    verdict(w, false);
  }
}

void sh_house_close_gates(sh_house *h, uint32_t gen) {
  SH_ASSERT(gen <= SH_GEN_MAX);
  for (sh_box b = SH_BOX_ASK; b <= SH_BOX_NOTICE; b++) {
    sh_gate *g = sh_house_gate(h, b);
    if (g == NULL) continue;
    sh_gate_close(g, gen);
    refuse_waiters(g, gen);
  }
}

bool sh_house_gates_empty(const sh_house *h) {
  for (sh_box b = SH_BOX_ASK; b <= SH_BOX_NOTICE; b++)
    if (h->gate_mem[sh_req(b)] != NULL && sh_gate_queued(h->gate_mem[sh_req(b)]) > 0) return false;
  return true;
}

void sh_house_free_messages(sh_house *h) {
  for (int b = 0; b < SH_BOXES; b++) {
    /* Bounded by what was pushed: nothing is pushed any more, and every
     * message counted is linked by now. */
    uint32_t left = sh_mailbox_size(&h->mb, (unsigned)b), n = 0;
    sh_msg *m;
    while ((m = sh_mailbox_take(&h->mb, (unsigned)b)) != NULL) {
      SH_ASSERT(++n <= left);
      sh_msg_free(m);
    }
  }
}

void sh_house_stop(sh_house *h, uint32_t gen) {
  SH_ASSERT(gen <= SH_GEN_MAX); /* an address's: what a token holds */
  uint32_t live = sh_life(gen, false);
  /* acquire: the gates of this generation, set before it was published. */
  if (sh_atomic_load(&h->life, memory_order_acquire) != live) return;
  sh_gate *ask = sh_house_gate(h, SH_BOX_ASK), *notice = sh_house_gate(h, SH_BOX_NOTICE);
  /* The gates close before `stopped` is published: a runner that sees it
   * drains the mailboxes, and each take would otherwise hand the freed
   * slot to a waiter, whose push would succeed only for its message to be
   * dropped. A gate already reset for a later generation stays open. */
  if (ask != NULL) sh_gate_close(ask, gen);
  if (notice != NULL) sh_gate_close(notice, gen);
  /* seq_cst: the store half of the stop handshake with settle (see
   * stopped()); the poke below is its load half. A CAS, so that a stop
   * never reaches a later generation: only one stop of gen wins. */
  if (!sh_atomic_cas(&h->life, &live, live | SH_LIFE_STOPPED,
                                               memory_order_seq_cst, memory_order_seq_cst))
    return;
  SH_MODEL_NOTE(SH_MODEL_STOP, &h->mb.head[0], gen, 0);
  /* Waiters hear it now, not when the house next runs; after `stopped`,
   * so that a woken sender that tries again is refused at once. The house
   * is not retired while one is queued (dispatch.c), and the poke after the
   * last one lets it be. */
  if (ask != NULL) refuse_waiters(ask, gen);
  if (notice != NULL) refuse_waiters(notice, gen);
  sh_house_poke(h);
}

void sh_house_reply(sh_house *to, uint64_t id, sh_msg *reply) {
  if (to == NULL) {
    sh_msg_free(reply);
    return;
  }
  SH_ASSERT(id != 0); /* ask ids count from 1: 0 would answer nothing */
  reply->id = id;
  reply->sender = NULL;
  reply->internal = 0; /* a reply may be a message that was sent before */
  SH_MODEL_NOTE(SH_MODEL_ANSWER, to, id, 0);
  sh_house_push(to, SH_BOX_REPLY, reply);
}

static void push_refusal(sh_house *to, uint64_t id, int error, sh_msg *e) {
  SH_ASSERT(id != 0);
  e->id = id;
  e->error = error;
  SH_MODEL_NOTE(SH_MODEL_ANSWER, to, id, 0);
  sh_house_push(to, SH_BOX_EXCEPTION, e);
}

bool sh_house_refuse(sh_house *to, uint64_t id, int error) {
  if (to == NULL) return true;
  SH_ASSERT(error < 0);
  sh_msg *e = sh_msg_alloc(&sh_exception_type);
  if (e == NULL) return false;
  push_refusal(to, id, error, e);
  return true;
}

void sh_house_refuse_in(sh_house *to, uint64_t id, int error, sh_msg *carrier) {
  SH_ASSERT(to != NULL && error < 0);
  carrier->sender = NULL;
  carrier->internal = SH_MSG_REFUSAL;
  push_refusal(to, id, error, carrier);
}

/* Out of memory and nothing to carry it: the asker's timeout, or
 * shutdown, ends its wait. */
bool sh_house_refuse_with(sh_house *to, uint64_t id, int error, sh_msg *carrier) {
  SH_ASSERT(error < 0);
  if (sh_house_refuse(to, id, error) || carrier == NULL) return false;
  sh_house_refuse_in(to, id, error, carrier);
  return true;
}

void sh_house_settle(sh_house *h) {
  int s = sh_atomic_load(&h->state, memory_order_relaxed);
  SH_ASSERT(s == SH_RUNNING || s == SH_MOUNTING); /* only its runner settles it */
  /* A barrier is held by its stack, which lets go as it ends. */
  SH_INVARIANT(!h->barrier || !sh_list_empty(&h->stacks));
  /* The priority of the next queueing, which only the runner lowers. */
  for (int b = 0; b < SH_BOXES; b++) sh_mailbox_publish(&h->mb, b);
  bool high = sh_mailbox_size(&h->mb, SH_BOX_REPLY) > SH_HIGH_REPLIES ||
              sh_mailbox_size(&h->mb, SH_BOX_EVENT) > SH_HIGH_EVENTS ||
              sh_futtable_count(&h->futures) == 0;
  sh_atomic_store(&h->high, high, memory_order_relaxed);
  work_view v = view_of(h);
  if (view_has_work(h, &v)) {
    /* release: whoever pops it next sees our writes (the queue lock orders
     * them too); no other thread can claim a house that is not WAITING. */
    sh_atomic_store(&h->state, SH_READY, memory_order_release);
    enqueue(h);
    return;
  }
  /* A producer that pushes here finds the house still RUNNING and leaves
   * it to us: the second look below is what finds its message. */
  SH_YIELD("house.settle.look");
  /* seq_cst: the store half of the handshake (file comment). From here a
   * producer may queue the house and another worker run it. */
  sh_atomic_store(&h->state, SH_WAITING, memory_order_seq_cst);
  SH_YIELD("house.settle");
  if (view_has_work(h, &v)) sh_house_poke(h);
}

void sh_house_mount(sh_house *h) {
  int s = SH_CREATED;
  /* acq_rel: the mounting queue's lock already orders the spawner's writes
   * before us; the CAS is the one legal transition, and the check catches a
   * house mounted twice. Producers never touch CREATED. */
  bool ok = sh_atomic_cas(&h->state, &s, SH_MOUNTING,
                                                    memory_order_acq_rel, memory_order_acquire);
  SH_ASSERT(ok);
  h->mounted = true;
  if (h->cls->mount != NULL) SH_USER_VOID(h->cls->mount(h->actor));
  sh_house_settle(h);
}
