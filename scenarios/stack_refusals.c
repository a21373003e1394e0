/*
 * stack_refusals: the ways an ask stack ends without a proper reply, and
 * what its asker's future says of each (stackhouse.h, sh_return and
 * sh_suspend; README, "Rules worth knowing"; docs/internals.md, stacks).
 *
 * An asker runs rounds against a target; each round draws one case, and
 * the target's stack ends so:
 *   - it returns NULL: the asker's future fails with -ENODATA;
 *   - it returns a notice, not a reply: -EINVAL, and the notice is freed
 *     (once: its type's drop hook counts);
 *   - it suspends with nothing to wait for: -EDEADLK;
 *   - every ask it makes fails at once (to an actor whose sh_stop
 *     returned), invocation after invocation: -ELOOP, after exactly 1024
 *     invocations in a row;
 *   - a batch ask stack returns one reply for the whole batch: a reply
 *     that can be copied reaches every ask of the batch; one whose type has
 *     a drop hook cannot be copied, so exactly one ask of each batch gets
 *     it and the others fail with -EINVAL (README, "Batching"); a batch
 *     stack that returns a notice answers none: every ask fails with
 *     -ENODATA, as with NULL.
 * Once a run, sh_put misused (an ask type, a bad timeout) gives NULL and
 * frees the message (stackhouse.h: NULL only for -EINVAL or -ENOMEM; a
 * send that is not a _try takes the message always).
 * Every reply carries the round's value, and every message the target
 * made is freed once. Faults (shsim --faults) may spoil an answer: such
 * an error is excused (sh_scn_fault_error), never a wrong one.
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/scenario.h>

#define SR_ROUNDS 8u
#define SR_BATCH 4u          /* asks of a batch round, at most */
#define SR_MAX_FAILING 1024u /* docs/internals.md: -ELOOP after so many invocations */
#define SR_MADE 64u          /* messages of the target's that are counted */
#define SR_VALUE(round) (0x2545f491ull * (round) + 3u)

enum { C_NULL, C_NOTICE, C_DEADLK, C_LOOP, C_BATCH_COPY, C_BATCH_DROP, C_BATCH_NOTICE, C_CASES };

typedef struct world {
  sh_scn *s;
  sh_system *sys;
  const sh_addr *target, *retired;
  atomic_uint left;
  atomic_uint made, freed[SR_MADE]; /* the target's notices and uncopyable replies */
  atomic_uint loops[SR_ROUNDS];     /* C_LOOP: the stack's invocations */
  atomic_uint batches[SR_ROUNDS];   /* batch stacks of a round */
} world;

typedef struct sr_ask {
  sh_msg hdr;
  world *wd;
  uint32_t kase, round;
} sr_ask;
typedef sr_ask sr_batch_ask;
static SH_MSG_DEFINE(sr_ask, SH_ASK, 0);
static SH_MSG_DEFINE(sr_batch_ask, SH_ASK, 0);

/* What the target makes: a notice where a reply belongs, and a reply that
 * owns something (a drop hook), which a batch cannot copy. */
typedef struct sr_made {
  sh_msg hdr;
  world *wd;
  uint32_t id;
  uint64_t v;
} sr_made;
typedef sr_made sr_note;
typedef sr_made sr_owning;

static void made_drop(sh_msg *m) {
  sr_made *x = (sr_made *)m;
  if (x->id < SR_MADE) atomic_fetch_add(&x->wd->freed[x->id], 1);
}
static SH_MSG_DEFINE_DROP(sr_note, SH_NOTICE, 0, made_drop);
static SH_MSG_DEFINE_DROP(sr_owning, SH_REPLY, 0, made_drop);

static sh_msg *made_new(world *wd, const sh_msg_type *t, uint64_t v) {
  uint32_t id = atomic_fetch_add(&wd->made, 1);
  if (!SH_SCN_CHECK(wd->s, id < SR_MADE, "the target made too many messages")) return NULL;
  sr_made *m = (sr_made *)sh_msg_alloc(t);
  if (m == NULL) return NULL;
  m->wd = wd;
  m->id = id;
  m->v = v;
  return &m->hdr;
}

/* ---- the target ------------------------------------------------------------- */

typedef struct tgt_locals {
  sh_future *f;
} tgt_locals;

/* C_LOOP: one more ask to a stopped actor, which fails at once, and a wait
 * on it; the runtime ends the stack with -ELOOP in the end. */
static sh_yield loop_once(world *wd, sh_stack *st, const sr_ask *m) {
  tgt_locals *l = sh_stack_locals(st);
  uint32_t n = atomic_fetch_add_explicit(&wd->loops[m->round], 1, memory_order_release) + 1;
  /* Bounded by the runtime's -ELOOP: past it, this was never run. */
  if (!SH_SCN_CHECK(wd->s, n <= SR_MAX_FAILING, "invocation %u of a failing stack", n))
    return sh_return(st, NULL);
  l->f = sh_scn_ask_num(st, wd->retired, n, SH_FOREVER);
  return l->f != NULL ? sh_suspend(st, 1) : sh_return(st, NULL);
}

static sh_yield tgt_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  const sr_ask *m = sh_stack_msg_as(st, sr_ask);
  world *wd = m->wd;
  switch (m->kase) {
  case C_NULL: return sh_return(st, NULL);
  case C_NOTICE: return sh_return(st, made_new(wd, &sr_note_type, 0));
  case C_DEADLK: return sh_suspend(st, 1); /* nothing made, nothing pending */
  case C_LOOP: return loop_once(wd, st, m);
  default: SH_SCN_CHECK(wd->s, false, "case %u asked of the plain handler", m->kase);
  }
  return sh_return(st, NULL);
}

static sh_yield tgt_batch(sh_actor *self, sh_stack *st) {
  (void)self;
  const sr_ask *m = (const sr_ask *)sh_stack_batch_msg(st, 0);
  world *wd = m->wd;
  atomic_fetch_add_explicit(&wd->batches[m->round], 1, memory_order_release);
  uint64_t v = SR_VALUE(m->round);
  if (m->kase == C_BATCH_NOTICE) return sh_return(st, made_new(wd, &sr_note_type, v));
  sh_msg *r = m->kase == C_BATCH_DROP ? made_new(wd, &sr_owning_type, v) : sh_scn_num_new(v);
  return r != NULL ? sh_return(st, r) : sh_throw(st, -ENOMEM);
}

static bool tgt_filter(sh_actor *self, const sh_msg *m) {
  (void)self;
  return sh_msg_is(m, &sr_batch_ask_type);
}

static const sh_actor_class target_class = {
    .name = "stack_refusals_target",
    .size = sizeof(sh_actor),
    .locals_size = sizeof(tgt_locals),
    .ask = tgt_ask,
    .batch_ask = tgt_batch,
    .batch_ask_filter = tgt_filter,
};

static const sh_actor_class retired_class = {.name = "stack_refusals_retired",
                                             .size = sizeof(sh_actor)};

/* ---- the asker ---------------------------------------------------------------- */

typedef struct ask_locals {
  sh_future *f[SR_BATCH];
  uint32_t n, kase, round;
} ask_locals;

typedef struct asker {
  sh_scn_actor a;
  uint32_t round;
  bool looped; /* C_LOOP, the dear case (1024 invocations), once a run at most */
} asker;

static int want_of(uint32_t kase) {
  static const int want[C_BATCH_COPY] = {-ENODATA, -EINVAL, -EDEADLK, -ELOOP};
  return kase < C_BATCH_COPY ? want[kase] : 0;
}

static sh_yield ask_round(asker *a, world *wd, sh_stack *st, ask_locals *l) {
  *l = (ask_locals){.kase = (uint32_t)sh_scn_below(wd->s, C_CASES), .round = a->round};
  if (l->kase == C_LOOP && a->looped) l->kase = C_NULL;
  a->looped |= l->kase == C_LOOP;
  bool batch = l->kase >= C_BATCH_COPY;
  uint32_t n = batch ? 2 + (uint32_t)sh_scn_below(wd->s, SR_BATCH - 1) : 1;
  for (uint32_t i = 0; i < n; i++) {
    sr_ask *m = (sr_ask *)sh_msg_alloc(batch ? &sr_batch_ask_type : &sr_ask_type);
    if (m == NULL) break;
    m->wd = wd;
    m->kase = l->kase;
    m->round = l->round;
    l->f[l->n] = sh_ask(st, wd->target, &m->hdr, SH_FOREVER);
    if (l->f[l->n] != NULL) l->n++;
  }
  return l->n > 0 ? sh_suspend(st, 1) : SH_RETURN;
}

/* A batch round: with a copyable reply every ask has it; otherwise one ask
 * per batch stack has it and the others fail with -EINVAL. */
static void check_batch(world *wd, const ask_locals *l) {
  sh_scn *s = wd->s;
  uint32_t ok = 0, refused = 0, excused = 0;
  for (uint32_t i = 0; i < l->n; i++) {
    int err = sh_future_error(l->f[i]);
    uint64_t v = 0;
    const sh_msg *r = sh_future_msg(l->f[i]);
    if (err == 0 && sh_msg_is(r, &sr_owning_type)) v = ((const sr_made *)r)->v;
    if (err == 0 && sh_msg_is(r, &sh_scn_num_type)) v = ((const sh_scn_num *)r)->v;
    if (err == 0)
      ok += SH_SCN_CHECK(s, v == SR_VALUE(l->round), "round %u: a batch reply's value", l->round);
    else if (err == -EINVAL && l->kase == C_BATCH_DROP)
      refused++;
    else if (err == -ENODATA && l->kase == C_BATCH_NOTICE)
      refused++;
    else
      excused += SH_SCN_CHECK(s, sh_scn_fault_error(s, err), "round %u (batch case %u): %d",
                              l->round, l->kase, err);
  }
  uint32_t batches = atomic_load_explicit(&wd->batches[l->round], memory_order_acquire);
  if (excused > 0) return;
  if (l->kase == C_BATCH_COPY) SH_SCN_CHECK_EQ(s, ok, l->n, "batch asks answered with copies");
  if (l->kase == C_BATCH_NOTICE) SH_SCN_CHECK_EQ(s, refused, l->n, "asks refused -ENODATA");
  if (l->kase == C_BATCH_DROP) {
    SH_SCN_CHECK_EQ(s, ok, batches, "asks answered with an uncopyable reply (one per batch)");
    SH_SCN_CHECK_EQ(s, refused, l->n - batches, "asks of a batch refused -EINVAL");
  }
}

static void check_round(world *wd, const ask_locals *l) {
  sh_scn *s = wd->s;
  if (l->kase >= C_BATCH_COPY) {
    check_batch(wd, l);
    return;
  }
  int err = sh_future_error(l->f[0]);
  if (sh_scn_fault_error(s, err)) return;
  SH_SCN_CHECK(s, err == want_of(l->kase), "round %u, case %u: the asker got %d, want %d",
               l->round, l->kase, err, want_of(l->kase));
  if (l->kase == C_LOOP && err == -ELOOP)
    SH_SCN_CHECK_EQ(s, atomic_load_explicit(&wd->loops[l->round], memory_order_acquire),
                    SR_MAX_FAILING, "invocations before -ELOOP");
}

/* sh_put refuses what is not a notice, and a bad timeout: NULL, the
 * message freed (verify counts its frees). */
static void put_misuse(world *wd, sh_stack *st) {
  sh_msg *reply = made_new(wd, &sr_owning_type, 0), *note = made_new(wd, &sr_note_type, 0);
  sh_future *f1 = reply != NULL ? sh_put(st, wd->target, reply, SH_FOREVER) : NULL;
  sh_future *f2 = note != NULL ? sh_put(st, wd->target, note, -5) : NULL;
  SH_SCN_CHECK(wd->s, f1 == NULL && f2 == NULL, "a misused sh_put gave a future");
}

static sh_yield asker_notice(sh_actor *self, sh_stack *st) {
  asker *a = (asker *)self;
  world *wd = sh_scn_state(a->a.s);
  ask_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    if (a->round == 0) put_misuse(wd, st);
    sh_yield y = ask_round(a, wd, st, l);
    if (y == SH_SUSPEND) return y;
  } else {
    check_round(wd, l);
  }
  return sh_scn_round_end(st, ++a->round < SR_ROUNDS, &wd->left);
}

static const sh_actor_class asker_class = {
    .name = "stack_refusals_asker",
    .size = sizeof(asker),
    .locals_size = sizeof(ask_locals),
    .init = sh_scn_actor_init,
    .notice = asker_notice,
};

/* ---- the run -------------------------------------------------------------------- */

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  wd->s = s;
  wd->sys = sys;
  atomic_store(&wd->left, 1);
  int rc = sh_spawn(sys, &target_class, NULL, 1, &wd->target);
  if (rc == 0) rc = sh_spawn(sys, &retired_class, NULL, 1, &wd->retired);
  if (rc == 0) rc = sh_stop(wd->retired); /* returned: every later send is refused */
  if (rc == 0) rc = sh_scn_spawn_each(s, sys, &asker_class, 1, SH_SCN_EACH_KICK, NULL);
  return rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  world *wd = sh_scn_state(s);
  uint32_t made = atomic_load(&wd->made);
  for (uint32_t i = 0; i < made && i < SR_MADE; i++)
    SH_SCN_CHECK(s, atomic_load(&wd->freed[i]) == 1, "the target's message %u freed %u times",
                 i, atomic_load(&wd->freed[i]));
}

static const sh_scenario stack_refusals = {
    .name = "stack_refusals",
    .summary = "ask stacks that end without a proper reply: what their askers are told",
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(stack_refusals);
