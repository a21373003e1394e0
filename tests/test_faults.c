/*
 * Out-of-memory paths, driven by the libfiu fault points compiled into the
 * test builds: a pool that cannot grow, a house that cannot be made, a stack
 * that cannot be allocated, a future table that cannot grow, a sender's
 * waiter or timeout at a full bounded mailbox. Each must be
 * an error returned to the caller (or to the asker), never a crash or a
 * leak (ASan checks the leaks).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fiu-control.h>
#include <fiu.h>
#include <stackhouse/stackhouse.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "support/harness.h"

typedef struct ping { sh_msg hdr; int n; } ping;
typedef struct pong { sh_msg hdr; int n; } pong;
typedef struct go { sh_msg hdr; int mode; } go;
SH_MSG_DEFINE(ping, SH_ASK, 0);
SH_MSG_DEFINE(pong, SH_REPLY, 0);
SH_MSG_DEFINE(go, SH_NOTICE, 0);

enum { MODE_ASK_NOMEM = 1, MODE_ASK_NO_TABLE, MODE_STACK_NOMEM, MODE_NO_REHASH };
#define FANOUT 100

static const sh_addr *echo_addr;
static atomic_int result;     /* what the client saw, reported to main */
static atomic_int completed;  /* futures completed in the fan-out */

static sh_yield echo_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, &sh_msg_new(pong, .n = sh_stack_msg_as(st, ping)->n)->hdr);
}
static const sh_actor_class echo_class = {.name = "echo", .size = sizeof(sh_actor), .ask = echo_ask};

typedef struct client_locals { sh_future *f[FANOUT]; } client_locals;
enum { START = SH_START, DONE };

static void finish(sh_actor *self, int r) {
  atomic_store(&result, r);
  sh_system_exit(sh_actor_system(self), 0);
}

static sh_yield start(sh_actor *self, sh_stack *st, int mode) {
  client_locals *l = sh_stack_locals(st);
  if (mode == MODE_ASK_NOMEM || mode == MODE_ASK_NO_TABLE) {
    /* The future, or the table its first ask needs, cannot be made. */
    const char *fault = mode == MODE_ASK_NOMEM ? "sh/pool/alloc" : "sh/futtable/alloc";
    ping *p = sh_msg_new(ping, .n = 1);
    fiu_enable(fault, 1, NULL, 0);
    sh_future *f = sh_ask(st, echo_addr, &p->hdr, SH_FOREVER);
    fiu_disable(fault);
    finish(self, f == NULL ? -ENOMEM : 0);
    return sh_return(st, NULL);
  }
  /* Only stacks made from now on fail: ours exists, the echo's cannot. */
  if (mode == MODE_STACK_NOMEM) fiu_enable("sh/stack/new", 1, NULL, 0);
  int n = mode == MODE_NO_REHASH ? FANOUT : 1;
  for (int i = 0; i < n; i++) l->f[i] = sh_ask(st, echo_addr, &sh_msg_new(ping, .n = i)->hdr, SH_FOREVER);
  return sh_suspend(st, DONE);
}

static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  client_locals *l = sh_stack_locals(st);
  int mode = sh_stack_msg_as(st, go)->mode;
  if (sh_stack_state(st) == START) return start(self, st, mode);
  if (mode == MODE_STACK_NOMEM) {
    fiu_disable("sh/stack/new");
    finish(self, sh_future_error(l->f[0]));
    return sh_return(st, NULL);
  }
  for (int i = 0; i < FANOUT; i++)
    if (!sh_future_failed(l->f[i]) && sh_future_reply(l->f[i], pong)->n == i) atomic_fetch_add(&completed, 1);
  finish(self, 0);
  return sh_return(st, NULL);
}
static const sh_actor_class client_class = {.name = "client", .size = sizeof(sh_actor),
                                            .locals_size = sizeof(client_locals),
                                            .notice = client_notice};

/* Runs one client scenario on 2 workers; returns what the client reported. */
static int run_mode(int mode, const char *fault) {
  sh_system *sys = th_system(2);
  echo_addr = th_spawn_on(sys, &echo_class, NULL, 1);
  const sh_addr *client = th_spawn_on(sys, &client_class, NULL, 0);
  atomic_store(&result, 1);
  atomic_store(&completed, 0);
  if (fault != NULL) fiu_enable(fault, 1, NULL, 0);
  assert_int_equal(sh_system_start(sys), 0);
  assert_int_equal(sh_notice(client, &sh_msg_new(go, .mode = mode)->hdr), 0);
  assert_int_equal(sh_system_wait(sys), 0);
  if (fault != NULL) fiu_disable(fault);
  th_end(sys);
  return atomic_load(&result);
}

static void test_msg_alloc_fails(void **state) {
  (void)state;
  fiu_enable("sh/pool/alloc", 1, NULL, 0);
  assert_null(sh_msg_alloc(&ping_type));
  assert_null(sh_msg_new(ping, .n = 3));
  fiu_disable("sh/pool/alloc");
  sh_msg *m = sh_msg_alloc(&ping_type);
  assert_non_null(m);
  sh_msg_free(m);
}

static void test_spawn_fails_with_enomem(void **state) {
  (void)state;
  sh_system *sys;
  assert_int_equal(sh_system_new(NULL, &sys), 0);
  const sh_addr *a = NULL;
  fiu_enable("sh/system/house", 1, NULL, 0);
  assert_int_equal(sh_spawn(sys, &echo_class, NULL, 3, &a), -ENOMEM);
  fiu_disable("sh/system/house");
  assert_null(a);
  assert_int_equal(sh_spawn(sys, &echo_class, NULL, 3, &a), 0);
  assert_int_equal(sh_addr_count(a), 3);
  sh_system_free(sys);
}

static void test_ask_without_memory_returns_null(void **state) {
  (void)state;
  assert_int_equal(run_mode(MODE_ASK_NOMEM, NULL), -ENOMEM);
}

/* The actor's first ask cannot allocate its future table (allocated with
 * the first ask, not at the spawn): that ask fails, nothing leaks. */
static void test_first_ask_without_table_returns_null(void **state) {
  (void)state;
  assert_int_equal(run_mode(MODE_ASK_NO_TABLE, NULL), -ENOMEM);
}

/* The answering side cannot allocate a stack: the asker hears -ENOMEM. */
static void test_stack_alloc_failure_refuses_the_ask(void **state) {
  (void)state;
  assert_int_equal(run_mode(MODE_STACK_NOMEM, NULL), -ENOMEM);
}

/* A future table that cannot grow keeps working with longer chains. */
static void test_futtable_without_rehash_loses_nothing(void **state) {
  (void)state;
  assert_int_equal(run_mode(MODE_NO_REHASH, "sh/futtable/rehash"), 0);
  assert_int_equal(atomic_load(&completed), FANOUT);
}

/* ---- refusals without memory ------------------------------------------------ */

/* With no memory for an exception, a refusal travels in the refused ask's
 * own message: the asker hears the error, not its timeout. */
enum { REFUSE_THROW = 1, REFUSE_NO_STACK };
#define REFUSE_TIMEOUT_MS 5000

static sh_yield thrower_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  fiu_enable("sh/pool/alloc", 1, NULL, 0);
  sh_yield y = sh_throw(st, -EIO);
  fiu_disable("sh/pool/alloc");
  return y;
}
static const sh_actor_class thrower_class = {.name = "thrower", .size = sizeof(sh_actor),
                                             .ask = thrower_ask};

static sh_yield refuse_client(sh_actor *self, sh_stack *st) {
  client_locals *l = sh_stack_locals(st);
  int mode = sh_stack_msg_as(st, go)->mode;
  if (sh_stack_state(st) == DONE) {
    fiu_disable("sh/stack/new");
    fiu_disable("sh/pool/alloc");
    finish(self, sh_future_error(l->f[0]));
    return sh_return(st, NULL);
  }
  l->f[0] = sh_ask(st, echo_addr, &sh_msg_new(ping, .n = 1)->hdr, REFUSE_TIMEOUT_MS);
  if (mode == REFUSE_NO_STACK) {
    /* The echo shares our worker: it takes the ask once we suspend, and
     * can make neither a stack nor an exception. */
    fiu_enable("sh/stack/new", 1, NULL, 0);
    fiu_enable("sh/pool/alloc", 1, NULL, 0);
  }
  return sh_suspend(st, DONE);
}
static const sh_actor_class refuse_client_class = {.name = "refuse_client", .size = sizeof(sh_actor),
                                                   .locals_size = sizeof(client_locals),
                                                   .notice = refuse_client};

static int run_refusal(int mode) {
  sh_system *sys = th_system(2);
  echo_addr = mode == REFUSE_THROW ? th_spawn_on(sys, &thrower_class, NULL, 1)
                                   : th_spawn_on(sys, &echo_class, NULL, 0);
  const sh_addr *client = th_spawn_on(sys, &refuse_client_class, NULL, 0);
  atomic_store(&result, 1);
  assert_int_equal(sh_system_start(sys), 0);
  assert_int_equal(sh_notice(client, &sh_msg_new(go, .mode = mode)->hdr), 0);
  assert_int_equal(sh_system_wait(sys), 0);
  th_end_exact(sys); /* every ask resolved once, every message accounted for */
  return atomic_load(&result);
}

static void test_throw_without_memory_still_answers(void **state) {
  (void)state;
  assert_int_equal(run_refusal(REFUSE_THROW), -EIO);
}

static void test_refusal_without_memory_still_answers(void **state) {
  (void)state;
  assert_int_equal(run_refusal(REFUSE_NO_STACK), -ENOMEM);
}

/* A handler may read its ask after sh_throw, until it returns (the message
 * is the stack's until then): a refusal carried in that message must not
 * reach the asker, who frees it, before the handler is done. The thrower
 * waits until its asker heard the refusal, then reads the ask. */
static atomic_bool heard;
static atomic_int read_after_throw;

static sh_yield late_reader_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  const ping *p = sh_stack_msg_as(st, ping);
  fiu_enable("sh/pool/alloc", 1, NULL, 0);
  sh_yield y = sh_throw(st, -EIO);
  fiu_disable("sh/pool/alloc");
  /* Bounded: 2 s at most (the asker runs on the other worker). */
  for (int i = 0; i < 2000 && !atomic_load(&heard); i++) usleep(1000);
  atomic_store(&read_after_throw, p->n);
  return y;
}
static const sh_actor_class late_reader_class = {.name = "late_reader", .size = sizeof(sh_actor),
                                                 .ask = late_reader_ask};

static sh_yield heard_client(sh_actor *self, sh_stack *st) {
  client_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == DONE) {
    atomic_store(&heard, true);
    finish(self, sh_future_error(l->f[0]));
    return sh_return(st, NULL);
  }
  l->f[0] = sh_ask(st, echo_addr, &sh_msg_new(ping, .n = 42)->hdr, REFUSE_TIMEOUT_MS);
  return sh_suspend(st, DONE);
}
static const sh_actor_class heard_client_class = {.name = "heard_client", .size = sizeof(sh_actor),
                                                  .locals_size = sizeof(client_locals),
                                                  .notice = heard_client};

static void test_ask_readable_after_throw_without_memory(void **state) {
  (void)state;
  sh_system *sys = th_system(2);
  echo_addr = th_spawn_on(sys, &late_reader_class, NULL, 1);
  const sh_addr *client = th_spawn_on(sys, &heard_client_class, NULL, 0);
  atomic_store(&result, 1);
  atomic_store(&heard, false);
  assert_int_equal(sh_system_start(sys), 0);
  assert_int_equal(sh_notice(client, &sh_msg_new(go)->hdr), 0);
  assert_int_equal(sh_system_wait(sys), 0);
  th_end_exact(sys);
  assert_int_equal(atomic_load(&result), -EIO);
  assert_int_equal(atomic_load(&read_after_throw), 42);
}

/* ---- bounded mailboxes without memory ------------------------------------- */

/* A consumer with room for one ask and one notice, on the client's worker:
 * it cannot take anything while the client's handler runs, so the client
 * fills it and then meets it full. */
static sh_yield tiny_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, NULL);
}
static const sh_actor_class tiny_class = {.name = "tiny", .size = sizeof(sh_actor),
                                          .notice = tiny_notice, .ask = echo_ask,
                                          .ask_capacity = 1, .notice_capacity = 1};

/* What the client saw: each failed send's error, and whether a put's
 * notice came back. */
static struct {
  int put_err, ask_err, timed_put_err;
  bool put_back, timed_put_back;
  int fill_err;
} full;

static const sh_addr *tiny_addr;

/* A put whose future failed at once: its error, and its notice back. */
static int failed_put(sh_stack *st, int64_t timeout_ms, bool *back) {
  sh_future *f = sh_put(st, tiny_addr, &sh_msg_new(go)->hdr, timeout_ms);
  sh_msg *m = sh_future_take(f);
  *back = sh_msg_is(m, &go_type);
  sh_msg_free(m);
  return sh_future_done(f) ? sh_future_error(f) : 1;
}

static sh_yield full_client(sh_actor *self, sh_stack *st) {
  client_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == DONE) {
    full.fill_err = sh_future_error(l->f[0]);
    finish(self, 0);
    return sh_return(st, NULL);
  }
  if (sh_notice_try(tiny_addr, &sh_msg_new(go)->hdr) != 0 ||
      sh_ask_try(st, tiny_addr, &sh_msg_new(ping, .n = 7)->hdr, SH_FOREVER, &l->f[0]) != 0) {
    finish(self, -EPROTO);
    return sh_return(st, NULL);
  }
  /* Both full: a send that must wait needs a waiter, which cannot be made. */
  fiu_enable("sh/gate/waiter", 1, NULL, 0);
  full.put_err = failed_put(st, SH_FOREVER, &full.put_back);
  sh_future *f = sh_ask(st, tiny_addr, &sh_msg_new(ping, .n = 8)->hdr, SH_FOREVER);
  full.ask_err = sh_future_done(f) ? sh_future_error(f) : 1;
  fiu_disable("sh/gate/waiter");
  /* The waiter is queued, but the put's timeout cannot be armed. */
  fiu_enable("sh/timer/new", 1, NULL, 0);
  full.timed_put_err = failed_put(st, 50, &full.timed_put_back);
  fiu_disable("sh/timer/new");
  return sh_suspend(st, DONE);
}
static const sh_actor_class full_client_class = {.name = "full_client", .size = sizeof(sh_actor),
                                                 .locals_size = sizeof(client_locals),
                                                 .notice = full_client};

/* Without memory for a waiter (or its timeout), a send to a full bounded
 * mailbox fails at once with -ENOMEM: a put hands its notice back, an ask
 * fails; nothing is queued, lost or leaked. */
static void test_bounded_send_without_memory(void **state) {
  (void)state;
  sh_system *sys = th_system(2);
  tiny_addr = th_spawn_on(sys, &tiny_class, NULL, 0);
  const sh_addr *client = th_spawn_on(sys, &full_client_class, NULL, 0);
  memset(&full, 0, sizeof(full));
  atomic_store(&result, 1);
  assert_int_equal(sh_system_start(sys), 0);
  assert_int_equal(sh_notice(client, &sh_msg_new(go)->hdr), 0);
  assert_int_equal(sh_system_wait(sys), 0);
  assert_int_equal(atomic_load(&result), 0);
  assert_int_equal(full.put_err, -ENOMEM);
  assert_true(full.put_back);
  assert_int_equal(full.ask_err, -ENOMEM);
  assert_int_equal(full.timed_put_err, -ENOMEM);
  assert_true(full.timed_put_back);
  assert_int_equal(full.fill_err, 0);
  sh_mailbox_stats ms;
  assert_int_equal(sh_mailbox_stats_get(tiny_addr, 0, SH_NOTICE, &ms), 0);
  assert_int_equal(ms.waiting, 0);
  assert_int_equal(ms.suspended, 1); /* the timed put had queued */
  th_end(sys);
}

int main(void) {
  alarm(120);
  fiu_init(0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_msg_alloc_fails),
      cmocka_unit_test(test_spawn_fails_with_enomem),
      cmocka_unit_test(test_ask_without_memory_returns_null),
      cmocka_unit_test(test_first_ask_without_table_returns_null),
      cmocka_unit_test(test_stack_alloc_failure_refuses_the_ask),
      cmocka_unit_test(test_futtable_without_rehash_loses_nothing),
      cmocka_unit_test(test_bounded_send_without_memory),
      cmocka_unit_test(test_throw_without_memory_still_answers),
      cmocka_unit_test(test_refusal_without_memory_still_answers),
      cmocka_unit_test(test_ask_readable_after_throw_without_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
