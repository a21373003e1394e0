/*
 * The reference model (backend-sim/model.c, docs/simulator.md "The
 * reference model") driven by hand: each test feeds it a sequence of the
 * core's notes (core/base/model.h) in a forked child, and checks how the
 * run ends: a broken rule fails it with kind "model" and a detail that
 * begins with the rule's name; a legal sequence ends the child normally.
 * The half-way push is driven on a real mailbox (actor/mailbox.c): the
 * model must accept the takes the queue allows while a push is half done.
 */
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <stackhouse/sim.h>

#include "support/child.h"
#include "actor/mailbox.h"
#include "base/model.h"
#include "mem/msg.h"
#include "net/inflight.h"
#include "modeltab.h"

#define WATCHDOG_S 20

static void on_failure(const char *kind, const char *detail) {
  char out[300];
  snprintf(out, sizeof(out), "%s: %s", kind, detail);
  th_child_write(out);
  _exit(3);
}

/* Runs body in a child with the model fresh; the text it ended with:
 * "ok", or "KIND: RULE: detail". */
static void ends(void (*body)(void), char *out, size_t size) {
  strcpy(out, "?");
  int st = th_in_child((void (*)(const void *))(void *)body, NULL, WATCHDOG_S, out, size);
  if (st == 0) strcpy(out, "ok");
}

static void child_begin(void) {
  sh_sim_options o;
  sh_sim_options_default(&o);
  sh_sim_configure(&o);
  sh_sim_on_failure(on_failure);
}

#define BODY(name, ...)                                                                            \
  static void name(void) {                                                                         \
    child_begin();                                                                                 \
    __VA_ARGS__;                                                                                   \
    _exit(0);                                                                                      \
  }

static void expect(void (*body)(void), const char *want) {
  char out[300];
  ends(body, out, sizeof(out));
  if (strncmp(out, want, strlen(want)) != 0) fail_msg("want \"%s...\", got \"%s\"", want, out);
}

/* Stand-ins: the model only keys by their addresses. */
static char box_a[8], box_b[8], msg[8][8], house[2][8], gate[8], waiter[4][8];
static char many[SH_SIMMODELTAB_MAX + 1];
#define N(e, a, b, c) SH_MODEL_NOTE((e), (a), (b), (c))
#define PUSH(box, m) N(SH_MODEL_PUSH, (box), msg[m], 2)
#define TAKE(box, m) N(SH_MODEL_TAKE, (box), msg[m], 2)

/* ---- mailbox.once, mailbox.fifo --------------------------------------------- */

BODY(fifo_legal, PUSH(box_a, 0); PUSH(box_a, 1); PUSH(box_b, 2); TAKE(box_b, 2); TAKE(box_a, 0);
     PUSH(box_a, 0); TAKE(box_a, 1); TAKE(box_a, 0))
BODY(take_unsent, PUSH(box_a, 0); TAKE(box_a, 1))
BODY(take_twice, PUSH(box_a, 0); TAKE(box_a, 0); TAKE(box_a, 0))
BODY(take_other_box, PUSH(box_a, 0); PUSH(box_b, 1); TAKE(box_b, 0))
BODY(push_twice, PUSH(box_a, 0); PUSH(box_b, 0))
BODY(take_out_of_order, PUSH(box_a, 0); PUSH(box_a, 1); PUSH(box_a, 2); TAKE(box_a, 1))
/* A mailbox's new life forgets what its memory held. */
BODY(box_new_forgets, PUSH(box_a, 0); N(SH_MODEL_BOX_NEW, box_a, 0, 2); PUSH(box_a, 0);
     PUSH(box_a, 1); TAKE(box_a, 0); TAKE(box_a, 1))

static void test_mailbox_rules(void **state) {
  (void)state;
  expect(fifo_legal, "ok");
  expect(box_new_forgets, "ok");
  expect(take_unsent, "model: mailbox.once: ");
  expect(take_twice, "model: mailbox.once: ");
  expect(take_other_box, "model: mailbox.once: ");
  expect(push_twice, "model: mailbox.once: ");
  expect(take_out_of_order, "model: mailbox.fifo: ask mailbox #1 handed out its message #2 "
                            "while #1 is first");
}

/* A real mailbox with a push half done: B swapped the head after A but has
 * not linked yet (link_last's yield). A is counted but cannot be taken; the
 * take the queue refuses is no event, and once B links both come in order. */
#define BOX 2u /* the ask mailbox (house.h) */
static sh_mailboxes mb;
static sh_msg ma, mbm;

static void half_way_push(void) {
  child_begin();
  sh_mailbox_init(&mb);
  sh_mailbox_push(&mb, BOX, &ma);
  /* B's push, by hand, up to its yield: the exchange (and its note). */
  atomic_store_explicit(&mbm.next, NULL, memory_order_relaxed);
  sh_mlink *prev = atomic_exchange_explicit(&mb.head[BOX], &mbm.next, memory_order_acq_rel);
  N(SH_MODEL_PUSH, &mb.head[BOX], &mbm, BOX);
  if (sh_mailbox_take(&mb, BOX) != NULL) _exit(4); /* A waits for B's link */
  atomic_store_explicit(prev, (sh_msg *)(void *)&mbm.next, memory_order_release);
  N(SH_MODEL_LINK, &mb.head[BOX], &mbm, BOX);
  if (sh_mailbox_take(&mb, BOX) != &ma) _exit(5);
  if (sh_mailbox_take(&mb, BOX) != &mbm) _exit(6);
  if (sh_mailbox_take(&mb, BOX) != NULL) _exit(7);
  /* Taken once each: a second take of A is a violation. */
  N(SH_MODEL_TAKE, &mb.head[BOX], &ma, BOX);
  _exit(0);
}

static void test_half_way_push(void **state) {
  (void)state;
  expect(half_way_push, "model: mailbox.once: ask mailbox #1 handed out a message that is not");
}

/* ---- ask.once, ask.made ----------------------------------------------------- */

#define ASK(h, id) N(SH_MODEL_ASK, house[h], (id), 0)
#define ANSWER(h, id) N(SH_MODEL_ANSWER, house[h], (id), 0)
#define ANSWER_IN(h, id, handed) N(SH_MODEL_ANSWER_IN, house[h], (id), (handed))

BODY(asks_legal, ASK(0, 1); ASK(0, 2); ASK(1, 1); ANSWER(0, 2); ANSWER(1, 1); ANSWER(0, 1);
     ANSWER_IN(0, 1, 1); ANSWER_IN(0, 2, 0); ANSWER_IN(1, 1, 1); ASK(0, 0))
BODY(answer_not_asked, ASK(0, 1); ANSWER(1, 1))
BODY(answer_twice, ASK(0, 1); ANSWER(0, 1); ANSWER(0, 1))
BODY(handed_twice, ASK(0, 1); ANSWER(0, 1); ANSWER_IN(0, 1, 1); ANSWER_IN(0, 1, 1))
BODY(handed_unanswered, ASK(0, 1); ANSWER_IN(0, 1, 1))
BODY(late_unanswered, ASK(0, 1); ANSWER_IN(0, 1, 0))
#define WITHDRAWN(h, id) N(SH_MODEL_ASK_WITHDRAWN, house[h], (id), 0)
/* A withdrawn ask is forgotten (an answer to it is then one never asked);
 * a put's or notice's id, never asked, is no ask to withdraw. */
BODY(withdrawn_legal, ASK(0, 1); WITHDRAWN(0, 1); WITHDRAWN(0, 7); ASK(0, 2); ANSWER(0, 2);
     ANSWER_IN(0, 2, 1))
BODY(answer_after_withdrawn, ASK(0, 1); WITHDRAWN(0, 1); ANSWER(0, 1))
BODY(withdrawn_answered, ASK(0, 1); ANSWER(0, 1); WITHDRAWN(0, 1))

static void test_ask_rules(void **state) {
  (void)state;
  expect(asks_legal, "ok");
  expect(answer_not_asked, "model: ask.made: ");
  expect(answer_twice, "model: ask.once: ask 1 answered twice");
  expect(handed_twice, "model: ask.once: ");
  expect(handed_unanswered, "model: ask.made: ");
  expect(late_unanswered, "model: ask.made: ");
  expect(withdrawn_legal, "ok");
  expect(answer_after_withdrawn, "model: ask.made: ");
  expect(withdrawn_answered, "model: ask.made: ask 1 withdrawn");
}

/* ---- timer.cancel, timer.once ----------------------------------------------- */

#define START(id, periodic) N(SH_MODEL_TIMER_START, house[0], (id), (periodic))
#define CANCEL(id) N(SH_MODEL_TIMER_CANCEL, house[0], (id), 0)
#define CALL(id) N(SH_MODEL_TIMER_CALL, house[0], (id), 0)

BODY(timers_legal, START(1, 0); START(2, 1); CALL(2); CALL(1); CALL(2); CANCEL(2); START(3, 0);
     CANCEL(3))
#define GONE(id, actors) N(SH_MODEL_TIMER_GONE, house[0], (id), (actors))

/* A timer is forgotten once its node is freed (a tick after it fails as
 * timer.once); an ask's timeout with the same id is none of its business. */
BODY(timers_gone_legal, START(1, 0); CANCEL(1); GONE(1, 1); START(3, 0); GONE(3, 0); CALL(3);
     GONE(3, 1))
BODY(tick_after_node_gone, START(2, 1); CANCEL(2); GONE(2, 1); CALL(2))
BODY(call_after_cancel, START(1, 0); CANCEL(1); CALL(1))
BODY(tick_after_cancel, START(1, 1); CALL(1); CANCEL(1); CALL(1))
BODY(one_shot_twice, START(1, 0); CALL(1); CALL(1))

/* timer.early, timer.armed: the clock of a fresh simulation is 0. */
BODY(arm_fire_legal, N(SH_MODEL_TIMER_ARM, msg[0], 0, 0); N(SH_MODEL_TIMER_FIRE, msg[0], 0, 0);
     N(SH_MODEL_TIMER_ARM, msg[0], 0, 0); N(SH_MODEL_TIMER_DISARM, msg[0], 0, 0))
BODY(fire_early, N(SH_MODEL_TIMER_ARM, msg[0], 0, 1); N(SH_MODEL_TIMER_FIRE, msg[0], 0, 0))
BODY(fire_unarmed, N(SH_MODEL_TIMER_ARM, msg[0], 0, 0); N(SH_MODEL_TIMER_FIRE, msg[0], 0, 0);
     N(SH_MODEL_TIMER_FIRE, msg[0], 0, 0))

static void test_timer_rules(void **state) {
  (void)state;
  expect(arm_fire_legal, "ok");
  expect(fire_early, "model: timer.early: ");
  expect(fire_unarmed, "model: timer.armed: ");
  expect(timers_legal, "ok");
  expect(timers_gone_legal, "ok");
  expect(tick_after_node_gone, "model: timer.once: ");
  expect(call_after_cancel, "model: timer.cancel: ");
  expect(tick_after_cancel, "model: timer.cancel: ");
  expect(one_shot_twice, "model: timer.once: ");
}

/* ---- gate.capacity, gate.slot, gate.fifo ------------------------------------ */

#define SLOT_TAKE() N(SH_MODEL_SLOT_TAKE, gate, 0, 2)
#define SLOT_GIVE() N(SH_MODEL_SLOT_GIVE, gate, 0, 0)
#define QUEUE(w) N(SH_MODEL_WAIT_QUEUE, gate, waiter[w], 0)
#define POP(w) N(SH_MODEL_WAIT_POP, gate, waiter[w], 0)
#define CANCEL_W(w) N(SH_MODEL_WAIT_CANCEL, gate, waiter[w], 0)

BODY(gates_legal, N(SH_MODEL_GATE_NEW, gate, 0, 2); SLOT_TAKE(); SLOT_TAKE(); QUEUE(0); QUEUE(1);
     QUEUE(2); CANCEL_W(1); SLOT_GIVE(); SLOT_TAKE(); POP(0); POP(2); QUEUE(3); POP(3))
BODY(over_capacity, N(SH_MODEL_GATE_NEW, gate, 0, 2); SLOT_TAKE(); SLOT_TAKE(); SLOT_TAKE())
BODY(give_untaken, N(SH_MODEL_GATE_NEW, gate, 0, 2); SLOT_TAKE(); SLOT_GIVE(); SLOT_GIVE())
BODY(pop_out_of_order, N(SH_MODEL_GATE_NEW, gate, 0, 2); QUEUE(0); QUEUE(1); POP(1))
BODY(pop_unqueued, N(SH_MODEL_GATE_NEW, gate, 0, 2); QUEUE(0); POP(0); POP(0))

#define TRY_REFUSED() N(SH_MODEL_TRY_REFUSED, gate, 0, 2)
/* Refused when full, while a sender enters, while one is queued. */
BODY(try_refused_legal, N(SH_MODEL_GATE_NEW, gate, 0, 2); SLOT_TAKE(); SLOT_TAKE(); TRY_REFUSED();
     SLOT_GIVE(); N(SH_MODEL_WAIT_ENTER, gate, 0, 0); TRY_REFUSED(); QUEUE(0); TRY_REFUSED();
     N(SH_MODEL_WAIT_ENTER, gate, 0, 0); N(SH_MODEL_WAIT_ADMIT, gate, 0, 0); TRY_REFUSED())
BODY(try_refused_room, N(SH_MODEL_GATE_NEW, gate, 0, 2); SLOT_TAKE(); TRY_REFUSED())
/* The waiter that entered and was admitted no longer counts; nor a popped one. */
BODY(try_refused_after_admit, N(SH_MODEL_GATE_NEW, gate, 0, 2); N(SH_MODEL_WAIT_ENTER, gate, 0, 0);
     SLOT_TAKE(); N(SH_MODEL_WAIT_ADMIT, gate, 0, 0); TRY_REFUSED())
BODY(try_refused_after_pop, N(SH_MODEL_GATE_NEW, gate, 0, 2); N(SH_MODEL_WAIT_ENTER, gate, 0, 0);
     QUEUE(0); SLOT_TAKE(); POP(0); TRY_REFUSED())

static void test_gate_rules(void **state) {
  (void)state;
  expect(gates_legal, "ok");
  expect(over_capacity, "model: gate.capacity: 3 slots taken of a bounded mailbox of capacity 2");
  expect(give_untaken, "model: gate.slot: ");
  expect(pop_out_of_order, "model: gate.fifo: the waiter queued #2 popped while #1 waits");
  expect(pop_unqueued, "model: gate.fifo: ");
  expect(try_refused_legal, "ok");
  expect(try_refused_room, "model: gate.try: a _try refused while 1 of 2 slots are taken");
  expect(try_refused_after_admit, "model: gate.try: ");
  expect(try_refused_after_pop, "model: gate.try: ");
}

/* ---- inflight.fifo, inflight.limit, inflight.barrier, inflight.order -------------- */

static char ifq[8];
#define IFL(e, seq, c) N(SH_MODEL_IFL_##e, ifq, (seq), (c))
#define IFL_QUEUE(max, hol, n) IFL(INIT, (max), (hol)); for (int i_ = 0; i_ < (n); i_++) IFL(ADD, i_, 0)

/* A real queue (net/inflight.c), head-of-line, 2 inflight, a barrier third:
 * its notes are legal, and so are a reuse of its memory and responses. */
static void real_queue(void) {
  child_begin();
  sh_ifl_queue q;
  sh_ifl_item items[2][5];
  memset(items, 0, sizeof(items));
  for (int life = 0; life < 2; life++) {
    sh_ifl_item *it = items[life];
    sh_ifl_init(&q, 2, true);
    for (int i = 0; i < 5; i++) sh_ifl_add(&q, &it[i], i == 2);
    while (sh_ifl_start(&q) != NULL) {
    }
    sh_ifl_finish(&q, &it[1]);
    assert_null(sh_ifl_release(&q)); /* #0 holds it back */
    sh_ifl_finish(&q, &it[0]);
    assert_ptr_equal(sh_ifl_release(&q), &it[0]);
    assert_ptr_equal(sh_ifl_release(&q), &it[1]);
    assert_ptr_equal(sh_ifl_start(&q), &it[2]); /* the barrier, alone */
    assert_null(sh_ifl_start(&q));
    if (life == 0) continue; /* the rest left behind: a new life forgets them */
    while (sh_ifl_pop_any(&q) != NULL) {
    }
  }
  _exit(0);
}
BODY(start_out_of_order, IFL_QUEUE(2, 0, 2); IFL(START, 1, 0))
BODY(over_limit, IFL_QUEUE(2, 0, 3); IFL(START, 0, 0); IFL(START, 1, 0); IFL(START, 2, 0))
BODY(behind_barrier, IFL(INIT, 2, 0); IFL(ADD, 0, 1); IFL(ADD, 1, 0); IFL(START, 0, 0);
     IFL(START, 1, 0))
BODY(barrier_not_alone, IFL(INIT, 2, 0); IFL(ADD, 0, 0); IFL(ADD, 1, 1); IFL(START, 0, 0);
     IFL(START, 1, 0))
BODY(release_out_of_order, IFL_QUEUE(2, 1, 2); IFL(START, 0, 0); IFL(START, 1, 0); IFL(FINISH, 1, 0);
     IFL(RELEASE, 1, 0))
BODY(release_unfinished, IFL_QUEUE(2, 0, 1); IFL(START, 0, 0); IFL(RELEASE, 0, 0))
BODY(match_not_oldest, IFL_QUEUE(2, 0, 2); IFL(START, 0, 0); IFL(START, 1, 0); IFL(MATCH, 1, 0))
BODY(match_by_id, IFL_QUEUE(2, 0, 2); IFL(START, 0, 0); IFL(START, 1, 0); IFL(MATCH, 1, 1);
     IFL(MATCH, 0, 0); IFL(START, 0, 0))

static void test_inflight_rules(void **state) {
  (void)state;
  expect(real_queue, "ok");
  expect(match_by_id, "model: inflight.order: a start of item #1, not in its queue");
  expect(start_out_of_order, "model: inflight.fifo: item #2 started while #1, added before it");
  expect(over_limit, "model: inflight.limit: an item started with 2 of at most 2 inflight");
  expect(behind_barrier, "model: inflight.barrier: item #2 started while a barrier is inflight");
  expect(barrier_not_alone, "model: inflight.barrier: a barrier started with 1 items inflight");
  expect(release_out_of_order, "model: inflight.order: head-of-line, item #2's result released");
  expect(release_unfinished, "model: inflight.order: the result of item #1 released before");
  expect(match_not_oldest, "model: inflight.order: a response matched to item #2 while #1");
}

/* ---- run.order, run.budget, run.stuck ----------------------------------------- */

/* A house's five mailboxes, keyed as the core keys them: &mb->head[i]. */
static void *hb[5];
#define HK ((void *)&hb[0])
#define SEND(b, m) (N(SH_MODEL_PUSH, &hb[b], msg[m], b), N(SH_MODEL_LINK, &hb[b], msg[m], b), \
                    N(SH_MODEL_COUNT, &hb[b], 0, b))
#define GET(b, m) N(SH_MODEL_TAKE, &hb[b], msg[m], b)
#define RUN(budget) N(SH_MODEL_RUN, HK, (budget), 0)
#define LOOK(end, b) N(SH_MODEL_LOOK, HK, (end), (b))

BODY(run_legal, SEND(2, 0); SEND(0, 1); SEND(4, 2); RUN(2); LOOK(4, 0); GET(0, 1); SEND(1, 3);
     LOOK(4, 1); GET(1, 3); GET(4, 2); N(SH_MODEL_RUN_END, HK, 0, 0); RUN(1);
     LOOK(4, 2); GET(2, 0); N(SH_MODEL_RUN_END, HK, 0, 0))
BODY(run_reply_passed_over, SEND(2, 0); SEND(0, 1); RUN(2); LOOK(4, 2))
/* A barrier holds the request mailboxes: the walk ends above them. */
BODY(run_barrier_holds, SEND(2, 0); SEND(3, 1); RUN(2); LOOK(2, 4))
BODY(run_over_budget, SEND(2, 0); SEND(2, 1); RUN(1); LOOK(4, 2); GET(2, 0); LOOK(4, 2);
     GET(2, 1))
BODY(run_ready_twice, SEND(2, 0); RUN(8); N(SH_MODEL_READY_RAN, HK, 1, 0);
     N(SH_MODEL_READY_RAN, HK, 1, 0))
BODY(run_ready_after_request, SEND(2, 0); RUN(8); LOOK(4, 2); GET(2, 0);
     N(SH_MODEL_READY_RAN, HK, 1, 0))
BODY(run_ready_over_budget, SEND(2, 0); RUN(2); N(SH_MODEL_READY_RAN, HK, 2, 0); LOOK(4, 2);
     GET(2, 0))

static void run_events(uint32_t n) {
  child_begin();
  RUN(2);
  for (uint32_t i = 0; i < n; i++) {
    N(SH_MODEL_PUSH, &hb[4], &many[i], 4);
    N(SH_MODEL_TAKE, &hb[4], &many[i], 4);
  }
  _exit(0);
}
static void events_share(void) { run_events(16); }
static void events_over_share(void) { run_events(17); }
#define END() N(SH_MODEL_RUN_END, HK, 0, 0)
/* Events there from the start get their share however the requests spent
 * the budget; the last may wait for a push that began behind it. */
BODY(events_starved, SEND(2, 0); SEND(4, 1); SEND(4, 2); RUN(1); LOOK(4, 2); GET(2, 0); END())
BODY(events_last_behind_push, SEND(4, 1); SEND(4, 2); RUN(1); GET(4, 1);
     N(SH_MODEL_PUSH, &hb[4], msg[3], 4); END())

/* B swapped the head behind A and has not linked: A is out of reach, the
 * walk passes over the mailbox for the rest of the run. */
BODY(run_stuck_legal, SEND(2, 0); N(SH_MODEL_PUSH, &hb[2], msg[1], 2); SEND(3, 2); RUN(4);
     LOOK(4, 2); N(SH_MODEL_STUCK, &hb[2], 0, 2); LOOK(4, 3); GET(3, 2);
     N(SH_MODEL_RUN_END, HK, 0, 0))
BODY(run_stuck_claimed, SEND(2, 0); RUN(4); LOOK(4, 2); N(SH_MODEL_STUCK, &hb[2], 0, 2))

static void test_run_rules(void **state) {
  (void)state;
  expect(run_legal, "ok");
  expect(run_barrier_holds, "ok");
  expect(events_share, "ok");
  expect(run_stuck_legal, "ok");
  expect(run_reply_passed_over, "model: run.order: a run takes from its ask mailbox while its "
                                "reply mailbox");
  expect(run_over_budget, "model: run.budget: a run handled 2 messages");
  expect(run_ready_twice, "model: run.order: a run's deferred stacks ran twice");
  expect(run_ready_after_request, "model: run.order: a run's deferred stacks ran after a request");
  expect(run_ready_over_budget, "model: run.budget: a run handled 3 messages");
  expect(events_over_share, "model: run.budget: a run took 17 events, its share 16");
  expect(events_last_behind_push, "ok");
  expect(events_starved, "model: run.events: a run took 0 events while 2 were in its event");
  expect(run_stuck_claimed, "model: run.stuck: ");
}

/* ---- stop.handled, stop.refused ---------------------------------------------- */

#define LIVE(gen) N(SH_MODEL_LIVE, HK, (gen), 0)
#define STOP(gen) N(SH_MODEL_STOP, HK, (gen), 0)
#define DECIDE(tag, how) N(SH_MODEL_DECIDE, HK, (tag), (how))
#define REFUSED SH_MODEL_REFUSED

BODY(stop_legal, LIVE(1); RUN(8); DECIDE(1, 0); STOP(1); DECIDE(1, REFUSED);
     DECIDE(SH_MODEL_BATCH, REFUSED); N(SH_MODEL_RUN_END, HK, 0, 0); LIVE(2); RUN(8);
     DECIDE(1, SH_MODEL_REFUSED); DECIDE(2, 0); DECIDE(SH_MODEL_BATCH, 0); STOP(1);
     DECIDE(2, 0))
BODY(handled_after_stop, LIVE(1); STOP(1); RUN(8); DECIDE(1, 0))
BODY(batch_after_stop, LIVE(1); RUN(8); STOP(1); DECIDE(SH_MODEL_BATCH, 0))
BODY(handled_earlier_gen, LIVE(2); RUN(8); DECIDE(1, 0))
BODY(refused_live, LIVE(1); RUN(8); DECIDE(1, SH_MODEL_REFUSED))

static void test_stop_rules(void **state) {
  (void)state;
  expect(stop_legal, "ok");
  expect(handled_after_stop, "model: stop.handled: a request of generation 1 handed to its "
                             "handler, stopped");
  expect(batch_after_stop, "model: stop.handled: a batch of generation 1");
  expect(handled_earlier_gen, "model: stop.handled: a request of generation 1 handed to its "
                              "handler, an earlier generation");
  expect(refused_live, "model: stop.refused: ");
}

/* ---- model.bound, and the reset ---------------------------------------------- */

static void table_full(void) {
  child_begin();
  for (uint32_t i = 0; i <= SH_SIMMODELTAB_MAX; i++) N(SH_MODEL_PUSH, box_a, &many[i], 2);
  _exit(0);
}

/* A new simulation forgets the last one's messages (a table as full as it
 * may be, with its mailbox, twice): a take of one of them fails. */
static void reset_forgets(void) {
  child_begin();
  for (uint32_t i = 0; i < SH_SIMMODELTAB_MAX - 1; i++) N(SH_MODEL_PUSH, box_a, &many[i], 2);
  child_begin();
  for (uint32_t i = 0; i < SH_SIMMODELTAB_MAX - 1; i++) N(SH_MODEL_PUSH, box_b, &many[i], 2);
  TAKE(box_b, 0);
  _exit(0);
}

/* Thousands of mailboxes, a message each: the table grows past its first
 * slots many times, some of them in the note that makes a mailbox's
 * entry and then its message's, so entries must not move inside a note
 * (a mailbox entry moved by a grow in the middle of a push, its old place
 * then written, loses the push: the link's check fails). */
static void grows_between_notes(void) {
  child_begin();
  /* Three entries first: then a push of a new mailbox (two entries) can
   * cross a grow's threshold between its two. */
  PUSH(box_a, 0);
  PUSH(box_a, 1);
  for (uint32_t i = 0; i + 1 < 40000; i += 2) {
    N(SH_MODEL_PUSH, &many[i], &many[i + 1], 2);
    N(SH_MODEL_LINK, &many[i], &many[i + 1], 2);
  }
  for (uint32_t i = 0; i + 1 < 40000; i += 2) N(SH_MODEL_TAKE, &many[i], &many[i + 1], 2);
  _exit(0);
}

static void test_bound_and_reset(void **state) {
  (void)state;
  expect(grows_between_notes, "ok");
  expect(table_full, "model: model.bound: ");
  expect(reset_forgets, "model: mailbox.once: ask mailbox #1 handed out a message that is not");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mailbox_rules), cmocka_unit_test(test_half_way_push),
      cmocka_unit_test(test_ask_rules),     cmocka_unit_test(test_timer_rules),
      cmocka_unit_test(test_gate_rules),    cmocka_unit_test(test_run_rules),
      cmocka_unit_test(test_stop_rules),    cmocka_unit_test(test_bound_and_reset),
      cmocka_unit_test(test_inflight_rules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
