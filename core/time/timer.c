/*
 * Actor timers and ask timeouts on the per-worker wheels.
 *
 * Who frees a node: the state word decides. PENDING -> FIRED (the wheel's
 * CAS) hands a one-shot node to the actor as an event: the actor frees it.
 * PENDING -> CANCELLED (the actor's CAS) leaves it to the wheel, which frees
 * it when it comes due -- or at once, when the actor happens to run on the
 * wheel's own worker and can unlink it itself. Whoever loses the CAS never
 * touches the node again, except the actor setting `dead` on a node it
 * already owns (FIRED, on its way to it).
 */
#include "time/timer.h"

#include "base/atomic.h"

#include <fiu-local.h>

#include "base/faults.h"
#include <stddef.h>
#include <string.h>

#include "base/check.h"
#include "base/model.h"
#include "actor/house.h"
#include "mem/mem.h"
#include "mem/msg.h"
#include "time/timeout.h"
#include "sched/worker.h"

/* Fires per advance call: a burst of due timers is spread over loop turns
 * so IO and actors are not starved by it. */
#define SH_TIMER_FIRE_MAX 4096

static sh_timer *from_link(sh_wheel_link *l) {
  return (sh_timer *)(void *)((char *)l - offsetof(sh_timer, link));
}

/* Expiries are capped far below the discard horizon (~73 years of uptime
 * plus ~36 years of delay, timeout.h), so that sh_timer_discard_all reaches
 * every node and no sum overflows. */
#define SH_TIMER_DISCARD_NS (UINT64_MAX / 4)

static uint64_t expiry(uint64_t delay_ns) {
  if (delay_ns > SH_TIMEOUT_MAX_NS) delay_ns = SH_TIMEOUT_MAX_NS;
  uint64_t at = sh_plat_now_ns() + delay_ns;
  SH_ASSERT(at < SH_TIMER_DISCARD_NS); /* within the horizon, so no sum wrapped */
  return at;
}

/* A timer of `kind` whose node fires as an event of type ev. */
static sh_timer *timer_new(sh_worker *w, sh_house *h, sh_timer_kind kind, const sh_event_type *ev,
                           uint64_t id, uint64_t delay_ns, uint64_t period_ns, void *arg) {
  sh_fault_return_on("sh/timer/new", NULL);
  sh_timer *t = sh_mem_alloc(sizeof(*t));
  if (t == NULL) return NULL;
  memset(t, 0, sizeof(*t));
  t->hdr.type = &ev->msg;
  t->house = h;
  t->id = id;
  t->period_ns = period_ns;
  t->arg = arg;
  t->kind = kind;
  t->wheel_worker = w->index;
  sh_atomic_init(&t->state, SH_TIMER_PENDING);
  uint64_t at = expiry(delay_ns);
  sh_wheel_add(&w->wheel, &t->link, at);
  SH_MODEL_NOTE(SH_MODEL_TIMER_ARM, t, 0, at);
  return t;
}

sh_timer *sh_timer_ask(sh_worker *w, sh_house *h, uint64_t ask_id, uint64_t ns,
                       const sh_event_type *ev) {
  return timer_new(w, h, SH_TIMER_ASK, ev, ask_id, ns, 0, NULL);
}

void sh_timer_cancel_node(sh_worker *w, sh_timer *t) {
  /* Before the CAS: once it succeeds, another worker's wheel may free the
   * node (and its pool reuse it) at any moment, unless that wheel is ours. */
  bool own_wheel = w != NULL && w->index == t->wheel_worker;
  int s = SH_TIMER_PENDING;
  SH_YIELD("timer.cancel");
  /* acq_rel: on success the wheel's later acquire load sees CANCELLED and
   * frees; on failure (FIRED) the acquire makes the firing side's writes
   * visible before we touch `dead`. */
  if (sh_atomic_cas(&t->state, &s, SH_TIMER_CANCELLED,
                                              memory_order_acq_rel, memory_order_acquire)) {
    if (own_wheel && sh_wheel_linked(&t->link)) {
      sh_wheel_remove(&w->wheel, &t->link);
      SH_MODEL_NOTE(SH_MODEL_TIMER_DISARM, t, 0, 0);
      SH_MODEL_NOTE(SH_MODEL_TIMER_GONE, t->house, t->id, t->kind == SH_TIMER_ACTOR);
      sh_mem_free(t);
    }
    return;
  }
  SH_ASSERT(s == SH_TIMER_FIRED);
  SH_SOMETIMES(true, "timer: a cancel lost to its fire");
  t->dead = true;
}

static void fire_periodic(sh_worker *w, sh_timer *t) {
  sh_tick *k = (sh_tick *)sh_msg_alloc(&sh_tick_type.msg);
  /* Out of memory: this tick is skipped; the timer keeps its period. */
  if (k != NULL) {
    k->id = t->id;
    k->arg = t->arg;
  }
  uint64_t at = expiry(t->period_ns);
  sh_wheel_add(&w->wheel, &t->link, at);
  SH_MODEL_NOTE(SH_MODEL_TIMER_ARM, t, 0, at);
  if (k != NULL) sh_house_push(t->house, SH_BOX_EVENT, &k->hdr);
}

static void fire(sh_wheel_link *l, void *ctx) {
  sh_worker *w = ctx;
  sh_timer *t = from_link(l);
  /* Before anything reads the clock again or re-arms the node: the wheel's
   * hand-over is what timer.early judges. */
  SH_MODEL_NOTE(SH_MODEL_TIMER_FIRE, t, 0, 0);
  /* acquire: see the actor's cancellation before reusing the node. */
  if (sh_atomic_load(&t->state, memory_order_acquire) == SH_TIMER_CANCELLED) {
    SH_MODEL_NOTE(SH_MODEL_TIMER_GONE, t->house, t->id, t->kind == SH_TIMER_ACTOR);
    sh_mem_free(t);
    return;
  }
  if (t->period_ns != 0) {
    fire_periodic(w, t);
    return;
  }
  int s = SH_TIMER_PENDING;
  SH_YIELD("timer.fire");
  /* acq_rel: success hands the node to the actor (release: our writes to it
   * happen before the actor's CAS failure reads FIRED); failure means the
   * actor cancelled, and acquire makes its writes visible before we free. */
  if (!sh_atomic_cas(&t->state, &s, SH_TIMER_FIRED, memory_order_acq_rel,
                                               memory_order_acquire)) {
    SH_SOMETIMES(true, "timer: a fire lost to its cancel");
    SH_MODEL_NOTE(SH_MODEL_TIMER_GONE, t->house, t->id, t->kind == SH_TIMER_ACTOR);
    sh_mem_free(t); /* cancelled between the load and the CAS */
    return;
  }
  sh_house_push(t->house, SH_BOX_EVENT, &t->hdr);
}

uint32_t sh_timer_advance(sh_worker *w, uint64_t now_ns) {
  uint32_t fired = sh_wheel_advance(&w->wheel, now_ns, SH_TIMER_FIRE_MAX, fire, w);
  SH_ASSERT(fired <= SH_TIMER_FIRE_MAX);
  return fired;
}

static sh_timer *find(sh_house *h, uint64_t id) {
  /* Bounded by the actor's live timers, which nothing counts: a list, each
   * of whose links one sh_timer_start made. */
  for (sh_list *l = sh_list_first(&h->timers); l != NULL; l = sh_list_next(&h->timers, l)) {
    sh_timer *t = SH_LIST_ENTRY(l, sh_timer, actor_link);
    if (t->id == id) return t;
  }
  return NULL;
}

static void call_timeout(sh_house *h, uint64_t id, void *arg) {
  /* acquire: a stop seen here also shows what the stopper wrote before it;
   * a stop not yet seen costs one last timeout call before the stop work. */
  if (h->cls->timeout != NULL && !sh_house_stopped(h)) {
    SH_MODEL_NOTE(SH_MODEL_TIMER_CALL, h, id, 0);
    SH_USER_VOID(h->cls->timeout(h->actor, id, arg));
  }
}

/* A periodic timer's tick reached its house. */
static void tick_event(sh_house *h, sh_msg *m) {
  sh_tick *k = (sh_tick *)m;
  if (find(h, k->id) != NULL) call_timeout(h, k->id, k->arg);
  sh_msg_free(m);
}

/* A fired one-shot actor timer reached its house (its node is the event;
 * an ask's timeout is its future's type's: future.c). */
static void timer_event(sh_house *h, sh_msg *m) {
  sh_timer *t = (sh_timer *)m;
  SH_ASSERT(t->kind == SH_TIMER_ACTOR);
  SH_ASSERT(t->house == h); /* pushed to its own house (fire) */
  if (!t->dead) {
    sh_list_remove(&t->actor_link);
    call_timeout(h, t->id, t->arg);
  }
  SH_MODEL_NOTE(SH_MODEL_TIMER_GONE, h, t->id, 1);
  sh_mem_free(t);
}

const sh_event_type sh_timer_type = {
    {"sh_timer", sizeof(sh_timer), SH_NOTICE, SH_MSG_RUNTIME, NULL, NULL}, timer_event};
const sh_event_type sh_tick_type = {
    {"sh_tick", sizeof(sh_tick), SH_NOTICE, SH_MSG_RUNTIME, NULL, NULL}, tick_event};

int sh_timer_start(sh_actor *self, int64_t delay_ms, int64_t period_ms, void *arg,
                   uint64_t *id_out) {
  SH_FROM_USER();
  sh_worker *w = sh_worker_current();
  if (self == NULL || w == NULL || self->house == NULL || delay_ms < 0 || period_ms < 0)
    return -EINVAL;
  sh_house *h = self->house;
  if (h->cls->timeout == NULL) return -EINVAL;
  /* acquire: as in call_timeout; a timer started just as the stop lands is
   * cancelled by the stop work (sh_timer_cancel_all) anyway. */
  if (sh_house_stopped(h)) return -ESHUTDOWN;
  uint64_t id = ++h->next_timer_id;
  sh_timer *t = timer_new(w, h, SH_TIMER_ACTOR, &sh_timer_type, id, sh_timeout_ns(delay_ms),
                         sh_timeout_ns(period_ms), arg);
  if (t == NULL) return -ENOMEM;
  sh_list_push_front(&h->timers, &t->actor_link);
  SH_MODEL_NOTE(SH_MODEL_TIMER_START, h, id, period_ms != 0);
  if (id_out != NULL) *id_out = id;
  return 0;
}

int sh_timer_cancel(sh_actor *self, uint64_t id) {
  SH_FROM_USER();
  if (self == NULL || self->house == NULL) return -EINVAL;
  sh_house *h = self->house;
  sh_timer *t = find(h, id);
  if (t == NULL) return -ENOENT;
  sh_list_remove(&t->actor_link);
  /* From here the actor's timeout is never called for id (stackhouse.h):
   * its calls come on this house's runner, which is us. Before the cancel,
   * which may free the node (the model then forgets a one-shot). */
  SH_MODEL_NOTE(SH_MODEL_TIMER_CANCEL, h, id, 0);
  sh_timer_cancel_node(sh_worker_current(), t);
  return 0;
}

void sh_timer_cancel_all(sh_worker *w, sh_house *h) {
  sh_list *l;
  /* Bounded by the actor's live timers: each turn takes one out, and
   * cancelling a node never links one (not counted: a list, as find). */
  while ((l = sh_list_pop_front(&h->timers)) != NULL)
    sh_timer_cancel_node(w, SH_LIST_ENTRY(l, sh_timer, actor_link));
}

static void discard(sh_wheel_link *l, void *ctx) {
  (void)ctx;
  sh_mem_free(from_link(l));
}

void sh_timer_discard_all(sh_worker *w) {
  sh_wheel_advance(&w->wheel, SH_TIMER_DISCARD_NS, 0, discard, w);
  SH_ASSERT(sh_wheel_count(&w->wheel) == 0);
}
