/*
 * Shared plumbing of the tests, on the public API only (an end-to-end test
 * needs no core header for it). Linked into every test program.
 *
 *   - CHECK(): handlers run on worker threads, where a cmocka assertion
 *     (a longjmp) must not happen. CHECK() counts and prints a failure; the
 *     test thread fails the test afterwards (th_end, th_assert_checks).
 *   - The run's goal: th_done() counts one expected event; the one that
 *     reaches the goal ends the run with sh_system_exit(0).
 *   - Systems: create with N workers, spawn on a chosen worker, start and
 *     wait, shut down and free with the pools checked empty.
 *   - num_ask / num_reply, the numbered ask and reply most actors exchange.
 *   - TH_CFG_INIT: the init hook that copies an actor's configuration;
 *     th_hold: the ask handler of an actor that never answers.
 *   - TH_UNDER_TSAN; a fixed-seed xorshift64 (never rand()); sleeping and
 *     bounded polling.
 *
 * Every function that can fail asserts with cmocka: call them from the test
 * thread only, except th_check_failed (CHECK) and th_done.
 */
#ifndef TESTS_SUPPORT_HARNESS_H
#define TESTS_SUPPORT_HARNESS_H

#include <stdatomic.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

/* ---- checks on worker threads -------------------------------------------- */

#define CHECK(c) ((c) ? (void)0 : th_check_failed(__FILE__, __LINE__, #c))
void th_check_failed(const char *file, int line, const char *expr);
/* Fails the test if a CHECK failed since th_reset, naming the first line. */
void th_assert_checks(void);

/* ---- the run's goal ------------------------------------------------------ */

/* A new run: no failed check, nothing done, the goal is `goal` events. */
void th_reset(int goal);
/* Sets the goal of the current run (also once the run has started). */
void th_set_goal(int goal);
/* One expected event happened; the one that reaches the goal ends the run. */
void th_done(sh_actor *self);
/* Events counted by th_done since th_reset. */
int th_done_count(void);

/* ---- systems ------------------------------------------------------------- */

/* The default configuration with `workers` workers. */
sh_config th_config(uint32_t workers);
/* A new (not started) system; asserts it was made. */
sh_system *th_system_new(const sh_config *cfg);
/* th_system_new of th_config(workers). */
sh_system *th_system(uint32_t workers);
/* th_reset(goal), then th_system(workers): a fresh run's system. */
sh_system *th_env(uint32_t workers, int goal);
/* Spawns one actor of class c with `arg` on worker w; asserts it worked. */
const sh_addr *th_spawn_on(sh_system *sys, const sh_actor_class *c, void *arg, uint32_t w);
/* Starts the system and waits until the run ends with exit code 0. */
void th_run(sh_system *sys);
/* Shuts down and frees the system; asserts no CHECK failed and the pools
 * got every object back. Returns the final (exact) statistics. */
sh_stats th_end(sh_system *sys);
/* th_end, and the accounting that holds after every shutdown: every ask
 * resolved once, every message sent handled or dropped with a reason. */
sh_stats th_end_exact(sh_system *sys);

/* ---- actors -------------------------------------------------------------- */

/* Defines `static int name(sh_actor *self, void *arg)`: the init hook of an
 * actor struct T whose member `cfg` (of type C) is copied from the spawn
 * argument, a C. */
#define TH_CFG_INIT(name, T, C)                                                    \
  static int name(sh_actor *self, void *arg) {                                     \
    ((T *)self)->cfg = *(const C *)arg;                                            \
    return 0;                                                                      \
  }                                                                                \
  _Static_assert(sizeof(((T *)0)->cfg) == sizeof(C), #T "'s cfg is a " #C)

/* ---- holders ------------------------------------------------------------- */

/*
 * A holder sits on every ask it gets, for good and at no CPU cost, until
 * shutdown or sh_stop fails them: its class's barrier predicate returns
 * !locked (an actor's flag) and its ask handler is th_hold, with locals of
 * th_hold_locals. The first ask becomes a barrier whose stack asks the holder
 * itself; that ask, like every later one, waits behind the barrier forever.
 * *held counts the barrier stacks; resumed (its self-ask failed), the stack
 * throws that error.
 */
typedef struct th_hold_locals { sh_future *f; } th_hold_locals;
sh_yield th_hold(sh_actor *self, sh_stack *st, bool *locked, atomic_int *held);

/* ---- numbered asks and replies ------------------------------------------- */

typedef struct num_ask { sh_msg hdr; long v; } num_ask;
typedef struct num_reply { sh_msg hdr; long v; } num_reply;
SH_MSG_DECLARE(num_ask);
SH_MSG_DECLARE(num_reply);

sh_msg *th_new_ask(long v);
sh_msg *th_new_reply(long v);
/* Completes an ask stack with a num_reply of v. */
sh_yield th_reply_with(sh_stack *st, long v);

/* ---- sanitizers ---------------------------------------------------------- */

/* 1 under ThreadSanitizer, which runs several times slower: loads shrink. */
#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_THREAD__) || __has_feature(thread_sanitizer)
#define TH_UNDER_TSAN 1
#else
#define TH_UNDER_TSAN 0
#endif

/* ---- randomness, time ---------------------------------------------------- */

/* One step of xorshift64 on *state (never 0): the same sequence every run. */
uint64_t th_xorshift(uint64_t *state);
void th_sleep_us(long us);
void th_sleep_ms(long ms);
/* Waits until *v reaches want, polling (bounded by the test's watchdog). */
void th_wait_for(atomic_int *v, int want);

#endif
