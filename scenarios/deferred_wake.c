/*
 * deferred_wake: a stack deferred to its house's next run, woken by a reply
 * meanwhile, runs once, from the ready list.
 *
 * A stack whose wait is over as its handler returns runs again at once, up
 * to its house's max_per_run times in a row; then it is deferred (stack.h).
 * The asker's handler keeps it that way: each entry asks an actor that is
 * stopped (the future fails at once) and a server (its reply comes later),
 * and suspends for any of them. The failed ask ends the wait at once, so
 * the stack is deferred every max_per_run entries, while the server's
 * replies keep coming. The server shares the asker's worker: its run comes
 * between two of the asker's even when no worker is ever preempted, and
 * its replies are taken (replies first) before the ready list is run. So
 * most replies find the stack deferred, and a
 * reply must then only be recorded, never run the stack (it would run it
 * twice: now and from the ready list). The runtime asserts that a deferred
 * stack is never run but from the ready list; the scenario checks that each
 * reply came once, with its value, and that the stack ended.
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/scenario.h>

#define PER_RUN 3 /* the asker's max_per_run */
#define ASKS 16   /* asks to the server (and to the stopped actor) */

typedef struct world {
  const sh_addr *server, *gone;
  uint32_t replies, entries; /* the asker's, one handler at a time */
  bool ended;
} world;

typedef struct asker_locals {
  sh_future *f[ASKS]; /* the server's */
  bool seen[ASKS];
  uint32_t asked, replies;
} asker_locals;

static sh_yield server_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_scn_answer(st, sh_stack_msg_as(st, sh_scn_num_ask)->v + 1);
}

static const sh_actor_class server_class = {
    .name = "deferred_wake_server",
    .size = sizeof(sh_actor),
    .ask = server_ask,
};

/* The server's replies that came since the last entry: each once, right. */
static void take_replies(sh_scn *s, asker_locals *l) {
  for (uint32_t i = 0; i < l->asked; i++) {
    if (l->seen[i] || !sh_future_done(l->f[i])) continue;
    l->seen[i] = true;
    l->replies++;
    uint64_t v = 0;
    SH_SCN_CHECK(s, sh_scn_num_of(l->f[i], &v) && v == i + 1, "reply %u: wrong (error %d)", i,
                 sh_future_error(l->f[i]));
  }
}

/* One ask the stopped actor fails at once, one the server answers later. */
static bool ask_both(sh_scn *s, sh_stack *st, world *w, asker_locals *l) {
  sh_future *gone = sh_scn_ask_num(st, w->gone, l->asked, SH_FOREVER);
  if (!SH_SCN_CHECK(s, gone != NULL && sh_future_done(gone) &&
                           sh_future_error(gone) == -ESHUTDOWN,
                    "an ask to a stopped actor did not fail at once"))
    return false;
  l->f[l->asked] = sh_scn_ask_num(st, w->server, l->asked, SH_FOREVER);
  if (!SH_SCN_CHECK(s, l->f[l->asked] != NULL, "ask to the server failed")) return false;
  l->asked++;
  return true;
}

static sh_yield asker_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *w = sh_scn_state(s);
  asker_locals *l = sh_stack_locals(st);
  w->entries++;
  take_replies(s, l);
  if (l->asked < ASKS && !ask_both(s, st, w, l)) l->asked = l->replies = ASKS;
  if (l->replies < l->asked) return sh_suspend_any(st, 1);
  w->replies = l->replies;
  w->ended = true;
  sh_scn_done(s, sh_actor_system(self));
  return sh_return(st, NULL);
}

static const sh_actor_class asker_class = {
    .name = "deferred_wake_asker",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(asker_locals),
    .init = sh_scn_actor_init,
    .notice = asker_notice,
    .max_per_run = PER_RUN,
};

static int setup(sh_scn *s, sh_system *sys) {
  world *w = sh_scn_state(s);
  const sh_addr *asker, *gone;
  int rc = sh_spawn_on(sys, &server_class, NULL, 0, &w->server);
  if (rc == 0) rc = sh_scn_spawn_on(s, sys, &asker_class, 0, 0, &asker);
  if (rc == 0) rc = sh_spawn_on(sys, &server_class, NULL, 1, &gone);
  if (rc == 0) rc = sh_stop(gone);
  if (rc != 0) return rc;
  w->gone = gone;
  return sh_scn_kick(asker);
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *w = sh_scn_state(s);
  if (!w->ended) return; /* a run cut short (faults): nothing to compare */
  SH_SCN_CHECK_EQ(s, w->replies, ASKS, "server replies taken");
  /* Each entry but the first took a reply or followed a failed ask. */
  SH_SCN_CHECK(s, w->entries <= 2 * ASKS + 1, "the asker ran %u times for %d asks", w->entries,
               ASKS);
}

static const sh_scenario deferred_wake = {
    .name = "deferred_wake",
    .summary = "a stack deferred after max_per_run entries and woken by a reply runs once",
    .workers = 2,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(deferred_wake);
