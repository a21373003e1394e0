/*
 * Two rules of a house run, for messages that arrive while the actor is
 * busy in a handler:
 *
 *   run_order     they are taken in mailbox order after it: replies, then
 *                 exceptions, asks, notices -- as when they queue while the
 *                 actor is idle. A run that drained a lower mailbox to the
 *                 end before looking up again got this wrong;
 *   stop_running  sh_stop comes while the handler runs: it finishes, and
 *                 nothing queued starts after it. Queued asks are answered
 *                 -ESHUTDOWN and queued notices dropped (counted), on an
 *                 unbounded mailbox, a bounded one, or into a batch that was
 *                 being built when the stop came (its filter, the actor's
 *                 own code, stops it). A run that looked at the stop once,
 *                 as it began, got this wrong.
 *
 * X (worker 0) is the actor under test, Y (worker 1) its peer. X's busy
 * handler -- for a start notice, or for an ask of Y's, drawn per seed --
 * asks Y for some replies and some exceptions (run_order), sends Y a go,
 * and then keeps its worker, polling with sh_yield_cpu, until Y reports
 * that the answers, its notices and asks to X (how many: drawn), and in
 * stop_running the stop, are all in. Every step is caused by the one
 * before, so the checks are exact on any schedule:
 *   - run_order: X handles every message, kinds in the order above;
 *   - stop_running: X handles none of them, Y's asks fail -ESHUTDOWN, X's
 *     stop hook runs once, dropped_stopped counts every notice and ask, and
 *     the handler that was running finished (its ask, if any, answered).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <stackhouse/probe.h>

#include <stackhouse/scenario.h>

#define MAX_EACH 3 /* X's asks of each answer kind, Y's notices, Y's asks: 1..MAX_EACH */
#define MAX_SEEN (4 * MAX_EACH)

/* What X handles, by rank in the mailbox order. */
enum { K_REPLY = 0, K_EXCEPTION, K_ASK, K_NOTICE, K_KINDS };
static const char *const kind_name[K_KINDS] = {"a reply", "an exception", "an ask", "a notice"};

/* Start notices (sh_scn_go.n) and ask values (sh_scn_num_ask.v). */
enum { GO_BUSY = 1, GO_NOTE, GO_KICK, GO_QUEUE };
enum { Q_REPLY = 0, Q_THROW, Q_BUSY, Q_PLAIN };

/* stop_running's X: an unbounded mailbox, a bounded one, or batches. */
enum { X_PLAIN = 0, X_BOUNDED, X_BATCH, X_VARIANTS };

typedef struct world {
  /* Drawn in setup. */
  bool stop_case, busy_ask;
  uint32_t variant, replies, exceptions, notes, asks;
  const sh_addr *x, *y;
  atomic_uint progress; /* Y's reports, polled by X's busy handler */
  atomic_uint left;     /* the workload's end */
  /* X's, one handler at a time; verify reads them after the join. */
  uint32_t seen[MAX_SEEN], nseen, batches, stops;
  /* Y's. */
  uint32_t asks_answered, asks_refused;
  int busy_err;
} world;

static world *world_of(const sh_actor *self) { return sh_scn_state(sh_scn_of(self)); }

static void one_less(sh_actor *self) {
  sh_scn_count_down(sh_scn_of(self), sh_actor_system(self), &world_of(self)->left);
}

/* ---- X ------------------------------------------------------------------------- */

typedef struct rx_actor {
  sh_scn_actor sa;
  uint32_t filtered; /* messages its batch filters took */
} rx_actor;

typedef struct rx_locals {
  sh_future *f[2 * MAX_EACH];
  bool logged[2 * MAX_EACH];
  uint32_t nf;
} rx_locals;
enum { RX_ANSWERS = 1 };

static uint32_t expected_seen(const world *w) {
  return w->stop_case ? 0 : w->replies + w->exceptions + w->notes + w->asks;
}

static void rx_saw(sh_actor *self, uint32_t kind) {
  world *w = world_of(self);
  sh_scn *s = sh_scn_of(self);
  if (!SH_SCN_CHECK(s, w->nseen < MAX_SEEN, "X handled more than %d", MAX_SEEN)) return;
  w->seen[w->nseen++] = kind;
  if (!w->stop_case && w->nseen == expected_seen(w)) one_less(self);
}

static sh_yield rx_busy_done(sh_stack *st) {
  return world_of(sh_stack_actor(st))->busy_ask ? sh_scn_answer(st, 0) : sh_return(st, NULL);
}

/* Each of X's asks to Y, as its answer comes: a reply or an exception. */
static sh_yield rx_answers(sh_actor *self, sh_stack *st, rx_locals *l) {
  uint32_t open = 0;
  for (uint32_t i = 0; i < l->nf; i++) {
    if (l->logged[i]) continue;
    if (!sh_future_done(l->f[i])) {
      open++;
      continue;
    }
    l->logged[i] = true;
    rx_saw(self, sh_future_failed(l->f[i]) ? K_EXCEPTION : K_REPLY);
  }
  return open > 0 ? sh_suspend_any(st, RX_ANSWERS) : rx_busy_done(st);
}

static void rx_ask_y(sh_stack *st, rx_locals *l, uint64_t q, uint32_t n) {
  const sh_addr *y = world_of(sh_stack_actor(st))->y;
  for (uint32_t i = 0; i < n; i++) l->f[l->nf++] = sh_scn_ask_num(st, y, q, SH_FOREVER);
}

/* The busy handler: what Y sends from its go on queues behind it. */
static sh_yield rx_busy(sh_actor *self, sh_stack *st) {
  world *w = world_of(self);
  rx_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) != SH_START) return rx_answers(self, st, l);
  if (!w->stop_case) {
    rx_ask_y(st, l, Q_REPLY, w->replies);
    rx_ask_y(st, l, Q_THROW, w->exceptions);
  }
  SH_SCN_CHECK(sh_scn_of(self), sh_scn_kick_n(w->y, GO_QUEUE) == 0, "X: go to Y not sent");
  while (atomic_load(&w->progress) < l->nf + 1) sh_yield_cpu();
  return l->nf > 0 ? sh_suspend_any(st, RX_ANSWERS) : rx_busy_done(st);
}

static sh_yield rx_notice(sh_actor *self, sh_stack *st) {
  if (sh_scn_go_n(st) == GO_BUSY) return rx_busy(self, st);
  rx_saw(self, K_NOTICE);
  return sh_return(st, NULL);
}

static sh_yield rx_ask(sh_actor *self, sh_stack *st) {
  if (sh_stack_msg_as(st, sh_scn_num_ask)->v == Q_BUSY) return rx_busy(self, st);
  rx_saw(self, K_ASK);
  return sh_scn_answer(st, 1);
}

static sh_yield rx_batch(sh_actor *self, sh_stack *st) {
  world_of(self)->batches++;
  bool asks = sh_stack_batch_msg(st, 0)->type->kind == SH_ASK;
  return asks ? sh_scn_answer(st, 1) : sh_return(st, NULL);
}

/* Batches take Y's notices or asks (setup queues two or more of the one
 * kind); the second message taken stops X, with its batch half built. */
static bool rx_take_into_batch(sh_actor *self) {
  if (++((rx_actor *)self)->filtered == 2)
    SH_SCN_CHECK(sh_scn_of(self), sh_stop(sh_self(self)) == 0, "X: sh_stop of itself failed");
  return true;
}
static bool rx_note_filter(sh_actor *self, const sh_msg *m) {
  return ((const sh_scn_go *)m)->n == GO_NOTE && rx_take_into_batch(self);
}
static bool rx_ask_filter(sh_actor *self, const sh_msg *m) {
  return ((const sh_scn_num_ask *)m)->v == Q_PLAIN && rx_take_into_batch(self);
}

static void rx_stop(sh_actor *self) {
  world *w = world_of(self);
  w->stops++;
  if (w->stop_case) one_less(self);
}

#define RX_CLASS(nm, ...)                                                                  \
  {.name = nm, .size = sizeof(rx_actor), .locals_size = sizeof(rx_locals),                 \
   .init = sh_scn_actor_init, .notice = rx_notice, .ask = rx_ask, .stop = rx_stop, __VA_ARGS__}
static const sh_actor_class rx_classes[X_VARIANTS] = {
    [X_PLAIN] = RX_CLASS("run_x"),
    [X_BOUNDED] = RX_CLASS("run_x_bounded", .notice_capacity = MAX_EACH,
                           .ask_capacity = MAX_EACH),
    [X_BATCH] = RX_CLASS("run_x_batch", .batch_notice = rx_batch,
                         .batch_notice_filter = rx_note_filter, .batch_ask = rx_batch,
                         .batch_ask_filter = rx_ask_filter),
};

/* ---- Y ------------------------------------------------------------------------- */

typedef struct ry_locals {
  sh_future *f[MAX_EACH];
  uint32_t nf;
} ry_locals;
enum { RY_ANSWERED = 1 };

/* X's asks: answered, or failed, at once. */
static sh_yield ry_ask(sh_actor *self, sh_stack *st) {
  world *w = world_of(self);
  uint64_t q = sh_stack_msg_as(st, sh_scn_num_ask)->v;
  sh_yield y = q == Q_REPLY ? sh_scn_answer(st, 1) : sh_throw(st, -EPROTO);
  atomic_fetch_add(&w->progress, 1); /* the answer is in X's mailbox */
  return y;
}

/* Y's go: X's mailboxes get their notices and asks (and the stop). */
static void ry_queue(sh_actor *self, sh_stack *st, ry_locals *l) {
  world *w = world_of(self);
  sh_scn *s = sh_scn_of(self);
  for (uint32_t i = 0; i < w->notes; i++)
    SH_SCN_CHECK(s, sh_scn_kick_n(w->x, GO_NOTE) == 0, "Y: notice to X not sent");
  for (uint32_t i = 0; i < w->asks; i++)
    l->f[l->nf++] = sh_scn_ask_num(st, w->x, Q_PLAIN, SH_FOREVER);
  if (w->stop_case && w->variant != X_BATCH)
    SH_SCN_CHECK(s, sh_stop(w->x) == 0, "Y: sh_stop of X failed");
  atomic_fetch_add(&w->progress, 1);
}

static void ry_count(world *w, const sh_future *f, bool busy) {
  int err = sh_future_error(f);
  if (busy)
    w->busy_err = err;
  else if (err == 0)
    w->asks_answered++;
  else if (err == -ESHUTDOWN)
    w->asks_refused++;
}

static sh_yield ry_notice(sh_actor *self, sh_stack *st) {
  world *w = world_of(self);
  ry_locals *l = sh_stack_locals(st);
  bool kick = sh_scn_go_n(st) == GO_KICK;
  if (sh_stack_state(st) == SH_START) {
    if (kick)
      l->f[l->nf++] = sh_scn_ask_num(st, w->x, Q_BUSY, SH_FOREVER);
    else
      ry_queue(self, st, l);
    if (l->nf > 0) return sh_suspend(st, RY_ANSWERED);
  }
  for (uint32_t i = 0; i < l->nf; i++) ry_count(w, l->f[i], kick);
  one_less(self);
  return sh_return(st, NULL);
}

static const sh_actor_class ry_class = {.name = "run_y",
                                        .size = sizeof(sh_scn_actor),
                                        .locals_size = sizeof(ry_locals),
                                        .init = sh_scn_actor_init,
                                        .notice = ry_notice,
                                        .ask = ry_ask};

/* ---- setup and checks ------------------------------------------------------------ */

static uint32_t draw_1_to_max(sh_scn *s) { return 1 + (uint32_t)(sh_scn_rand(s) % MAX_EACH); }

/* The batch variant: two or more asks (the notices are refused one by
 * one), or two or more notices and no ask. */
static void draw_batch(sh_scn *s, world *w) {
  uint32_t *batched = sh_scn_rand(s) & 1 ? &w->asks : &w->notes;
  if (*batched < 2) *batched = 2;
  if (batched == &w->notes) w->asks = 0;
}

static int setup(sh_scn *s, sh_system *sys, bool stop_case) {
  world *w = sh_scn_state(s);
  w->stop_case = stop_case;
  w->busy_ask = sh_scn_rand(s) & 1;
  w->variant = stop_case ? (uint32_t)(sh_scn_rand(s) % X_VARIANTS) : X_PLAIN;
  w->replies = draw_1_to_max(s);
  w->exceptions = draw_1_to_max(s);
  w->notes = draw_1_to_max(s);
  w->asks = draw_1_to_max(s);
  if (w->variant == X_BATCH) draw_batch(s, w);
  /* Y's go stack, X (its log complete, or its stop hook), Y's busy ask. */
  atomic_store(&w->left, 2u + w->busy_ask);
  uint32_t y_worker = sh_scn_workers(s) > 1 ? 1 : 0;
  int rc = sh_scn_spawn_on(s, sys, &rx_classes[w->variant], 0, 0, &w->x);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &ry_class, 1, y_worker, &w->y);
  if (rc == 0) rc = w->busy_ask ? sh_scn_kick_n(w->y, GO_KICK) : sh_scn_kick_n(w->x, GO_BUSY);
  return rc;
}

static int order_setup(sh_scn *s, sh_system *sys) { return setup(s, sys, false); }
static int stop_setup(sh_scn *s, sh_system *sys) { return setup(s, sys, true); }

static void order_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  world *w = sh_scn_state(s);
  SH_SCN_CHECK_EQ(s, w->nseen, expected_seen(w), "messages X handled");
  for (uint32_t i = 1; i < w->nseen; i++)
    SH_SCN_CHECK(s, w->seen[i - 1] <= w->seen[i], "X handled %s (#%u) after %s",
                 kind_name[w->seen[i]], i, kind_name[w->seen[i - 1]]);
  SH_SCN_CHECK_EQ(s, w->asks_answered, w->asks, "Y's asks answered");
  SH_SCN_CHECK_EQ(s, st->dropped_stopped, 0, "messages dropped");
}

static void stop_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  world *w = sh_scn_state(s);
  SH_SCN_CHECK(s, w->nseen == 0, "X handled %u messages after its stop, the first %s", w->nseen,
               kind_name[w->seen[0]]);
  SH_SCN_CHECK_EQ(s, w->batches, 0, "batches X started after its stop");
  SH_SCN_CHECK_EQ(s, w->asks_refused, w->asks, "Y's asks refused -ESHUTDOWN");
  SH_SCN_CHECK_EQ(s, w->stops, 1, "X's stop hooks");
  SH_SCN_CHECK_EQ(s, st->dropped_stopped, w->notes + w->asks, "messages dropped");
  SH_SCN_CHECK(s, w->busy_err == 0, "the busy ask ended with %d", w->busy_err);
}

static const sh_scenario run_order = {
    .name = "run_order",
    .summary = "replies, exceptions, asks, notices that arrive in a busy handler: taken in order",
    .workers = 2,
    .state_size = sizeof(world),
    /* Not fault-tolerant: X keeps its worker until every answer is in, and one
     * a fault loses keeps it spinning for ever. */
    .flags = SH_SCN_NO_FAULTS,
    .setup = order_setup,
    .verify = order_verify,
};
SH_SCENARIO(run_order);

static const sh_scenario stop_running = {
    .name = "stop_running",
    .summary = "sh_stop in a busy handler: it finishes, nothing queued starts (bounded, batches)",
    .workers = 2,
    .state_size = sizeof(world),
    /* Not fault-tolerant: X keeps its worker until every answer is in, and one
     * a fault loses keeps it spinning for ever. */
    .flags = SH_SCN_NO_FAULTS,
    .setup = stop_setup,
    .verify = stop_verify,
};
SH_SCENARIO(stop_running);
