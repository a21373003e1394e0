/*
 * End-to-end tests of batching on the production backend (epoll, pthreads),
 * through the public API only.
 *
 * batch_notice: notices that pass the class's filter are handed over
 * together in batch stacks of at most max_batch (the class's, else
 * sh_config.max_batch); the others go one by one through the notice
 * handler; arrival order holds across the two paths. REGRESSION for known
 * bug 5 (max batch size configured but never applied): every notice is
 * queued before sh_system_start, so the first run sees them all and the
 * batch sizes are exact.
 *
 * batch_ask: REGRESSION for known bug 3 (batched asks read sender and id
 * after the envelopes were recycled). Askers on both workers ask with
 * distinct values; the batch handler allocates messages of the asks' own
 * type between taking the batch and answering (and suspends on an ask in
 * between), so envelopes the runtime freed early would be reused; every
 * asker must get the reply meant for it, whether answered with
 * sh_batch_reply or by the copy of sh_return's reply.
 *
 * Actors record (CHECK() counts failures, cmocka is never called on a
 * worker); main asserts after sh_system_shutdown.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <unistd.h>

#include <stackhouse/stackhouse.h>

#include "support/harness.h"

#define WATCHDOG_S 120
/* A lost reply fails the asker with -ETIMEDOUT long before the watchdog. */
#define GUARD_MS 60000u
#define LIMIT 4     /* the max_batch under test */
#define MAX_MSGS 64 /* notices per run: below max_per_run, so one run takes all */

/* ---- harness ------------------------------------------------------------- */

/* A 2-worker system whose run ends after `goal` th_done; max_batch 0: the
 * default configuration's. */
static sh_system *env_new(int goal, uint32_t max_batch) {
  th_reset(goal);
  sh_config cfg = th_config(2);
  if (max_batch != 0) cfg.max_batch = max_batch;
  return th_system_new(&cfg);
}

static void run_and_end(sh_system *sys) {
  th_run(sys);
  sh_stats st = th_end(sys);
  assert_int_equal(st.replies_unknown, 0);
  assert_int_equal(st.asks_timed_out, 0);
}

/* ---- messages -------------------------------------------------------------- */

typedef struct item { sh_msg hdr; long v; int batchable; } item; /* a notice */
typedef struct kick_msg { sh_msg hdr; const sh_addr *target; } kick_msg;
typedef struct item_ask { sh_msg hdr; long v; int batchable; } item_ask; /* replied: num_reply */
SH_MSG_DEFINE(item, SH_NOTICE, 0);
SH_MSG_DEFINE(kick_msg, SH_NOTICE, 0);
SH_MSG_DEFINE(item_ask, SH_ASK, 0);

/* ---- batch_notice ------------------------------------------------------------ */

typedef struct notice_result {
  long order[MAX_MSGS]; /* values in the order handlers saw them */
  int norder;
  int batch[MAX_MSGS];  /* sizes of the batch stacks, in order */
  int nbatch;
  int singles;
} notice_result;

typedef struct collector_cfg {
  int expect; /* notices to handle before the run ends */
  notice_result *res;
} collector_cfg;

typedef struct collector { sh_actor base; collector_cfg cfg; } collector;

TH_CFG_INIT(collector_init, collector, collector_cfg);

static void collect(collector *c, long v) {
  notice_result *r = c->cfg.res;
  if (r->norder < MAX_MSGS) r->order[r->norder] = v;
  if (++r->norder == c->cfg.expect) th_done(&c->base);
}

static bool item_filter(sh_actor *self, const sh_msg *m) {
  (void)self;
  return sh_msg_is(m, &item_type) && ((const item *)m)->batchable;
}

static sh_yield collector_notice(sh_actor *self, sh_stack *st) {
  collector *c = (collector *)self;
  const item *it = sh_stack_msg_as(st, item);
  CHECK(!it->batchable); /* batchable ones must have gone to the batch handler */
  c->cfg.res->singles++;
  collect(c, it->v);
  return sh_return(st, NULL);
}

static sh_yield collector_batch(sh_actor *self, sh_stack *st) {
  collector *c = (collector *)self;
  notice_result *r = c->cfg.res;
  size_t n = sh_stack_batch_len(st);
  CHECK(n >= 1);
  CHECK(sh_stack_msg(st) == NULL);
  if (r->nbatch < MAX_MSGS) r->batch[r->nbatch++] = (int)n;
  for (size_t i = 0; i < n; i++) {
    const item *it = (const item *)sh_stack_batch_msg(st, i);
    CHECK(it != NULL && it->batchable);
    collect(c, it->v);
  }
  CHECK(sh_stack_batch_msg(st, n) == NULL);
  return sh_return(st, NULL);
}

#define COLLECTOR_CLASS(name_, max_batch_)                                                \
  static const sh_actor_class name_ = {                                                   \
      .name = #name_, .size = sizeof(collector), .init = collector_init,                   \
      .notice = collector_notice, .batch_notice = collector_batch,                         \
      .batch_notice_filter = item_filter, .max_batch = (max_batch_)}
COLLECTOR_CLASS(collector_class_limit, LIMIT);
COLLECTOR_CLASS(collector_class_limit3, 3);
COLLECTOR_CLASS(collector_class_default, 0);

/* Queues n items (batchable[i]) before start, runs, checks the order. */
static void run_items(const sh_actor_class *c, uint32_t cfg_max_batch, const bool *batchable,
                      int n, notice_result *res) {
  sh_system *sys = env_new(1, cfg_max_batch);
  collector_cfg cc = {.expect = n, .res = res};
  const sh_addr *a = th_spawn_on(sys, c, &cc, 0);
  for (int i = 0; i < n; i++)
    assert_int_equal(sh_notice(a, &sh_msg_new(item, .v = i, .batchable = batchable[i])->hdr), 0);
  run_and_end(sys);
  assert_int_equal(res->norder, n);
  for (int i = 0; i < n; i++) assert_int_equal(res->order[i], i); /* arrival order */
}

/* What a correct runtime does with a pattern queued at once: runs of
 * batchable items cut into chunks of `limit`, the others alone. */
static int expected_batches(const bool *batchable, int n, int limit, int *out) {
  int nb = 0, run = 0;
  for (int i = 0; i < n; i++) {
    if (batchable[i] && ++run < limit) continue;
    if (batchable[i] || run > 0) out[nb++] = run;
    run = 0;
  }
  if (run > 0) out[nb++] = run;
  return nb;
}

static void assert_batches(const notice_result *res, const bool *batchable, int n, int limit) {
  int want[MAX_MSGS];
  int nb = expected_batches(batchable, n, limit, want);
  for (int i = 0; i < res->nbatch; i++) assert_true(res->batch[i] <= limit); /* bug 5 */
  assert_int_equal(res->nbatch, nb);
  for (int i = 0; i < nb; i++) assert_int_equal(res->batch[i], want[i]);
}

static void all_batchable(bool *b, int n) {
  for (int i = 0; i < n; i++) b[i] = true;
}

static void test_batch_notice_class_max_batch(void **state) {
  (void)state;
  bool b[10];
  all_batchable(b, 10);
  notice_result res = {0};
  /* Class 3 under a system default of 32: the class wins. */
  run_items(&collector_class_limit3, 0, b, 10, &res);
  assert_batches(&res, b, 10, 3);
  const int want[] = {3, 3, 3, 1};
  for (int i = 0; i < 4; i++) assert_int_equal(res.batch[i], want[i]);
  assert_int_equal(res.singles, 0);
}

static void test_batch_notice_config_max_batch(void **state) {
  (void)state;
  bool b[10];
  all_batchable(b, 10);
  notice_result res = {0};
  run_items(&collector_class_default, LIMIT, b, 10, &res);
  const int want[] = {4, 4, 2};
  assert_int_equal(res.nbatch, 3);
  for (int i = 0; i < 3; i++) assert_int_equal(res.batch[i], want[i]);
}

/* Batchable and not, mixed by a fixed-seed pattern (3 in 4 batchable). */
static void test_batch_notice_filter_keeps_order(void **state) {
  (void)state;
  enum { N = 48 };
  bool b[N];
  uint64_t rng = 0x9E3779B97F4A7C15ull; /* fixed seed: the same pattern every run */
  int singles = 0;
  for (int i = 0; i < N; i++) {
    b[i] = (th_xorshift(&rng) & 3) != 0;
    singles += !b[i];
  }
  int want[MAX_MSGS];
  int nb = expected_batches(b, N, LIMIT, want);
  bool full = false, partial = false;
  for (int i = 0; i < nb; i++) {
    full |= want[i] == LIMIT;
    partial |= want[i] < LIMIT;
  }
  assert_true(full && partial && singles > 0); /* the pattern exercises every path */
  notice_result res = {0};
  run_items(&collector_class_limit, 0, b, N, &res);
  assert_batches(&res, b, N, LIMIT);
  assert_int_equal(res.singles, singles);
}

/* ---- batch_ask ---------------------------------------------------------------- */

#define ASKERS 6     /* 3 on each worker */
#define ASKS 8       /* per asker; the last one is not batchable */
#define COMMON (-7L) /* the reply sh_return copies to every ask not yet answered */

typedef enum answer_mode {
  ANSWER_EACH,   /* sh_batch_reply for every ask */
  ANSWER_COMMON, /* sh_batch_reply for odd values, sh_return's copy for the rest */
} answer_mode;

/* What asker i's ask j must get back. */
static long expected(answer_mode mode, long v, bool batchable) {
  if (mode == ANSWER_COMMON && batchable && v % 2 == 0) return COMMON;
  return v + 1;
}

typedef struct server_result {
  int batches;
  int max_batch;   /* the largest batch seen */
  int batched;     /* asks handled in batches */
  int singles;     /* asks handled one by one */
  int misuse_ok;   /* sh_batch_reply misuse refused as expected */
} server_result;

typedef struct server_cfg {
  answer_mode mode;
  const sh_addr *helper;
  server_result *res;
} server_cfg;

typedef struct server { sh_actor base; server_cfg cfg; } server;
#define JUNK (LIMIT + 4)
typedef struct server_locals {
  sh_future *f;
  sh_msg *junk[JUNK];
} server_locals;
enum { S_ANSWER = 1 };

TH_CFG_INIT(server_init, server, server_cfg);

static bool ask_filter(sh_actor *self, const sh_msg *m) {
  (void)self;
  return sh_msg_is(m, &item_ask_type) && ((const item_ask *)m)->batchable;
}

/* Not batchable: answered alone, as an echo. */
static sh_yield server_ask(sh_actor *self, sh_stack *st) {
  server *s = (server *)self;
  const item_ask *a = sh_stack_msg_as(st, item_ask);
  CHECK(!a->batchable);
  s->cfg.res->singles++;
  return sh_return(st, th_new_reply(a->v + 1));
}

/* Memory of the asks' own size class, scribbled over: were an envelope of
 * this batch already back in the pool, one of these would be it. */
static void take_junk(server_locals *l) {
  for (int i = 0; i < JUNK; i++) {
    item_ask *j = sh_msg_new(item_ask, .v = -999, .batchable = -1);
    CHECK(j != NULL);
    l->junk[i] = &j->hdr;
  }
}

static void free_junk(server_locals *l) {
  for (int i = 0; i < JUNK; i++) {
    CHECK(((item_ask *)l->junk[i])->v == -999);
    sh_msg_free(l->junk[i]);
  }
}

static long batch_value(sh_stack *st, size_t i) {
  const item_ask *a = (const item_ask *)sh_stack_batch_msg(st, i);
  CHECK(a != NULL && sh_msg_is(&a->hdr, &item_ask_type) && a->batchable == 1);
  return a->v;
}

/* The refusals of sh_batch_reply, on a batch whose ask 0 is answered. */
static bool batch_reply_misuse(sh_stack *st) {
  size_t n = sh_stack_batch_len(st);
  bool ok = sh_batch_reply(st, 0, th_new_reply(0)) == -EINVAL;        /* answered twice */
  ok &= sh_batch_reply(st, n, th_new_reply(0)) == -EINVAL;            /* out of range */
  ok &= sh_batch_reply(st, 0, &sh_msg_new(item_ask, .v = 0)->hdr) == -EINVAL; /* not a reply */
  return ok;
}

static sh_yield answer(server *s, sh_stack *st) {
  size_t n = sh_stack_batch_len(st);
  bool each = s->cfg.mode == ANSWER_EACH;
  for (size_t i = 0; i < n; i++) {
    long v = batch_value(st, i);
    if (each || v % 2 != 0) CHECK(sh_batch_reply(st, i, th_new_reply(v + 1)) == 0);
  }
  if (each) s->cfg.res->misuse_ok += batch_reply_misuse(st);
  return sh_return(st, each ? NULL : th_new_reply(COMMON));
}

static sh_yield server_batch(sh_actor *self, sh_stack *st) {
  server *s = (server *)self;
  server_locals *l = sh_stack_locals(st);
  server_result *r = s->cfg.res;
  if (sh_stack_state(st) == SH_START) {
    int n = (int)sh_stack_batch_len(st);
    CHECK(n >= 1 && n <= LIMIT);
    r->batches++;
    r->batched += n;
    if (n > r->max_batch) r->max_batch = n;
    take_junk(l);
    /* Suspend between taking the batch and answering: other stacks run
     * and allocate meanwhile. */
    l->f = sh_ask(st, s->cfg.helper, &sh_msg_new(item_ask, .v = 0)->hdr, GUARD_MS);
    CHECK(l->f != NULL);
    return sh_suspend(st, S_ANSWER);
  }
  CHECK(sh_future_error(l->f) == 0);
  free_junk(l);
  return answer(s, st);
}

static const sh_actor_class server_class = {
    .name = "batch_server", .size = sizeof(server), .locals_size = sizeof(server_locals),
    .init = server_init, .ask = server_ask, .batch_ask = server_batch,
    .batch_ask_filter = ask_filter, .max_batch = LIMIT};

/* The helper the batch stacks wait on. */
static sh_yield helper_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  return sh_return(st, th_new_reply(1));
}
static const sh_actor_class helper_class = {
    .name = "helper", .size = sizeof(sh_actor), .ask = helper_ask};

/* Askers: ASKS asks of distinct values in one invocation, then check. */
typedef struct asker_result {
  int wrong;  /* replies with another asker's (or no) value */
  int failed; /* futures that failed */
} asker_result;

typedef struct asker_cfg {
  int id;
  answer_mode mode;
  asker_result *res;
} asker_cfg;

typedef struct asker { sh_actor base; asker_cfg cfg; } asker;
typedef struct asker_locals { sh_future *f[ASKS]; } asker_locals;
enum { A_GOT = 1 };

TH_CFG_INIT(asker_init, asker, asker_cfg);

static long asker_value(const asker *a, int j) { return 1000L * (a->cfg.id + 1) + j; }

static sh_yield asker_notice(sh_actor *self, sh_stack *st) {
  asker *a = (asker *)self;
  asker_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    const sh_addr *to = sh_stack_msg_as(st, kick_msg)->target;
    for (int j = 0; j < ASKS; j++) {
      item_ask *m = sh_msg_new(item_ask, .v = asker_value(a, j), .batchable = j != ASKS - 1);
      l->f[j] = sh_ask(st, to, &m->hdr, GUARD_MS);
      CHECK(l->f[j] != NULL);
    }
    return sh_suspend(st, A_GOT);
  }
  for (int j = 0; j < ASKS; j++) {
    if (sh_future_failed(l->f[j])) {
      a->cfg.res->failed++;
      continue;
    }
    long want = expected(a->cfg.mode, asker_value(a, j), j != ASKS - 1);
    a->cfg.res->wrong += sh_future_reply(l->f[j], num_reply)->v != want;
  }
  th_done(self);
  return sh_return(st, NULL);
}

static const sh_actor_class asker_class = {
    .name = "asker", .size = sizeof(asker), .locals_size = sizeof(asker_locals),
    .init = asker_init, .notice = asker_notice};

static void batch_ask(answer_mode mode, server_result *sr) {
  sh_system *sys = env_new(ASKERS, 0);
  asker_result ar[ASKERS] = {{0}};
  const sh_addr *askers[ASKERS];
  for (int i = 0; i < ASKERS; i++) {
    asker_cfg ac = {.id = i, .mode = mode, .res = &ar[i]};
    askers[i] = th_spawn_on(sys, &asker_class, &ac, (uint32_t)i % 2);
  }
  /* The server last on worker 0: the askers there run before it. */
  server_cfg sc = {.mode = mode, .helper = th_spawn_on(sys, &helper_class, NULL, 1), .res = sr};
  const sh_addr *srv = th_spawn_on(sys, &server_class, &sc, 0);
  for (int i = 0; i < ASKERS; i++)
    assert_int_equal(sh_notice(askers[i], &sh_msg_new(kick_msg, .target = srv)->hdr), 0);
  run_and_end(sys);

  for (int i = 0; i < ASKERS; i++) {
    assert_int_equal(ar[i].failed, 0);
    assert_int_equal(ar[i].wrong, 0); /* bug 3: each reply reached its own asker */
  }
  assert_int_equal(sr->singles, ASKERS);
  assert_int_equal(sr->batched, ASKERS * (ASKS - 1));
  assert_true(sr->max_batch <= LIMIT);
  /* A worker-0 asker's batchable asks are queued together before the
   * server runs again: batching did happen. */
  assert_true(sr->max_batch >= 2);
}

static void test_batch_ask_each_reply_reaches_its_asker(void **state) {
  (void)state;
  server_result sr = {0};
  batch_ask(ANSWER_EACH, &sr);
  assert_int_equal(sr.misuse_ok, sr.batches);
}

static void test_batch_ask_return_copies_reply_to_the_rest(void **state) {
  (void)state;
  server_result sr = {0};
  batch_ask(ANSWER_COMMON, &sr);
}

int main(void) {
  alarm(WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batch_notice_class_max_batch),
      cmocka_unit_test(test_batch_notice_config_max_batch),
      cmocka_unit_test(test_batch_notice_filter_keeps_order),
      cmocka_unit_test(test_batch_ask_each_reply_reaches_its_asker),
      cmocka_unit_test(test_batch_ask_return_copies_reply_to_the_rest),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
