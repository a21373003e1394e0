/*
 * barrier: barrier messages (while a barrier stack runs, its actor takes
 * only replies and events; the barrier is released when that stack
 * completes).
 *
 * Senders on every worker send bursts of asks and notices to one actor B
 * (worker 0); about one in four is a barrier, by its type's SH_MSG_BARRIER
 * flag or by B's barrier predicate. B's barrier stacks ask a helper on
 * another worker twice before they complete (some by throwing), and the
 * helper sends B a notice of its own each time, which must wait too.
 * B checks, as each of its stacks starts:
 *   - no stack starts while one of its barrier stacks is live: everything
 *     that arrives after a barrier waits until the barrier stack returns;
 *   - from each sender, the asks start in the order they were sent, and so
 *     do the notices (the two kinds have separate mailboxes, dispatched asks
 *     first, so there is no order between kinds).
 * The senders check every answer; the run checks the exact counts.
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/scenario.h>

#define SENDERS 3
#define ROUNDS 12
#define BURST 8
#define HELPER SENDERS        /* the helper's notices: one more sender */
#define THROWN (-EXDEV)       /* what some barrier asks end with */
#define KINDS 2               /* 0 notices, 1 asks: ordered separately */

/* A burst slot of the plan. */
enum { P_ASK = 1, P_BARRIER = 2, P_FLAGGED = 4 };

/* Everything B receives has this layout; the types tell the kind and
 * whether SH_MSG_BARRIER flags it; `excl` is what B's predicate looks at. */
typedef struct bar_msg {
  sh_msg hdr;
  uint32_t from, seq, excl;
} bar_msg;
typedef bar_msg bar_note, bar_fence, bar_ask, bar_gate, help_ask;
static SH_MSG_DEFINE(bar_note, SH_NOTICE, 0);
static SH_MSG_DEFINE(bar_fence, SH_NOTICE, SH_MSG_BARRIER);
static SH_MSG_DEFINE(bar_ask, SH_ASK, 0);
static SH_MSG_DEFINE(bar_gate, SH_ASK, SH_MSG_BARRIER);
static SH_MSG_DEFINE(help_ask, SH_ASK, 0);

/* What B saw; written by B's handlers only (one runs at a time), read by
 * verify after the workers are joined. */
typedef struct b_record {
  bool live;                            /* a barrier stack of B is running */
  uint32_t next[SENDERS + 1][KINDS];    /* the seq each sender's next message must have */
  uint32_t started, completed;          /* barrier stacks */
  uint32_t notes, asks;                 /* messages handled */
} b_record;

typedef struct world {
  uint8_t plan[SENDERS][ROUNDS][BURST]; /* P_* bits, drawn in setup */
  uint32_t planned_notes, planned_asks, barriers;
  const sh_addr *b, *helper;
  b_record rec;
  /* Senders to finish plus notices B has yet to handle; the run ends at 0. */
  atomic_uint left;
} world;

static sh_msg *bar_new(const sh_msg_type *t, uint32_t from, uint32_t seq, uint32_t excl) {
  bar_msg *m = (bar_msg *)sh_msg_alloc(t);
  if (m == NULL) return NULL;
  m->from = from;
  m->seq = seq;
  m->excl = excl;
  return &m->hdr;
}

static const sh_msg_type *type_of(uint8_t p) {
  bool flagged = (p & P_BARRIER) && (p & P_FLAGGED);
  if (p & P_ASK) return flagged ? &bar_gate_type : &bar_ask_type;
  return flagged ? &bar_fence_type : &bar_note_type;
}

static uint64_t answer_of(uint32_t seq) { return 2 * (uint64_t)seq + 1; }
/* Barrier asks whose stack throws instead of answering. */
static bool throws(uint32_t seq) { return seq % 3 == 0; }

static void one_less(sh_actor *self) {
  sh_scn *s = sh_scn_of(self);
  sh_scn_count_down(s, sh_actor_system(self), &((world *)sh_scn_state(s))->left);
}

/* ---- B ------------------------------------------------------------------------ */

typedef sh_scn_actor b_actor;

typedef struct b_locals {
  sh_future *f;
} b_locals;

enum { B_HELPED_ONCE = 1, B_HELPED_TWICE = 2 };

static bool b_predicate(sh_actor *self, const sh_msg *m) {
  (void)self;
  return (sh_msg_is(m, &bar_note_type) || sh_msg_is(m, &bar_ask_type)) &&
         ((const bar_msg *)m)->excl != 0;
}

static bool is_barrier(const sh_msg *m) {
  return (m->type->flags & SH_MSG_BARRIER) || ((const bar_msg *)m)->excl != 0;
}

/* The checks of a stack's first entry. */
static void b_arrival(b_actor *b, const bar_msg *m, int kind) {
  b_record *r = &((world *)sh_scn_state(b->s))->rec;
  if (!SH_SCN_CHECK(b->s, m->from <= HELPER, "B: message from unknown sender %u", m->from))
    return;
  SH_SCN_CHECK(b->s, !r->live, "B: %s %u of sender %u started inside a barrier stack",
               kind ? "ask" : "notice", m->seq, m->from);
  uint32_t *next = &r->next[m->from][kind];
  SH_SCN_CHECK(b->s, m->seq == *next, "B: sender %u's %s %u started when %u was due", m->from,
               kind ? "ask" : "notice", m->seq, *next);
  *next = m->seq + 1;
}

static sh_future *ask_helper(b_actor *b, sh_stack *st) {
  world *wd = sh_scn_state(b->s);
  const bar_msg *m = sh_stack_msg_as(st, bar_msg);
  sh_msg *q = bar_new(&help_ask_type, m->from, m->seq, 0);
  sh_future *f = q != NULL ? sh_ask(st, wd->helper, q, SH_FOREVER) : NULL;
  SH_SCN_CHECK(b->s, f != NULL, "B: could not ask the helper");
  return f;
}

/* The end of any B stack: counts, and answers an ask. */
static sh_yield b_complete(b_actor *b, sh_stack *st, int kind) {
  b_record *r = &((world *)sh_scn_state(b->s))->rec;
  const bar_msg *m = sh_stack_msg_as(st, bar_msg);
  bool barrier = is_barrier(&m->hdr);
  if (barrier) {
    r->live = false;
    r->completed++;
  }
  if (kind == 0) {
    r->notes++;
    one_less(&b->base);
    return sh_return(st, NULL);
  }
  r->asks++;
  if (barrier && throws(m->seq)) return sh_throw(st, THROWN);
  return sh_scn_answer(st, answer_of(m->seq));
}

/* A barrier stack: two round trips to the helper, during which everything
 * else sent to B waits. */
static sh_yield b_barrier(b_actor *b, sh_stack *st, int kind) {
  b_record *r = &((world *)sh_scn_state(b->s))->rec;
  b_locals *l = sh_stack_locals(st);
  int state = sh_stack_state(st);
  if (state == SH_START) {
    r->live = true;
    r->started++;
  } else {
    SH_SCN_CHECK(b->s, r->live, "B: barrier stack resumed but not live");
    SH_SCN_CHECK(b->s, sh_future_error(l->f) == 0, "B: helper failed: %d", sh_future_error(l->f));
  }
  if (state == B_HELPED_TWICE) return b_complete(b, st, kind);
  l->f = ask_helper(b, st);
  if (l->f == NULL) return b_complete(b, st, kind);
  return sh_suspend(st, state == SH_START ? B_HELPED_ONCE : B_HELPED_TWICE);
}

static sh_yield b_handle(sh_actor *self, sh_stack *st, int kind) {
  b_actor *b = (b_actor *)self;
  const bar_msg *m = sh_stack_msg_as(st, bar_msg);
  if (sh_stack_state(st) == SH_START) b_arrival(b, m, kind);
  if (is_barrier(&m->hdr)) return b_barrier(b, st, kind);
  return b_complete(b, st, kind);
}

static sh_yield b_notice(sh_actor *self, sh_stack *st) { return b_handle(self, st, 0); }
static sh_yield b_ask(sh_actor *self, sh_stack *st) { return b_handle(self, st, 1); }

static const sh_actor_class b_class = {
    .name = "barrier_b",
    .size = sizeof(b_actor),
    .locals_size = sizeof(b_locals),
    .init = sh_scn_actor_init,
    .notice = b_notice,
    .ask = b_ask,
    .barrier = b_predicate,
};

/* ---- the helper --------------------------------------------------------------- */

typedef struct helper {
  sh_scn_actor a;
  uint32_t seq; /* of its notices to B */
} helper;

/* Sends B a notice while B's barrier stack waits for this answer: the
 * notice must not start before that stack completes. */
static sh_yield helper_ask(sh_actor *self, sh_stack *st) {
  helper *h = (helper *)self;
  world *wd = sh_scn_state(h->a.s);
  sh_msg *n = bar_new(&bar_note_type, HELPER, h->seq++, 0);
  SH_SCN_CHECK(h->a.s, n != NULL && sh_notice(wd->b, n) == 0, "helper: notice to B failed");
  return sh_scn_answer(st, sh_stack_msg_as(st, bar_msg)->seq);
}

static const sh_actor_class helper_class = {
    .name = "barrier_helper",
    .size = sizeof(helper),
    .init = sh_scn_actor_init,
    .ask = helper_ask,
};

/* ---- senders ------------------------------------------------------------------ */

typedef struct sender {
  sh_scn_actor a;
  uint32_t round;
  uint32_t seq[KINDS];
} sender;

typedef struct sender_locals {
  sh_future *f[BURST];
  uint32_t seq[BURST];
  bool barrier[BURST];
  uint32_t nf;
} sender_locals;

enum { S_ANSWERED = 1 };

/* Sends slot i of this round's burst; asks are remembered in the locals. */
static void send_slot(sender *sd, sh_stack *st, sender_locals *l, uint8_t p) {
  world *wd = sh_scn_state(sd->a.s);
  int kind = (p & P_ASK) ? 1 : 0;
  uint32_t seq = sd->seq[kind]++;
  bool pred = (p & P_BARRIER) && !(p & P_FLAGGED);
  sh_msg *m = bar_new(type_of(p), sd->a.id, seq, pred);
  if (kind == 0) {
    SH_SCN_CHECK(sd->a.s, m != NULL && sh_notice(wd->b, m) == 0, "sender %u: notice failed",
                 sd->a.id);
    return;
  }
  sh_future *f = m != NULL ? sh_ask(st, wd->b, m, SH_FOREVER) : NULL;
  if (!SH_SCN_CHECK(sd->a.s, f != NULL, "sender %u: ask failed", sd->a.id)) return;
  l->f[l->nf] = f;
  l->seq[l->nf] = seq;
  l->barrier[l->nf] = (p & P_BARRIER) != 0;
  l->nf++;
}

static void check_answer(sender *sd, const sender_locals *l, uint32_t i) {
  int err = sh_future_error(l->f[i]);
  const sh_scn_num *r = sh_future_reply(l->f[i], sh_scn_num);
  if (l->barrier[i] && throws(l->seq[i])) {
    SH_SCN_CHECK(sd->a.s, err == THROWN, "sender %u: barrier ask %u ended with %d, want %d",
                 sd->a.id, l->seq[i], err, THROWN);
    return;
  }
  SH_SCN_CHECK(sd->a.s, err == 0 && r != NULL && r->v == answer_of(l->seq[i]),
               "sender %u: ask %u answered %llu (error %d)", sd->a.id, l->seq[i],
               r != NULL ? (unsigned long long)r->v : 0ull, err);
}

/* One round: the whole burst from one invocation, then the answers. */
static sh_yield sender_notice(sh_actor *self, sh_stack *st) {
  sender *sd = (sender *)self;
  world *wd = sh_scn_state(sd->a.s);
  sender_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    for (uint32_t i = 0; i < BURST; i++) send_slot(sd, st, l, wd->plan[sd->a.id][sd->round][i]);
    if (l->nf > 0) return sh_suspend(st, S_ANSWERED);
  } else {
    for (uint32_t i = 0; i < l->nf; i++) check_answer(sd, l, i);
  }
  return sh_scn_round_end(st, ++sd->round < ROUNDS, &wd->left);
}

static const sh_actor_class sender_class = {
    .name = "barrier_sender",
    .size = sizeof(sender),
    .locals_size = sizeof(sender_locals),
    .init = sh_scn_actor_init,
    .notice = sender_notice,
};

/* ---- the run ------------------------------------------------------------------ */

/* The workload, fixed by the seed: one slot in four a barrier, half of the
 * barriers by type flag and half by predicate; asks and notices even. */
static void draw_plan(sh_scn *s, world *wd) {
  for (uint32_t k = 0; k < SENDERS; k++)
    for (uint32_t r = 0; r < ROUNDS; r++)
      for (uint32_t i = 0; i < BURST; i++) {
        uint64_t x = sh_scn_rand(s);
        uint8_t p = (uint8_t)((x & 1) ? P_ASK : 0);
        if (((x >> 1) & 3) == 0) p |= (uint8_t)(P_BARRIER | (((x >> 3) & 1) ? P_FLAGGED : 0));
        wd->plan[k][r][i] = p;
        if (p & P_ASK)
          wd->planned_asks++;
        else
          wd->planned_notes++;
        if (p & P_BARRIER) wd->barriers++;
      }
}

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  uint32_t workers = sh_scn_workers(s);
  draw_plan(s, wd);
  /* Every barrier stack makes the helper send B one notice per round trip. */
  atomic_store_explicit(&wd->left, SENDERS + wd->planned_notes + 2 * wd->barriers,
                        memory_order_relaxed);
  int rc = sh_scn_spawn_on(s, sys, &b_class, 0, 0, &wd->b);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &helper_class, 0, 1 % workers, &wd->helper);
  if (rc == 0)
    rc = sh_scn_spawn_each(s, sys, &sender_class, SENDERS, SH_SCN_EACH_PINNED | SH_SCN_EACH_KICK,
                           NULL);
  return rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  world *wd = sh_scn_state(s);
  const b_record *r = &wd->rec;
  uint32_t notes = wd->planned_notes + 2 * wd->barriers;
  SH_SCN_CHECK(s, r->started == wd->barriers && r->completed == wd->barriers,
               "barrier stacks: %u started, %u completed, want %u", r->started, r->completed,
               wd->barriers);
  SH_SCN_CHECK(s, r->notes == notes && r->asks == wd->planned_asks,
               "B handled %u notices and %u asks, want %u and %u", r->notes, r->asks, notes,
               wd->planned_asks);
  SH_SCN_CHECK(s, r->next[HELPER][0] == 2 * wd->barriers, "B saw %u helper notices, want %u",
               r->next[HELPER][0], 2 * wd->barriers);
  uint64_t asks = wd->planned_asks + 2ull * wd->barriers;
  SH_SCN_CHECK_EQ(s, st->asks, asks, "asks");
  /* Notices to B, asks and their answers, the senders' round notices. */
  SH_SCN_CHECK_EQ(s, st->delivered, notes + 2 * asks + (uint64_t)SENDERS * ROUNDS, "delivered");
}

static const sh_scenario barrier = {
    .name = "barrier",
    .summary = "barriers hold later asks and notices until the barrier stack completes",
    .workers = 3,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(barrier);
