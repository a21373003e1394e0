/*
 * Savina's Big: A actors each send n pings, one at a time, to actors picked
 * at random among the others, which answer each with a pong. Messages:
 * 2 x A x n. The run ends when every actor has had its n pongs; the check:
 * the pings answered add up to A x n.
 *
 * Written the stackhouse way: the ping is an ask and the pong its reply. An
 * actor's pinging runs in one notice stack that suspends on each ask, while
 * the actor keeps answering the others' pings in other stacks.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common/specs.h"
#include "common/sv_sh.h"

typedef struct ping_ask {
  sh_msg hdr;
} ping_ask;
typedef struct pong_reply {
  sh_msg hdr;
} pong_reply;
typedef struct go_notice {
  sh_msg hdr;
} go_notice;
SH_MSG_DEFINE(ping_ask, SH_ASK, 0);
SH_MSG_DEFINE(pong_reply, SH_REPLY, 0);
SH_MSG_DEFINE(go_notice, SH_NOTICE, 0);

typedef struct run_ctx {
  const sv_params *p;
  const sh_addr **actors;
  atomic_uint_fast64_t busy;     /* actors still pinging */
  atomic_uint_fast64_t answered; /* pings answered, summed at stop */
} run_ctx;

typedef struct big_actor {
  sh_actor base;
  run_ctx *run;
  uint64_t rng;
  uint64_t answered;
  uint32_t index;
} big_actor;

typedef struct big_arg {
  run_ctx *run;
  uint32_t index;
} big_arg;

typedef struct big_locals {
  sh_future *f;
  uint64_t sent;
} big_locals;

enum { ASKED = 1 };

static int big_init(sh_actor *self, void *arg) {
  big_actor *b = (big_actor *)self;
  const big_arg *a = arg;
  b->run = a->run;
  b->index = a->index;
  b->rng = 0x9e3779b97f4a7c15u * (a->index + 1);
  return 0;
}

/* Another actor than b, at random (xorshift64). */
static const sh_addr *pick(big_actor *b) {
  b->rng ^= b->rng << 13;
  b->rng ^= b->rng >> 7;
  b->rng ^= b->rng << 17;
  uint64_t n = b->run->p->actors;
  uint64_t j = (b->index + 1 + b->rng % (n - 1)) % n;
  return b->run->actors[j];
}

static sh_yield big_end(sh_actor *self, sh_stack *st, int rc) {
  big_actor *b = (big_actor *)self;
  if (rc != 0 || atomic_fetch_sub(&b->run->busy, 1) == 1) sh_system_exit(sh_actor_system(self), rc);
  return sh_return(st, NULL);
}

static sh_yield big_notice(sh_actor *self, sh_stack *st) {
  big_actor *b = (big_actor *)self;
  big_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == ASKED && sh_future_failed(l->f)) return big_end(self, st, -EPROTO);
  if (l->sent == b->run->p->n) return big_end(self, st, 0);
  ping_ask *a = sh_msg_new(ping_ask);
  l->f = a != NULL ? sh_ask(st, pick(b), &a->hdr, SH_FOREVER) : NULL;
  if (l->f == NULL) return big_end(self, st, -ENOMEM);
  l->sent++;
  return sh_suspend(st, ASKED);
}

static sh_yield big_ask(sh_actor *self, sh_stack *st) {
  ((big_actor *)self)->answered++;
  pong_reply *r = sh_msg_new(pong_reply);
  return sh_return(st, r != NULL ? &r->hdr : NULL);
}

static void big_stop(sh_actor *self) {
  big_actor *b = (big_actor *)self;
  atomic_fetch_add_explicit(&b->run->answered, b->answered, memory_order_relaxed);
}

static const sh_actor_class big_class = {
    .name = "big",
    .size = sizeof(big_actor),
    .locals_size = sizeof(big_locals),
    .init = big_init,
    .stop = big_stop,
    .notice = big_notice,
    .ask = big_ask,
};

static int start(sh_system *sys, void *ctx) {
  run_ctx *r = ctx;
  int rc = 0;
  for (uint32_t i = 0; i < r->p->actors && rc == 0; i++) {
    big_arg a = {r, i};
    rc = sh_spawn(sys, &big_class, &a, 1, &r->actors[i]);
  }
  for (uint32_t i = 0; i < r->p->actors && rc == 0; i++)
    rc = sv_sh_notice(r->actors[i], go_notice);
  return rc;
}

static int run(void *ctx, const sv_params *p, sv_sample *s) {
  (void)ctx;
  if (p->actors < 2) return -EINVAL;
  run_ctx r = {.p = p};
  atomic_init(&r.busy, p->actors);
  atomic_init(&r.answered, 0);
  r.actors = calloc(p->actors, sizeof r.actors[0]);
  if (r.actors == NULL) return -ENOMEM;
  int rc = sv_sh_run(p, s, 2 * p->actors * p->n, start, &r);
  if (rc == 0 && atomic_load(&r.answered) != p->actors * p->n) rc = -EPROTO;
  free(r.actors);
  return rc;
}

int main(int argc, char **argv) {
  sv_params p;
  sv_setup(&sv_big, argc, argv, &p);
  return sv_main(&p, "stackhouse", run, NULL);
}
