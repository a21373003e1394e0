/*
 * ordered: per-sender order of an ordered actor class (sh_actor_class
 * .ordered), several senders on several workers.
 *
 * SENDERS actors, one per worker in turn, each run ROUNDS rounds; a round
 * sends one receiver a burst of asks and notices, mixed as drawn in setup,
 * without waiting between them, then waits for every answer. Two ordered
 * receivers: one unbounded that batches its notices (a batch is cut where
 * an ask comes between), one bounded (ask_capacity CAP, which bounds its
 * notices too) fed with sh_put, so that senders queue for room and are let
 * in one by one. Every message carries its sender and its number in that
 * sender's sequence to that receiver. Invariants:
 *   - a receiver takes each sender's messages in the order sent, asks and
 *     notices together: each number follows on from the one before;
 *   - an ask's answer says how many of its sender's messages the receiver
 *     had taken when it came: all those sent before the ask, so no ask
 *     went ahead of a notice sent before it;
 *   - every put admitted, every ask answered, every message handled once.
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/scenario.h>

#define SENDERS 6
#define RECEIVERS 2
#define ROUNDS 12
#define BURST 8 /* messages per round at most */
#define CAP 3   /* the bounded receiver's ask_capacity */
#define PER_RUN 4

typedef struct or_note {
  sh_msg hdr;
  uint32_t sender, seq;
} or_note;
static SH_MSG_DEFINE(or_note, SH_NOTICE, 0);

/* A round's burst: n messages, bit i of asks set when message i is an ask. */
typedef struct burst {
  uint32_t n, asks;
} burst;

typedef struct world {
  const sh_addr *receivers[RECEIVERS];
  burst plan[SENDERS][ROUNDS];
  atomic_uint handled;
  atomic_uint left; /* messages to handle and senders to finish; 0 ends the run */
} world;

/* ---- receivers ---------------------------------------------------------------- */

typedef struct receiver {
  sh_scn_actor a;
  uint32_t next[SENDERS]; /* each sender's next number */
} receiver;

/* The message numbered seq from sender: it must be the one due. */
static void take(receiver *r, uint32_t sender, uint32_t seq) {
  sh_scn *s = r->a.s;
  if (!SH_SCN_CHECK(s, sender < SENDERS, "receiver %u: sender %u", r->a.id, sender)) return;
  SH_SCN_CHECK(s, seq == r->next[sender], "receiver %u: sender %u's message %u taken when %u was due",
               r->a.id, sender, seq, r->next[sender]);
  r->next[sender] = seq + 1;
  world *w = sh_scn_state(s);
  atomic_fetch_add_explicit(&w->handled, 1, memory_order_relaxed);
  sh_scn_count_down(s, sh_actor_system(&r->a.base), &w->left);
}

static void take_note(receiver *r, const sh_msg *m) {
  const or_note *n = (const or_note *)m;
  take(r, n->sender, n->seq);
}

static sh_yield receiver_notice(sh_actor *self, sh_stack *st) {
  take_note((receiver *)self, sh_stack_msg(st));
  return sh_return(st, NULL);
}

static sh_yield receiver_batch(sh_actor *self, sh_stack *st) {
  for (size_t i = 0; i < sh_stack_batch_len(st); i++)
    take_note((receiver *)self, sh_stack_batch_msg(st, i));
  return sh_return(st, NULL);
}

static bool all_notes(sh_actor *self, const sh_msg *m) {
  (void)self;
  return sh_msg_is(m, &or_note_type);
}

/* Answers with how many of the sender's messages it has taken, this one
 * included. */
static sh_yield receiver_ask(sh_actor *self, sh_stack *st) {
  receiver *r = (receiver *)self;
  uint64_t v = sh_stack_msg_as(st, sh_scn_num_ask)->v;
  uint32_t sender = (uint32_t)(v >> 32);
  take(r, sender, (uint32_t)v);
  return sh_scn_answer(st, sender < SENDERS ? r->next[sender] : 0);
}

static const sh_actor_class batching_class = {
    .name = "ordered_batching",
    .size = sizeof(receiver),
    .init = sh_scn_actor_init,
    .notice = receiver_notice,
    .ask = receiver_ask,
    .batch_notice = receiver_batch,
    .batch_notice_filter = all_notes,
    .ordered = true,
};

static const sh_actor_class bounded_class = {
    .name = "ordered_bounded",
    .size = sizeof(receiver),
    .init = sh_scn_actor_init,
    .notice = receiver_notice,
    .ask = receiver_ask,
    .ask_capacity = CAP,
    .ordered = true,
};

/* ---- senders ------------------------------------------------------------------ */

typedef struct sender {
  sh_scn_actor a;
  uint32_t round;
  uint32_t seq[RECEIVERS]; /* the next number to each receiver */
} sender;

typedef struct s_locals {
  sh_future *f[BURST];
  uint32_t want[BURST]; /* an ask's answer; 0 for a put */
  uint32_t n;
} s_locals;

enum { S_ANSWERED = 1 };

static uint32_t target_of(const sender *sd) { return (sd->a.id + sd->round) % RECEIVERS; }

/* Message i of the burst to receiver t: a future to wait for, or none (a
 * plain notice). */
static void send_one(sender *sd, s_locals *l, sh_stack *st, uint32_t t, bool ask) {
  world *w = sh_scn_state(sd->a.s);
  uint32_t seq = sd->seq[t]++;
  sh_future *f = NULL;
  if (ask) {
    f = sh_scn_ask_num(st, w->receivers[t], (uint64_t)sd->a.id << 32 | seq, SH_FOREVER);
  } else {
    or_note *n = sh_msg_new(or_note, .sender = sd->a.id, .seq = seq);
    if (n != NULL && t == 0) {
      SH_SCN_CHECK(sd->a.s, sh_notice(w->receivers[t], &n->hdr) == 0, "sender %u: notice refused",
                   sd->a.id);
      return;
    }
    f = n != NULL ? sh_put(st, w->receivers[t], &n->hdr, SH_FOREVER) : NULL;
  }
  if (!SH_SCN_CHECK(sd->a.s, f != NULL, "sender %u: send %u failed", sd->a.id, seq)) return;
  l->f[l->n] = f;
  l->want[l->n++] = ask ? seq + 1 : 0;
}

static void check_answers(sender *sd, const s_locals *l) {
  for (uint32_t i = 0; i < l->n; i++) {
    uint64_t v = 0;
    if (l->want[i] == 0) {
      SH_SCN_CHECK(sd->a.s, sh_future_error(l->f[i]) == 0, "sender %u: put failed: %d", sd->a.id,
                   sh_future_error(l->f[i]));
      continue;
    }
    SH_SCN_CHECK(sd->a.s, sh_scn_num_of(l->f[i], &v) && v == l->want[i],
                 "sender %u round %u: ask answered %llu, want %u (an ask overtook)", sd->a.id,
                 sd->round, (unsigned long long)v, l->want[i]);
  }
}

static sh_yield sender_notice(sh_actor *self, sh_stack *st) {
  sender *sd = (sender *)self;
  world *w = sh_scn_state(sd->a.s);
  s_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    const burst *b = &w->plan[sd->a.id][sd->round];
    uint32_t t = target_of(sd);
    for (uint32_t i = 0; i < b->n; i++) send_one(sd, l, st, t, (b->asks >> i & 1u) != 0);
    if (l->n > 0) return sh_suspend(st, S_ANSWERED);
  }
  check_answers(sd, l);
  bool more = ++sd->round < ROUNDS;
  return sh_scn_round_end(st, more, &w->left);
}

static const sh_actor_class sender_class = {
    .name = "ordered_sender",
    .size = sizeof(sender),
    .locals_size = sizeof(s_locals),
    .init = sh_scn_actor_init,
    .notice = sender_notice,
};

/* ---- the run ------------------------------------------------------------------ */

/* A small budget: receivers' runs end often, mid-burst. */
static void configure(sh_scn *s, sh_config *cfg) {
  (void)s;
  cfg->max_per_run = PER_RUN;
}

static int setup(sh_scn *s, sh_system *sys) {
  world *w = sh_scn_state(s);
  for (uint32_t i = 0; i < SENDERS; i++)
    for (uint32_t r = 0; r < ROUNDS; r++) {
      uint64_t x = sh_scn_rand(s);
      w->plan[i][r] = (burst){1 + (uint32_t)(x % BURST), (uint32_t)(x >> 32)};
    }
  /* The run ends once every message is handled and every sender done: a
   * sender's last notices may still be on their way when it is. */
  uint32_t total = SENDERS;
  for (uint32_t i = 0; i < SENDERS; i++)
    for (uint32_t r = 0; r < ROUNDS; r++) total += w->plan[i][r].n;
  atomic_store(&w->left, total);
  const sh_actor_class *rc[RECEIVERS] = {&batching_class, &bounded_class};
  for (uint32_t t = 0; t < RECEIVERS; t++) {
    int rv = sh_scn_spawn_on(s, sys, rc[t], t, t % sh_scn_workers(s), &w->receivers[t]);
    if (rv != 0) return rv;
  }
  return sh_scn_spawn_each(s, sys, &sender_class, SENDERS, SH_SCN_EACH_PINNED | SH_SCN_EACH_KICK,
                           NULL);
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  world *w = sh_scn_state(s);
  uint32_t want = 0;
  for (uint32_t i = 0; i < SENDERS; i++)
    for (uint32_t r = 0; r < ROUNDS; r++) want += w->plan[i][r].n;
  SH_SCN_CHECK_EQ(s, atomic_load(&w->handled), want, "messages handled");
  SH_SCN_CHECK_EQ(s, atomic_load(&w->left), 0, "messages or senders not done");
}

static const sh_scenario ordered = {
    .name = "ordered",
    .summary = "ordered classes: each sender's asks and notices taken in the order sent",
    .workers = 3,
    .state_size = sizeof(world),
    .configure = configure,
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(ordered);
