/*
 * test_workload: a hidden test scenario whose bug is in the workload, not
 * in the schedule, for the shrinker and its tests. A client runs up to 90
 * operations drawn from the scenario's stream against a small key-value
 * store actor and checks each read against a model. The store counts the
 * puts of a key and a delete takes one off instead of removing the key, so
 * a key put twice, deleted and read again is still there (FAIL:invariant).
 * Most seeds' workloads contain such a sequence somewhere among their
 * operations; `shsim shrink` cuts the failing workload down to the four
 * that matter (put, put, delete, get of one key), with the schedule.
 *
 * The workload is drawn so that it shrinks well: before each operation a
 * draw that ends the workload when 0, then one draw for the operation, 0
 * being the simplest (a read of key 0).
 *
 * Simulator only, hidden: it is meant to fail.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>

#include <stackhouse/scenario.h>

#define WL_MAX_OPS 90
#define WL_KEYS 4

enum { WL_GET = 0, WL_PUT = 1, WL_DEL = 2, WL_KINDS = 3 };

typedef struct wl_world {
  uint8_t op[WL_MAX_OPS]; /* kind + WL_KINDS * key */
  uint32_t nops;
  uint32_t next; /* the client's next operation */
  atomic_uint left;
  const sh_addr *store;
  const sh_addr *client;
} wl_world;

/* The store, with the bug: a delete takes one put off. */
typedef struct wl_store {
  sh_actor base;
  uint32_t count[WL_KEYS];
  uint64_t val[WL_KEYS];
} wl_store;

static sh_yield store_ask(sh_actor *self, sh_stack *st) {
  wl_store *d = (wl_store *)self;
  uint64_t v = sh_stack_msg_as(st, sh_scn_num_ask)->v;
  uint32_t kind = (uint32_t)(v % WL_KINDS), key = (uint32_t)(v / WL_KINDS % WL_KEYS);
  uint64_t arg = v / (WL_KINDS * WL_KEYS);
  if (kind == WL_PUT) {
    d->count[key]++;
    d->val[key] = arg;
  } else if (kind == WL_DEL && d->count[key] > 0) {
    d->count[key]--; /* the bug: should be 0 */
  }
  return sh_scn_answer(st, kind == WL_GET && d->count[key] > 0 ? d->val[key] + 1 : 0);
}

static const sh_actor_class store_class = {
    .name = "wl_store",
    .size = sizeof(wl_store),
    .ask = store_ask,
};

typedef struct wl_client {
  sh_scn_actor a;
  bool present[WL_KEYS];
  uint64_t val[WL_KEYS];
} wl_client;

typedef struct wl_locals {
  sh_future *f;
} wl_locals;

static const char *const kind_names[WL_KINDS] = {"get", "put", "del"};

/* The model's answer to operation i, and its own update. */
static uint64_t model(wl_client *c, uint32_t i, uint32_t kind, uint32_t key) {
  if (kind == WL_PUT) {
    c->present[key] = true;
    c->val[key] = i;
  } else if (kind == WL_DEL) {
    c->present[key] = false;
  }
  return kind == WL_GET && c->present[key] ? c->val[key] + 1 : 0;
}

/* One operation per notice: ask the store, check the answer, go on. */
static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  wl_client *c = (wl_client *)self;
  sh_scn *s = c->a.s;
  wl_world *wd = sh_scn_state(s);
  wl_locals *l = sh_stack_locals(st);
  uint32_t i = wd->next, kind = wd->op[i] % WL_KINDS, key = wd->op[i] / WL_KINDS;
  if (sh_stack_state(st) == SH_START) {
    uint64_t v = kind + (uint64_t)WL_KINDS * (key + (uint64_t)WL_KEYS * i);
    l->f = sh_scn_ask_num(st, wd->store, v, SH_FOREVER);
    if (!SH_SCN_CHECK(s, l->f != NULL, "sh_ask failed")) return sh_return(st, NULL);
    return sh_suspend(st, 1);
  }
  uint64_t got = 0, want = model(c, i, kind, key);
  bool answered = sh_scn_num_of(l->f, &got);
  bool ok = SH_SCN_CHECK(s, answered && got == want,
                         "operation %u of %u, %s(k%u): the store answered %llu, the model %llu "
                         "(error %d)", i + 1, wd->nops, kind_names[kind], key,
                         (unsigned long long)got, (unsigned long long)want, sh_future_error(l->f));
  return sh_scn_round_end(st, ok && ++wd->next < wd->nops, &wd->left);
}

static const sh_actor_class client_class = {
    .name = "wl_client",
    .size = sizeof(wl_client),
    .locals_size = sizeof(wl_locals),
    .init = sh_scn_actor_init,
    .notice = client_notice,
};

/* The workload, drawn before any actor runs. */
static void draw_workload(sh_scn *s, wl_world *wd) {
  wd->nops = 0;
  while (wd->nops < WL_MAX_OPS && sh_scn_below(s, 256) != 0)
    wd->op[wd->nops++] = (uint8_t)sh_scn_below(s, WL_KINDS * WL_KEYS);
}

static int setup(sh_scn *s, sh_system *sys) {
  wl_world *wd = sh_scn_state(s);
  draw_workload(s, wd);
  int rc = sh_spawn(sys, &store_class, NULL, 1, &wd->store);
  if (rc != 0) return rc;
  if (wd->nops == 0) {
    sh_scn_done(s, sys);
    return 0;
  }
  atomic_store(&wd->left, 1);
  return sh_scn_spawn_each(s, sys, &client_class, 1, SH_SCN_EACH_KICK, NULL);
}

static const sh_scenario test_workload = {
    .name = "test_workload",
    .summary = "must fail on most seeds: a store whose delete forgets a key put twice",
    .workers = 2,
    /* No `expect`: it fails on some seeds only. */
    .flags = SH_SCN_HIDDEN | SH_SCN_SIM_ONLY,
    .state_size = sizeof(wl_world),
    .setup = setup,
};
SH_SCENARIO(test_workload);
