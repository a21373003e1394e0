/*
 * batch: batch notices and batch asks (the batch stacks; and two bugs of
 * the original design: batched asks answered from envelopes already
 * recycled, bug 3, and a per-run message limit never applied, bug 5).
 *
 * One collector C (worker 0) has a batch handler and a filter for notices
 * and for asks, and single handlers for what the filters refuse; max_batch
 * comes from the system configuration. Two phases:
 *
 *   A. Sender 0, on C's worker, sends PHASE_A notices (a seeded pattern of
 *      batchable and not) from one invocation. C cannot run meanwhile (its
 *      worker is busy, and too few houses are queued there for another
 *      worker to steal one), so its next run finds them all: the batches
 *      must be exactly the runs of batchable notices cut into max_batch
 *      chunks, the others one by one, in order.
 *   B. Senders on every worker send rounds of mixed notices and asks,
 *      batchable or not. Every message is handled exactly once; no batch is
 *      larger than max_batch or holds a message its filter refuses; from each
 *      sender, notices and asks start in the order they were sent, across the
 *      batch and single paths. A batch ask stack takes memory of the asks'
 *      own size and suspends on an ask before answering (bug 3: envelopes
 *      recycled before their sender and id were read), then answers odd
 *      asks with sh_batch_reply and the rest with sh_return's shared reply:
 *      each asker checks it got the answer meant for it.
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/scenario.h>

#define SENDERS 3
#define LIMIT 4       /* sh_config.max_batch */
#define PHASE_A 24    /* below max_per_run: one run of C takes them all */
#define ROUNDS 10
#define BURST 10
#define JUNK (LIMIT + 2)
#define COMMON UINT64_MAX /* sh_return's reply: no 2v + 1 or 2v + 3 reaches it */
#define KINDS 2           /* 0 notices, 1 asks */

enum { P_ASK = 1, P_BATCHABLE = 2 };

typedef struct bt_note {
  sh_msg hdr;
  uint32_t from, seq, batchable, phase_a;
} bt_note;
static SH_MSG_DEFINE(bt_note, SH_NOTICE, 0);

typedef struct bt_ask {
  sh_msg hdr;
  uint32_t from, seq, batchable;
  uint64_t v;
} bt_ask;
static SH_MSG_DEFINE(bt_ask, SH_ASK, 0);

/* A sender's start notice (sh_scn_go) says which: a phase-B round, or the
 * phase-A burst. */
enum { GO_ROUND = 0, GO_PHASE_A = 1 };

/* Each ask's value is unique in the run. */
static uint64_t value_of(uint32_t from, uint32_t seq) { return ((uint64_t)from << 32) | seq; }

/* What an ask must be answered with. */
static uint64_t answer_of(uint64_t v, bool batchable) {
  if (!batchable) return 2 * v + 3;     /* the single handler */
  return (v & 1) ? 2 * v + 1 : COMMON; /* sh_batch_reply, or sh_return's copy */
}

/* What C saw; written by C's handlers only, read by verify after the join. */
typedef struct c_record {
  uint32_t next[SENDERS][KINDS];
  uint32_t notes, asks;                /* handled, both paths */
  uint32_t batched[KINDS], batches[KINDS];
  uint32_t largest;                    /* the largest batch */
  uint32_t groups[PHASE_A], ngroups;   /* phase A: batch sizes, 0 for a single */
  uint32_t phase_a_seen;
} c_record;

typedef struct world {
  bool pattern_a[PHASE_A];             /* batchable? */
  uint8_t plan[SENDERS][ROUNDS][BURST];
  uint32_t planned_notes, planned_asks;
  uint32_t planned_batchable[KINDS]; /* both phases */
  const sh_addr *c, *helper, *senders[SENDERS];
  c_record rec;
  /* Senders to finish plus phase-B notices C has yet to handle; 0 ends the
   * run. */
  atomic_uint left;
} world;

/* ---- C ------------------------------------------------------------------------ */

typedef sh_scn_actor collector;

typedef struct c_locals {
  sh_future *f;
  sh_msg *junk[JUNK];
} c_locals;

enum { C_ANSWER = 1 };

static c_record *rec_of(collector *c) { return &((world *)sh_scn_state(c->s))->rec; }

static bool note_filter(sh_actor *self, const sh_msg *m) {
  (void)self;
  return sh_msg_is(m, &bt_note_type) && ((const bt_note *)m)->batchable;
}

static bool ask_filter(sh_actor *self, const sh_msg *m) {
  (void)self;
  return sh_msg_is(m, &bt_ask_type) && ((const bt_ask *)m)->batchable;
}

/* The checks of one message as its stack starts: the right path, in order. */
static void arrival(collector *c, int kind, uint32_t from, uint32_t seq, bool batchable,
                    bool batched) {
  c_record *r = rec_of(c);
  SH_SCN_CHECK(c->s, batchable == batched, "C: %s %u of sender %u (batchable %d) went %s",
               kind ? "ask" : "notice", seq, from, batchable, batched ? "batched" : "alone");
  if (!SH_SCN_CHECK(c->s, from < SENDERS, "C: unknown sender %u", from)) return;
  uint32_t *next = &r->next[from][kind];
  SH_SCN_CHECK(c->s, seq == *next, "C: sender %u's %s %u started when %u was due", from,
               kind ? "ask" : "notice", seq, *next);
  *next = seq + 1;
  if (kind)
    r->asks++;
  else
    r->notes++;
}

/* The size checks of a batch stack's first entry. */
static size_t batch_start(collector *c, sh_stack *st, int kind) {
  c_record *r = rec_of(c);
  size_t n = sh_stack_batch_len(st);
  SH_SCN_CHECK(c->s, n >= 1 && n <= LIMIT && sh_stack_msg(st) == NULL &&
                         sh_stack_batch_msg(st, n) == NULL,
               "C: a %s batch of %zu (max %d)", kind ? "ask" : "notice", n, LIMIT);
  r->batches[kind]++;
  r->batched[kind] += (uint32_t)n;
  if (n > r->largest) r->largest = (uint32_t)n;
  return n;
}

/* Phase B begins once C has handled the whole phase-A burst. */
static void start_phase_b(collector *c) {
  world *wd = sh_scn_state(c->s);
  for (uint32_t k = 0; k < SENDERS; k++)
    SH_SCN_CHECK(c->s, sh_scn_kick_n(wd->senders[k], GO_ROUND) == 0,
                 "C: could not start sender %u", k);
}

/* A notice handled (alone, or as part of a batch of `group`). */
static void note_done(collector *c, const bt_note *n, uint32_t group, bool first) {
  world *wd = sh_scn_state(c->s);
  c_record *r = &wd->rec;
  if (!n->phase_a) {
    sh_scn_count_down(c->s, sh_actor_system(&c->base), &wd->left);
    return;
  }
  if (first && r->ngroups < PHASE_A) r->groups[r->ngroups++] = group;
  if (++r->phase_a_seen == PHASE_A) start_phase_b(c);
}

static sh_yield c_notice(sh_actor *self, sh_stack *st) {
  collector *c = (collector *)self;
  const bt_note *n = sh_stack_msg_as(st, bt_note);
  arrival(c, 0, n->from, n->seq, n->batchable, false);
  note_done(c, n, 0, true);
  return sh_return(st, NULL);
}

static sh_yield c_batch_notice(sh_actor *self, sh_stack *st) {
  collector *c = (collector *)self;
  size_t len = batch_start(c, st, 0);
  for (size_t i = 0; i < len; i++) {
    const bt_note *n = (const bt_note *)sh_stack_batch_msg(st, i);
    arrival(c, 0, n->from, n->seq, note_filter(self, &n->hdr), true);
    note_done(c, n, (uint32_t)len, i == 0);
  }
  return sh_return(st, NULL);
}

static sh_yield c_ask(sh_actor *self, sh_stack *st) {
  collector *c = (collector *)self;
  const bt_ask *a = sh_stack_msg_as(st, bt_ask);
  arrival(c, 1, a->from, a->seq, a->batchable, false);
  return sh_scn_answer(st, answer_of(a->v, false));
}

/* Messages of the asks' size class, marked: an ask envelope of this batch
 * wrongly back in the pool would be handed out here and overwritten. */
static void take_junk(collector *c, c_locals *l) {
  for (int i = 0; i < JUNK; i++) {
    bt_ask *j = sh_msg_new(bt_ask, .from = UINT32_MAX, .v = COMMON);
    SH_SCN_CHECK(c->s, j != NULL, "C: out of memory");
    l->junk[i] = j != NULL ? &j->hdr : NULL;
  }
}

static void free_junk(collector *c, c_locals *l) {
  for (int i = 0; i < JUNK; i++) {
    const bt_ask *j = (const bt_ask *)l->junk[i];
    SH_SCN_CHECK(c->s, j == NULL || (j->from == UINT32_MAX && j->v == COMMON),
                 "C: junk message overwritten");
    sh_msg_free(l->junk[i]);
  }
}

/* Odd values get their own reply; the rest share sh_return's. */
static sh_yield answer_batch(collector *c, sh_stack *st) {
  size_t len = sh_stack_batch_len(st);
  for (size_t i = 0; i < len; i++) {
    const bt_ask *a = (const bt_ask *)sh_stack_batch_msg(st, i);
    SH_SCN_CHECK(c->s, a->from < SENDERS && a->v == value_of(a->from, a->seq),
                 "C: batched ask %zu changed while its stack waited", i);
    if (a->v & 1)
      SH_SCN_CHECK(c->s, sh_batch_reply(st, i, sh_scn_num_new(answer_of(a->v, true))) == 0,
                   "C: sh_batch_reply failed");
  }
  return sh_return(st, sh_scn_num_new(COMMON));
}

static sh_yield c_batch_ask(sh_actor *self, sh_stack *st) {
  collector *c = (collector *)self;
  world *wd = sh_scn_state(c->s);
  c_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == C_ANSWER) {
    SH_SCN_CHECK(c->s, sh_future_error(l->f) == 0, "C: helper failed: %d", sh_future_error(l->f));
    free_junk(c, l);
    return answer_batch(c, st);
  }
  size_t len = batch_start(c, st, 1);
  for (size_t i = 0; i < len; i++) {
    const bt_ask *a = (const bt_ask *)sh_stack_batch_msg(st, i);
    arrival(c, 1, a->from, a->seq, ask_filter(self, &a->hdr), true);
  }
  take_junk(c, l);
  /* Other stacks of C run (and allocate) while this one waits. */
  bt_ask *q = sh_msg_new(bt_ask, .from = UINT32_MAX);
  l->f = q != NULL ? sh_ask(st, wd->helper, &q->hdr, SH_FOREVER) : NULL;
  if (!SH_SCN_CHECK(c->s, l->f != NULL, "C: could not ask the helper")) {
    free_junk(c, l);
    return answer_batch(c, st);
  }
  return sh_suspend(st, C_ANSWER);
}

static const sh_actor_class collector_class = {
    .name = "batch_collector",
    .size = sizeof(collector),
    .locals_size = sizeof(c_locals),
    .init = sh_scn_actor_init,
    .notice = c_notice,
    .ask = c_ask,
    .batch_notice = c_batch_notice,
    .batch_ask = c_batch_ask,
    .batch_notice_filter = note_filter,
    .batch_ask_filter = ask_filter,
    /* max_batch 0: the system's (configure). */
};

/* ---- the helper ----------------------------------------------------------------- */

static sh_yield helper_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_scn_answer(st, 0);
}

static const sh_actor_class helper_class = {
    .name = "batch_helper",
    .size = sizeof(sh_actor),
    .ask = helper_ask,
};

/* ---- senders -------------------------------------------------------------------- */

typedef struct sender {
  sh_scn_actor a;
  uint32_t round;
  uint32_t seq[KINDS];
} sender;

typedef struct sender_locals {
  sh_future *f[BURST];
  uint64_t v[BURST];
  bool batchable[BURST];
  uint32_t nf;
} sender_locals;

enum { S_ANSWERED = 1 };

static void send_note(sender *sd, bool batchable, bool phase_a) {
  world *wd = sh_scn_state(sd->a.s);
  bt_note *n = sh_msg_new(bt_note, .from = sd->a.id, .seq = sd->seq[0]++, .batchable = batchable,
                          .phase_a = phase_a);
  SH_SCN_CHECK(sd->a.s, n != NULL && sh_notice(wd->c, &n->hdr) == 0, "sender %u: notice failed",
               sd->a.id);
}

static void send_ask(sender *sd, sh_stack *st, sender_locals *l, bool batchable) {
  world *wd = sh_scn_state(sd->a.s);
  uint32_t seq = sd->seq[1]++;
  uint64_t v = value_of(sd->a.id, seq);
  bt_ask *a = sh_msg_new(bt_ask, .from = sd->a.id, .seq = seq, .batchable = batchable, .v = v);
  sh_future *f = a != NULL ? sh_ask(st, wd->c, &a->hdr, SH_FOREVER) : NULL;
  if (!SH_SCN_CHECK(sd->a.s, f != NULL, "sender %u: ask failed", sd->a.id)) return;
  l->f[l->nf] = f;
  l->v[l->nf] = v;
  l->batchable[l->nf] = batchable;
  l->nf++;
}

static void check_answer(sender *sd, const sender_locals *l, uint32_t i) {
  const sh_scn_num *r = sh_future_reply(l->f[i], sh_scn_num);
  uint64_t want = answer_of(l->v[i], l->batchable[i]);
  SH_SCN_CHECK(sd->a.s, sh_future_error(l->f[i]) == 0 && r != NULL && r->v == want,
               "sender %u: ask %llu (batchable %d) answered %llu, want %llu (error %d)", sd->a.id,
               (unsigned long long)(l->v[i] & UINT32_MAX), l->batchable[i],
               r != NULL ? (unsigned long long)r->v : 0ull, (unsigned long long)want,
               sh_future_error(l->f[i]));
}

static sh_yield sender_notice(sh_actor *self, sh_stack *st) {
  sender *sd = (sender *)self;
  world *wd = sh_scn_state(sd->a.s);
  sender_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == S_ANSWERED) {
    for (uint32_t i = 0; i < l->nf; i++) check_answer(sd, l, i);
    return sh_scn_round_end(st, ++sd->round < ROUNDS, &wd->left);
  }
  if (sh_scn_go_n(st) == GO_PHASE_A) {
    for (uint32_t i = 0; i < PHASE_A; i++) send_note(sd, wd->pattern_a[i], true);
    return sh_return(st, NULL);
  }
  for (uint32_t i = 0; i < BURST; i++) {
    uint8_t p = wd->plan[sd->a.id][sd->round][i];
    if (p & P_ASK)
      send_ask(sd, st, l, (p & P_BATCHABLE) != 0);
    else
      send_note(sd, (p & P_BATCHABLE) != 0, false);
  }
  if (l->nf > 0) return sh_suspend(st, S_ANSWERED);
  return sh_scn_round_end(st, ++sd->round < ROUNDS, &wd->left);
}

static const sh_actor_class sender_class = {
    .name = "batch_sender",
    .size = sizeof(sender),
    .locals_size = sizeof(sender_locals),
    .init = sh_scn_actor_init,
    .notice = sender_notice,
};

/* ---- the run -------------------------------------------------------------------- */

static void configure(sh_scn *s, sh_config *cfg) {
  (void)s;
  cfg->max_batch = LIMIT;
  if (cfg->max_per_run < PHASE_A) cfg->max_per_run = PHASE_A;
}

/* The workload, fixed by the seed: three in four batchable. */
static void draw_plan(sh_scn *s, world *wd) {
  for (uint32_t i = 0; i < PHASE_A; i++) {
    wd->pattern_a[i] = (sh_scn_rand(s) & 3) != 0;
    wd->planned_batchable[0] += wd->pattern_a[i];
  }
  for (uint32_t k = 0; k < SENDERS; k++)
    for (uint32_t r = 0; r < ROUNDS; r++)
      for (uint32_t i = 0; i < BURST; i++) {
        uint64_t x = sh_scn_rand(s);
        uint8_t p = (uint8_t)(((x & 1) ? P_ASK : 0) | (((x >> 1) & 3) != 0 ? P_BATCHABLE : 0));
        wd->plan[k][r][i] = p;
        if (p & P_BATCHABLE) wd->planned_batchable[(p & P_ASK) ? 1 : 0]++;
        if (p & P_ASK)
          wd->planned_asks++;
        else
          wd->planned_notes++;
      }
}

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  uint32_t workers = sh_scn_workers(s);
  draw_plan(s, wd);
  atomic_store(&wd->left, SENDERS + wd->planned_notes);
  int rc = sh_scn_spawn_on(s, sys, &collector_class, 0, 0, &wd->c);
  if (rc == 0) rc = sh_spawn_on(sys, &helper_class, NULL, 1 % workers, &wd->helper);
  if (rc == 0)
    rc = sh_scn_spawn_each(s, sys, &sender_class, SENDERS, SH_SCN_EACH_PINNED, wd->senders);
  return rc == 0 ? sh_scn_kick_n(wd->senders[0], GO_PHASE_A) : rc;
}

/* Phase A's batches as a correct runtime makes them from one drain: runs
 * of batchable notices cut into LIMIT chunks, the others alone (0). */
static uint32_t expected_groups(const bool *batchable, uint32_t *out) {
  uint32_t n = 0, run = 0;
  for (uint32_t i = 0; i < PHASE_A; i++) {
    if (batchable[i]) {
      if (++run == LIMIT) {
        out[n++] = run;
        run = 0;
      }
      continue;
    }
    if (run > 0) out[n++] = run;
    run = 0;
    out[n++] = 0;
  }
  if (run > 0) out[n++] = run;
  return n;
}

static void verify_phase_a(sh_scn *s, const world *wd) {
  uint32_t want[PHASE_A];
  uint32_t n = expected_groups(wd->pattern_a, want);
  const c_record *r = &wd->rec;
  SH_SCN_CHECK(s, r->phase_a_seen == PHASE_A, "phase A: %u notices handled, want %d",
               r->phase_a_seen, PHASE_A);
  SH_SCN_CHECK(s, r->ngroups == n, "phase A: %u batch/single stacks, want %u", r->ngroups, n);
  for (uint32_t i = 0; i < n && i < r->ngroups; i++)
    SH_SCN_CHECK(s, r->groups[i] == want[i], "phase A: stack %u had %u notices, want %u%s", i,
                 r->groups[i], want[i], want[i] == 0 ? " (alone)" : "");
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  world *wd = sh_scn_state(s);
  const c_record *r = &wd->rec;
  verify_phase_a(s, wd);
  uint32_t notes = PHASE_A + wd->planned_notes;
  SH_SCN_CHECK(s, r->notes == notes && r->asks == wd->planned_asks,
               "C handled %u notices and %u asks, want %u and %u", r->notes, r->asks, notes,
               wd->planned_asks);
  SH_SCN_CHECK(s, r->largest <= LIMIT, "a batch of %u (max %d)", r->largest, LIMIT);
  for (int k = 0; k < KINDS; k++)
    SH_SCN_CHECK(s, r->batched[k] == wd->planned_batchable[k],
                 "%u %s handled in batches, want every batchable one: %u", r->batched[k],
                 k ? "asks" : "notices", wd->planned_batchable[k]);
  uint64_t asks = wd->planned_asks + (uint64_t)r->batches[1]; /* one helper ask per batch */
  SH_SCN_CHECK_EQ(s, st->asks, asks, "asks");
  /* Notices to C, asks and answers, and the senders' go notices. */
  SH_SCN_CHECK_EQ(s, st->delivered, notes + 2 * asks + 1 + (uint64_t)SENDERS * ROUNDS,
                  "delivered");
  SH_SCN_CHECK(s, st->replies_unknown == 0, "%llu unknown replies",
               (unsigned long long)st->replies_unknown);
}

static const sh_scenario batch = {
    .name = "batch",
    .summary = "batch notices and asks: max_batch, filters, order, each answer to its asker",
    .workers = 3,
    .state_size = sizeof(world),
    .configure = configure,
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(batch);
