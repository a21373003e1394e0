/*
 * The sends (send.h): the send path's slow steps, the sends that need no
 * stack (sh_notice, sh_notice_try), and those a stack makes and waits on
 * (sh_ask, sh_ask_try, sh_put). A stack's send makes a future, goes
 * through the one send path and, when the target's bounded mailbox is full
 * and the call may wait, queues a waiter at its gate; the waiter's return
 * completes the put or lets the ask go on waiting for its reply (future.c).
 */
#include "actor/send.h"

#include <fiu-local.h>

#include "actor/addr.h"
#include "actor/future.h"
#include "actor/gate.h"
#include "actor/house.h"
#include "actor/stack.h"
#include "base/atomic.h"
#include "base/check.h"
#include "base/faults.h"
#include "base/model.h"
#include "mem/msg.h"
#include "sched/system.h"
#include "sched/worker.h"
#include "time/timeout.h"
#include "time/timer.h"

int sh_send_wait(sh_waiter *w) {
  sh_house *t = w->target;
  sh_gate *g = sh_house_gate(t, (sh_box)w->box);
  /* The gate went with the generation, or the generation ended: the target
   * is gone. A look only: it may change before the gate's lock is taken,
   * and the gate decides there (sh_gate_enter). */
  if (g == NULL || !sh_house_live(t, w->gen)) return -ESHUTDOWN;
  SH_ASSERT(w->msg != NULL);
  /* Admitted now or later, the message holds a slot. */
  w->msg->internal = w->gen | SH_MSG_SLOT;
  int rc = sh_gate_enter(g, w);
  if (rc == 0) sh_house_push(t, (sh_box)w->box, w->msg);
  return rc;
}

void sh_send_refused(sh_house *t, sh_box box) {
  sh_gate *g = sh_house_gate(t, box);
  if (g != NULL) sh_gate_refused(g);
}

void sh_send_drop_stopped(sh_system *sys, sh_msg *m) {
  sh_count(sys, SH_C_SENT);
  sh_count(sys, SH_C_DROPPED_STOPPED);
  sh_msg_free(m);
}

static bool notice_usable(const sh_addr *to, const sh_msg *m) {
  return to != NULL && m != NULL && m->type->kind == SH_NOTICE;
}

/* A notice that will not wait for room; on an error m is still the caller's. */
static int notice_now(const sh_addr *to, sh_msg *m, sh_house **t) {
  uint32_t gen;
  *t = sh_addr_pick(to, &gen);
  m->sender = NULL;
  m->id = 0;
  sh_worker *w = sh_worker_current();
  /* An address of another system is another process's: not reachable. */
  if (w != NULL && w->sys != (*t)->sys) return -EXDEV;
  bool outside = w == NULL;
  if (outside && !sh_system_outside_begin((*t)->sys)) return -ESHUTDOWN;
  sh_box box = sh_send_box(*t, SH_NOTICE);
  int rc = sh_send_now(*t, gen, box, m);
  if (outside) sh_system_outside_end((*t)->sys);
  SH_ASSERT(rc == 0 || rc == -EAGAIN || rc == -ESHUTDOWN); /* send.h */
  if (rc == -EAGAIN) sh_send_refused(*t, box);
  return rc;
}

int sh_notice(const sh_addr *to, sh_msg *m) {
  SH_FROM_USER();
  if (!notice_usable(to, m)) {
    sh_msg_free(m);
    return -EINVAL;
  }
  sh_house *t = NULL;
  int rc = notice_now(to, m, &t);
  SH_ASSERT(t != NULL); /* an address always names a house */
  if (rc == -ESHUTDOWN)
    sh_send_drop_stopped(t->sys, m);
  else if (rc != 0)
    sh_msg_free(m);
  return rc;
}

int sh_notice_try(const sh_addr *to, sh_msg *m) {
  SH_FROM_USER();
  sh_house *t;
  return notice_usable(to, m) ? notice_now(to, m, &t) : -EINVAL;
}

/* A stack's waiter for m, on its way to mailbox `box` of t for future f;
 * NULL when out of memory. */
static sh_waiter *waiter_new(sh_future *f, sh_house *t, uint32_t gen, sh_box box, sh_msg *m) {
  SH_ASSERT(m != NULL && (box == SH_BOX_ASK || box == SH_BOX_NOTICE));
  sh_fault_return_on("sh/gate/waiter", NULL);
  sh_waiter *w = (sh_waiter *)(void *)sh_msg_alloc(&sh_waiter_type.msg);
  if (w == NULL) return NULL;
  sh_atomic_init(&w->state, SH_WAITER_IDLE);
  w->msg = m;
  w->target = t;
  w->gen = gen;
  w->box = box;
  w->sender = f->stack->house;
  w->id = sh_future_id(f);
  return w;
}

/* Sends m (its sender and id set) for future f: 0 when pushed; with
 * `wait`, a full mailbox queues f's waiter (-EINPROGRESS); else -EAGAIN,
 * -ESHUTDOWN or -ENOMEM, and m is still the caller's. */
static int send_for(sh_future *f, sh_house *t, uint32_t gen, sh_box box, sh_msg *m, bool wait) {
  int rc = sh_send_now(t, gen, box, m);
  if (rc != -EAGAIN || !wait) return rc;
  sh_waiter *w = waiter_new(f, t, gen, box, m);
  if (w == NULL) return -ENOMEM;
  /* From here the gate may pop w on another thread; its return is handled
   * by this house's runner, which is us, after this handler. */
  rc = sh_send_wait(w);
  SH_ASSERT(rc == 0 || rc == -EINPROGRESS || rc == -ESHUTDOWN); /* send.h */
  if (rc == -EINPROGRESS) {
    f->waiter = w;
    return rc;
  }
  w->msg = NULL;
  sh_msg_free(&w->hdr);
  return rc;
}

/* A stopping actor fails its own new sends too: its pending futures are
 * being failed and must not be refilled (its own flag it reads in program
 * order, no race). */
static bool either_stopped(const sh_stack *st, const sh_house *t, uint32_t gen) {
  return sh_house_stopped(st->house) || !sh_house_live(t, gen);
}

/* Arms f's timeout on the calling worker: false when out of memory. */
static bool arm(sh_future *f, int64_t timeout_ms) {
  if (timeout_ms == SH_FOREVER) return true;
  sh_worker *w = sh_worker_current();
  /* Stacks run on workers: there is always a wheel. */
  SH_ASSERT(w != NULL);
  f->timer = sh_timer_ask(w, f->stack->house, sh_future_id(f), sh_timeout_ns(timeout_ms),
                          &sh_future_timeout_type);
  return f->timer != NULL;
}

/* sh_ask and sh_ask_try after their checks. `try_only`: a full mailbox is
 * -EAGAIN and m stays the caller's, as on -ENOMEM. Otherwise 0 and *out is
 * the ask's future, which may have failed at once (the message is then
 * taken and freed). */
static int ask(sh_stack *st, const sh_addr *to, sh_msg *m, int64_t timeout_ms, bool try_only,
               sh_future **out) {
  uint32_t gen;
  sh_house *h = st->house, *t = sh_addr_pick(to, &gen);
  sh_future *f = sh_future_new(st);
  if (f == NULL) return -ENOMEM;
  /* An address of another system is another process's: not reachable. */
  int rc = t->sys != h->sys ? -EXDEV : either_stopped(st, t, gen) ? -ESHUTDOWN : 0;
  /* Armed before the send: the timeout covers the wait for room as well as
   * for the reply. Without its timeout the ask could wait forever. */
  if (rc == 0 && !arm(f, timeout_ms)) rc = -ENOMEM;
  if (rc == 0) {
    m->sender = h;
    m->id = sh_future_id(f);
    SH_TRACE_MSG(SH_TRACE_ASK, h->seq, m, SH_TRACE_FLOW(h->seq, m->id));
    SH_MODEL_NOTE(SH_MODEL_ASK, h, m->id, 0);
    rc = send_for(f, t, gen, SH_BOX_ASK, m, !try_only);
    if (rc != 0 && rc != -EINPROGRESS) SH_MODEL_NOTE(SH_MODEL_ASK_WITHDRAWN, h, sh_future_id(f), 0);
  }
  if (try_only && (rc == -EAGAIN || rc == -ENOMEM)) {
    if (rc == -EAGAIN) sh_send_refused(t, SH_BOX_ASK);
    sh_future_unmake(f);
    return rc;
  }
  *out = f;
  if (rc == 0 || rc == -EINPROGRESS) {
    sh_future_track(f);
    return 0;
  }
  /* -EAGAIN stayed with try_only: a waiting send queues instead. */
  SH_ASSERT(rc == -ESHUTDOWN || rc == -ENOMEM || rc == -EXDEV);
  if (rc == -ESHUTDOWN)
    sh_send_drop_stopped(h->sys, m);
  else
    sh_msg_free(m);
  sh_future_end_now(f, NULL, rc);
  return 0;
}

/* An ask always waits for its reply: SH_NOWAIT is refused. */
static bool ask_usable(const sh_stack *st, const sh_addr *to, const sh_msg *m, int64_t timeout_ms) {
  return st != NULL && to != NULL && m != NULL && m->type->kind == SH_ASK && !st->done &&
         sh_timeout_valid(timeout_ms) && timeout_ms != SH_NOWAIT;
}

sh_future *sh_ask(sh_stack *st, const sh_addr *to, sh_msg *m, int64_t timeout_ms) {
  SH_FROM_USER();
  sh_future *f = NULL;
  if (!ask_usable(st, to, m, timeout_ms) || ask(st, to, m, timeout_ms, false, &f) != 0) {
    sh_msg_free(m);
    return NULL;
  }
  SH_ASSERT(f != NULL); /* ask's 0: *out is the future, failed or not */
  return f;
}

int sh_ask_try(sh_stack *st, const sh_addr *to, sh_msg *m, int64_t timeout_ms, sh_future **out) {
  SH_FROM_USER();
  if (!ask_usable(st, to, m, timeout_ms) || out == NULL) return -EINVAL;
  return ask(st, to, m, timeout_ms, true, out);
}

/* sh_put's wait for room gets its deadline; false when the timer could
 * not be made and the notice came back (the put then failed). */
static bool put_deadline(sh_future *f, int64_t timeout_ms) {
  SH_ASSERT(f->put && f->waiter != NULL); /* a put queued at a full gate */
  if (arm(f, timeout_ms)) return true;
  sh_msg *back = sh_future_reclaim(f);
  /* Popped already: its return completes the put. */
  if (back == NULL) return true;
  sh_future_end_now(f, back, -ENOMEM);
  return false;
}

sh_future *sh_put(sh_stack *st, const sh_addr *to, sh_msg *m, int64_t timeout_ms) {
  SH_FROM_USER();
  if (st == NULL || to == NULL || m == NULL || m->type->kind != SH_NOTICE || st->done ||
      !sh_timeout_valid(timeout_ms)) {
    sh_msg_free(m);
    return NULL;
  }
  sh_future *f = sh_future_new(st);
  if (f == NULL) {
    sh_msg_free(m);
    return NULL;
  }
  f->put = true;
  uint32_t gen;
  sh_house *t = sh_addr_pick(to, &gen);
  m->sender = NULL;
  m->id = 0;
  bool wait = timeout_ms != SH_NOWAIT;
  sh_box box = sh_send_box(t, SH_NOTICE);
  /* An address of another system is another process's: not reachable. */
  int rc = t->sys != st->house->sys  ? -EXDEV
           : either_stopped(st, t, gen) ? -ESHUTDOWN
                                        : send_for(f, t, gen, box, m, wait);
  SH_ASSERT(rc != -EAGAIN || !wait); /* one that may wait queues its waiter */
  if (rc == -EAGAIN) sh_send_refused(t, box);
  if (rc != -EINPROGRESS) {
    /* Done at once: pushed, or refused with the notice handed back. */
    sh_future_end_now(f, rc == 0 ? NULL : m, rc);
  } else if (put_deadline(f, timeout_ms)) {
    sh_future_track(f);
  }
  return f;
}

sh_future *sh_sleep(sh_stack *st, int64_t ms) {
  SH_FROM_USER();
  if (st == NULL || ms < 0) return NULL;
  sh_future *f = sh_future_new(st);
  if (f == NULL) return NULL;
  SH_ASSERT(f->stack == st);
  f->sleep = true;
  /* A stopping actor's sleep fails at once, as its sends do: tracked, it
   * would refill the futures its stop is failing (sh_future_fail_all), and
   * a stack that sleeps again on each failure would keep that loop going. */
  if (ms == 0 || sh_house_stopped(st->house)) {
    sh_future_end_now(f, NULL, ms == 0 ? 0 : -ESHUTDOWN);
    return f;
  }
  sh_future_track(f);
  /* A sleep is an ask nobody answers: its timeout completes it. */
  if (!arm(f, ms)) sh_future_resolve(st->house, sh_future_id(f), NULL, -ENOMEM);
  return f;
}
