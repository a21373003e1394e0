/*
 * abandon: a stack that moves on with asks still pending. A client asks
 * every server with a drawn timeout (1 to 8 ms, or none), waits with
 * sh_suspend_any, and at the first completion ends its round (its stack
 * returns): the futures still pending are freed with their timeouts armed,
 * and the answers that come later are dropped as late (stackhouse.h: a
 * future's reply is freed when the stack moves on or returns). The servers
 * answer after sleeping 0 to 6 ms, so that timeouts, answers and the
 * abandonment race. Checked: each resume sees a future done, with its own
 * answer or -ETIMEDOUT; every ask is resolved and every message accounted
 * for (the shared invariants); a timeout of a freed future never fires on
 * it (the model's timer rules, the future's assertions).
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/scenario.h>

#define AB_SERVERS 3u
#define AB_ROUNDS 8u

typedef struct world {
  const sh_addr *servers[AB_SERVERS];
  uint32_t rounds; /* the client's, which alone touches it */
  atomic_uint left;
} world;

typedef struct server_locals {
  sh_future *f;
} server_locals;

static sh_yield server_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  server_locals *l = sh_stack_locals(st);
  const sh_scn_num_ask *q = sh_stack_msg_as(st, sh_scn_num_ask);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_sleep(st, (int64_t)(q->v % 7));
    if (l->f != NULL) return sh_suspend(st, 1);
  }
  return sh_scn_answer(st, q->v + 1);
}

static const sh_actor_class server_class = {
    .name = "ab_server", .size = sizeof(sh_scn_actor), .locals_size = sizeof(server_locals),
    .init = sh_scn_actor_init, .ask = server_ask};

typedef struct client_locals {
  sh_future *f[AB_SERVERS];
  uint64_t v[AB_SERVERS];
  int64_t timeout[AB_SERVERS];
  uint64_t asked_ns; /* sh_scn_clock_ns when the asks were made */
} client_locals;

/* The futures done at the resume: each with its own answer or a timeout. */
static void check_done(sh_scn *s, const client_locals *l) {
  uint32_t done = 0;
  for (uint32_t i = 0; i < AB_SERVERS; i++) {
    if (l->f[i] == NULL || !sh_future_done(l->f[i])) continue;
    done++;
    uint64_t v = 0;
    if (sh_scn_num_of(l->f[i], &v))
      SH_SCN_CHECK(s, v == l->v[i] + 1, "server %u answered %llu, want %llu", i,
                   (unsigned long long)v, (unsigned long long)l->v[i] + 1);
    else if (sh_future_error(l->f[i]) != -ETIMEDOUT)
      SH_SCN_CHECK(s, sh_scn_faulty(s), "server %u's ask failed with %d", i,
                   sh_future_error(l->f[i]));
    else /* a timeout of its own, not an earlier future's that was left armed */
      SH_SCN_CHECK(s, l->timeout[i] != SH_FOREVER &&
                          sh_scn_clock_ns() - l->asked_ns >= (uint64_t)l->timeout[i] * 1000000u,
                   "server %u's ask timed out after %llu ns, its timeout %lld ms", i,
                   (unsigned long long)(sh_scn_clock_ns() - l->asked_ns),
                   (long long)l->timeout[i]);
  }
  SH_SCN_CHECK(s, done > 0, "sh_suspend_any resumed with no future done");
}

static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  client_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    uint32_t made = 0;
    l->asked_ns = sh_scn_clock_ns();
    for (uint32_t i = 0; i < AB_SERVERS; i++) {
      uint64_t r = sh_scn_rand(s);
      l->v[i] = r >> 8;
      l->timeout[i] = (r & 3) == 0 ? SH_FOREVER : 1 + (int64_t)(r >> 3 & 7);
      l->f[i] = sh_scn_ask_num(st, wd->servers[i], l->v[i], l->timeout[i]);
      made += l->f[i] != NULL;
    }
    if (made > 0) return sh_suspend_any(st, 1);
  } else {
    check_done(s, l);
  }
  /* Returns with the other asks pending: their futures go with the stack. */
  return sh_scn_round_end(st, ++wd->rounds < AB_ROUNDS, &wd->left);
}

static const sh_actor_class client_class = {
    .name = "ab_client", .size = sizeof(sh_scn_actor), .init = sh_scn_actor_init,
    .locals_size = sizeof(client_locals), .notice = client_notice};

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  atomic_init(&wd->left, 1);
  int rc = sh_scn_spawn_each(s, sys, &server_class, AB_SERVERS, 0, wd->servers);
  const sh_addr *client = NULL;
  if (rc == 0) rc = sh_scn_spawn(s, sys, &client_class, AB_SERVERS, 1, &client);
  if (rc == 0) rc = sh_scn_kick(client);
  return rc;
}

static const sh_scenario abandon = {
    .name = "abandon",
    .summary = "asks left pending with their timeouts armed when the stack moves on",
    .state_size = sizeof(world),
    .setup = setup,
};
SH_SCENARIO(abandon);
