/*
 * The chaos run's workload (test_e2e_chaos.c says what it is and what it
 * checks), part two: observing futures and checking each outcome, the
 * stacks of every kind (notice, ask, batches; barriers; rounds of asks,
 * waits for all or any), timers' handler, and the hooks and classes.
 * Part one (messages, state, operations) is chaos_workload.h.
 */
#ifndef TESTS_CHAOS_STACKS_H
#define TESTS_CHAOS_STACKS_H

#include "chaos_workload.h"

/* ---- observing futures ------------------------------------------------------ */

static void got_reply(chaos_actor *a, slot *s) {
  const chaos_reply *r = sh_future_reply(s->f, chaos_reply);
  if (r == NULL || !sh_msg_is(&r->hdr, &chaos_reply_type)) {
    BAD("a future without error has no chaos_reply", s->tag);
    return;
  }
  if (r->v == answer_of(s->tag))
    count(C_GOT_REPLY);
  else if (r->v == BATCH_COMMON && (s->flags & F_BATCH))
    count(C_GOT_COMMON);
  else
    BAD("a reply carries another ask's value", s->tag);
  if (a->nheld < MAX_HELD && one_in(a, 6)) {
    sh_msg *m = sh_future_take(s->f);
    CHECK(m == &r->hdr && sh_future_msg(s->f) == NULL);
    a->held[a->nheld++] = m;
    count(C_TAKEN);
  }
}

static void observe(chaos_actor *a, slot *s) {
  if (s->seen || !sh_future_done(s->f)) return;
  s->seen = true;
  count(C_OBSERVED);
  int err = sh_future_error(s->f);
  if (err == 0) {
    got_reply(a, s);
  } else if (err == -ETIMEDOUT) {
    count(C_GOT_TIMEOUT);
    if (s->timeout == 0) BAD("-ETIMEDOUT for an ask without timeout", s->tag);
  } else if (err == -ESHUTDOWN) {
    count(C_GOT_SHUTDOWN);
    if (!addr_stopped(s->to) && !addr_stopped(a->addr) && !atomic_load(&g.shutting_down))
      BAD("-ESHUTDOWN with nobody stopped", s->tag);
  } else if (err == thrown_for(s->tag)) {
    count(C_GOT_THROWN);
  } else if (err == BATCH_THROW && (s->flags & F_BATCH)) {
    count(C_GOT_BATCH_THROWN);
  } else {
    BAD("an ask failed with an error nobody threw", err);
  }
}

static int unseen(const chaos_locals *l) {
  int n = 0;
  for (int i = 0; i < l->nslots; i++) n += !l->s[i].seen;
  return n;
}

/* ---- stacks ---------------------------------------------------------------- */

/* An ask or notice reached a handler: asks must be new, senders real. */
static void note_request(const sh_msg *m, bool ask) {
  const chaos_msg *c = (const chaos_msg *)m;
  CHECK(sh_msg_type_of(m)->kind == (ask ? SH_ASK : SH_NOTICE));
  CHECK(c->from < (uint32_t)g.nactors || c->from == KICKER);
  if (!ask) {
    count(C_NOTICES_HANDLED);
    return;
  }
  count(C_ASKS_HANDLED);
  if (c->tag >= (uint64_t)g.budget)
    BAD("an ask tag out of range", c->tag);
  else if (atomic_fetch_add(&g.handled[c->tag], 1) != 0)
    BAD("an ask handled twice", c->tag);
}

static void begin_batch(chaos_actor *a, sh_stack *st, bool ask) {
  size_t n = sh_stack_batch_len(st);
  count(C_BATCH_STACKS);
  CHECK(sh_stack_msg(st) == NULL);
  if (n < 1 || n > a->p->max_batch) BAD("batch length", n);
  for (size_t i = 0; i < n; i++) {
    const sh_msg *m = sh_stack_batch_msg(st, i);
    if (m == NULL) {
      BAD("batch entry missing", i);
      continue;
    }
    CHECK(batch_filter(&a->base, m) && !is_barrier_msg(a, m));
    note_request(m, ask);
  }
}

static uint8_t draw_rounds(chaos_actor *a, stack_kind k, const sh_msg *m, bool barrier) {
  if (cval(C_STARTED) - cval(C_ENDED) > LIVE_CAP) return 0;
  if (barrier) return 1; /* the barrier stays up while its timed asks are out */
  switch (k) {
  case K_NOTICE: return (uint8_t)((msg_flags(m) & F_KICK) ? 1 + rnd(a, MAX_ROUNDS) : rnd(a, 3));
  case K_ASK: return (uint8_t)(one_in(a, 3) ? 1 + rnd(a, 2) : 0);
  default: return (uint8_t)rnd(a, 2);
  }
}

static void begin(chaos_actor *a, sh_stack *st, stack_kind k, chaos_locals *l) {
  count(C_STARTED);
  atomic_fetch_add(&g.live[a->id], 1);
  a->live++;
  /* A barrier holds back every other ask and notice until it ends. */
  if (a->in_barrier) BAD("a stack started during a barrier", a->id);
  memset(l, 0, sizeof(*l));
  const sh_msg *m = sh_stack_msg(st);
  if (k == K_BATCH_NOTICE || k == K_BATCH_ASK) {
    begin_batch(a, st, k == K_BATCH_ASK);
  } else if (m == NULL) {
    BAD("a single stack without message", k);
  } else {
    note_request(m, k == K_ASK);
    l->barrier = is_barrier_msg(a, m);
  }
  if (l->barrier) {
    a->in_barrier = true;
    count(C_BARRIER_STACKS);
  }
  l->rounds_left = draw_rounds(a, k, m, l->barrier);
}

static sh_msg *new_reply(uint64_t v) { return &sh_msg_new(chaos_reply, .v = v)->hdr; }

static sh_yield answer_ask(chaos_actor *a, sh_stack *st) {
  uint64_t tag = sh_stack_msg_as(st, chaos_ask)->tag;
  if (one_in(a, 4)) {
    count(C_SENT_THROW);
    return sh_throw(st, thrown_for(tag));
  }
  count(C_SENT_REPLY);
  return sh_return(st, new_reply(answer_of(tag)));
}

/* Some asks answered one by one (a second answer is refused), the rest with
 * a copied reply or a throw. */
static sh_yield answer_batch(chaos_actor *a, sh_stack *st) {
  size_t n = sh_stack_batch_len(st), left = 0;
  for (size_t i = 0; i < n; i++) {
    if (!one_in(a, 2)) {
      left++;
      continue;
    }
    uint64_t tag = ((const chaos_msg *)sh_stack_batch_msg(st, i))->tag;
    CHECK(sh_batch_reply(st, i, new_reply(answer_of(tag))) == 0);
    count(C_SENT_REPLY);
    if (one_in(a, 4)) CHECK(sh_batch_reply(st, i, new_reply(0)) == -EINVAL);
  }
  if (left == 0) return sh_return(st, NULL);
  if (one_in(a, 3)) {
    count_n(C_SENT_BATCH_THROW, left);
    return sh_throw(st, BATCH_THROW);
  }
  count_n(C_SENT_COMMON, left);
  return sh_return(st, new_reply(BATCH_COMMON));
}

static sh_yield finish(chaos_actor *a, sh_stack *st, stack_kind k, chaos_locals *l) {
  count_n(C_ABANDONED, (uint64_t)unseen(l)); /* late answers are dropped by the runtime */
  if (l->barrier) a->in_barrier = false;
  a->live--;
  atomic_fetch_sub(&g.live[a->id], 1);
  count(C_ENDED);
  switch (k) {
  case K_ASK: return answer_ask(a, st);
  case K_BATCH_ASK: return answer_batch(a, st);
  default: return sh_return(st, NULL);
  }
}

/* Waits for all or any, in the same state or another. */
static sh_yield wait_some(chaos_actor *a, sh_stack *st) {
  int next = one_in(a, 2) ? WAIT_A : WAIT_B;
  return one_in(a, 2) ? sh_suspend_any(st, next) : sh_suspend(st, next);
}

static sh_yield step(chaos_actor *a, sh_stack *st, stack_kind k, chaos_locals *l) {
  if (l->rounds_left > 0) {
    l->rounds_left--;
    side_ops(a);
    if (fan_out(a, st, l) > 0) return wait_some(a, st);
  }
  /* Sometimes walk away from asks still out. */
  if (unseen(l) > 0 && !one_in(a, 8)) return wait_some(a, st);
  return finish(a, st, k, l);
}

static sh_yield drive(sh_actor *self, sh_stack *st, stack_kind k) {
  chaos_actor *a = (chaos_actor *)self;
  enter(a);
  chaos_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    begin(a, st, k, l);
  } else {
    for (int i = 0; i < l->nslots; i++) observe(a, &l->s[i]);
  }
  sh_yield y = step(a, st, k, l);
  leave(a);
  return y;
}

static sh_yield on_notice(sh_actor *self, sh_stack *st) { return drive(self, st, K_NOTICE); }
static sh_yield on_ask(sh_actor *self, sh_stack *st) { return drive(self, st, K_ASK); }
static sh_yield on_batch_notice(sh_actor *self, sh_stack *st) { return drive(self, st, K_BATCH_NOTICE); }
static sh_yield on_batch_ask(sh_actor *self, sh_stack *st) { return drive(self, st, K_BATCH_ASK); }

static void on_timeout(sh_actor *self, uint64_t id, void *arg) {
  chaos_actor *a = (chaos_actor *)self;
  enter(a);
  timer_rec *t = find_timer(a, id);
  if (t == NULL) {
    BAD("a timer ran after its cancel or its one-shot run", id);
  } else {
    CHECK(t->cookie == (uintptr_t)arg);
    if (!t->periodic) {
      forget_timer(a, t);
      count(C_FIRED);
    } else {
      count(C_TICKS);
      /* From its own tick; always in a pause, so that nothing arrives then
       * to wake a house a lost wakeup left waiting. */
      if (paused() || one_in(a, 8)) cancel_timer(a, t);
    }
  }
  if (one_in(a, 3)) send_notice(a);
  leave(a);
}

/* ---- hooks ------------------------------------------------------------------ */

static int chaos_init(sh_actor *self, void *arg) {
  chaos_actor *a = (chaos_actor *)self;
  const spawn_arg *sa = arg;
  if (g.nactors >= MAX_ACTORS) return -ENOSPC;
  a->p = sa->p;
  a->addr = sa->addr;
  a->id = g.nactors++; /* spawns run on the test thread, before the start */
  a->rng = mix64(g.seed ^ mix64((uint64_t)a->id + 1)) | 1; /* its own stream, never 0 */
  return 0;
}

static void chaos_mount(sh_actor *self) {
  chaos_actor *a = (chaos_actor *)self;
  CHECK(!a->mounted);
  a->mounted = true;
  atomic_fetch_add(&g.mounts[a->id], 1);
}

static void chaos_stop(sh_actor *self) {
  chaos_actor *a = (chaos_actor *)self;
  CHECK(atomic_load(&a->inside) == 0);
  CHECK(!a->stop_ran);
  if (a->live != 0) BAD("the stop hook ran before the actor's last stack ended", a->live);
  a->stop_ran = true;
  atomic_fetch_add(&g.stop_hooks[a->id], 1);
  while (a->nheld > 0) free_held(a);
}

static sh_actor_class classes[P_COUNT];

static sh_actor_class class_of(const profile *p) {
  return (sh_actor_class){
      .name = p->name,
      .size = sizeof(chaos_actor),
      .locals_size = sizeof(chaos_locals),
      .init = chaos_init,
      .mount = chaos_mount,
      .stop = chaos_stop,
      .notice = on_notice,
      .ask = on_ask,
      .batch_notice = p->batch ? on_batch_notice : NULL,
      .batch_ask = p->batch ? on_batch_ask : NULL,
      .batch_notice_filter = p->batch ? batch_filter : NULL,
      .batch_ask_filter = p->batch ? batch_filter : NULL,
      .barrier = p->barrier ? barrier_pred : NULL,
      .timeout = on_timeout,
      .max_batch = p->max_batch,
      .max_per_run = p->max_per_run,
  };
}

#endif
