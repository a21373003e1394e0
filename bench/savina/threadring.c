/*
 * Savina's ThreadRing: a token goes round a ring of actors, n passes in all;
 * the actor that receives it with no passes left ends the run. Messages: n
 * (one per pass). The check: the passes the actors counted add up to n.
 *
 * Each actor finds its successor in an array of the ring's addresses, filled
 * before the token is sent (the first send publishes it).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common/specs.h"
#include "common/sv_sh.h"

typedef struct token_notice {
  sh_msg hdr;
  uint64_t left; /* passes still to make */
} token_notice;
SH_MSG_DEFINE(token_notice, SH_NOTICE, 0);

typedef struct ring {
  uint32_t size;
  const sh_addr **members;
  atomic_uint_fast64_t passes; /* summed when the run ends */
} ring;

typedef struct member {
  sh_actor base;
  ring *ring;
  uint32_t index;
  uint64_t passes;
} member;

typedef struct member_arg {
  ring *ring;
  uint32_t index;
} member_arg;

static int member_init(sh_actor *self, void *arg) {
  member *m = (member *)self;
  const member_arg *a = arg;
  m->ring = a->ring;
  m->index = a->index;
  return 0;
}

static sh_yield member_notice(sh_actor *self, sh_stack *st) {
  member *m = (member *)self;
  uint64_t left = sh_stack_msg_as(st, token_notice)->left;
  if (left == 0) {
    sh_system_exit(sh_actor_system(self), 0);
    return sh_return(st, NULL);
  }
  m->passes++;
  const sh_addr *next = m->ring->members[(m->index + 1) % m->ring->size];
  int rc = sv_sh_notice(next, token_notice, .left = left - 1);
  if (rc != 0) sh_system_exit(sh_actor_system(self), rc);
  return sh_return(st, NULL);
}

/* Adds the actor's passes to the ring's sum, once the system stops. */
static void member_stop(sh_actor *self) {
  member *m = (member *)self;
  atomic_fetch_add_explicit(&m->ring->passes, m->passes, memory_order_relaxed);
}

static const sh_actor_class member_class = {
    .name = "ring member",
    .size = sizeof(member),
    .init = member_init,
    .stop = member_stop,
    .notice = member_notice,
};

typedef struct run_ctx {
  const sv_params *p;
  ring ring;
} run_ctx;

static int start(sh_system *sys, void *ctx) {
  run_ctx *r = ctx;
  int rc = 0;
  for (uint32_t i = 0; i < r->ring.size && rc == 0; i++) {
    member_arg a = {&r->ring, i};
    rc = sh_spawn(sys, &member_class, &a, 1, &r->ring.members[i]);
  }
  if (rc == 0) rc = sv_sh_notice(r->ring.members[0], token_notice, .left = r->p->n);
  return rc;
}

static int run(void *ctx, const sv_params *p, sv_sample *s) {
  (void)ctx;
  run_ctx r = {.p = p, .ring = {.size = (uint32_t)p->actors}};
  atomic_init(&r.ring.passes, 0);
  r.ring.members = calloc(r.ring.size, sizeof r.ring.members[0]);
  if (r.ring.members == NULL) return -ENOMEM;
  /* The stop hooks have run once sv_sh_run returns: the sum is complete. */
  int rc = sv_sh_run(p, s, p->n, start, &r);
  if (rc == 0 && atomic_load(&r.ring.passes) != p->n) rc = -EPROTO;
  free(r.ring.members);
  return rc;
}

int main(int argc, char **argv) {
  sv_params p;
  sv_setup(&sv_threadring, argc, argv, &p);
  return sv_main(&p, "stackhouse", run, NULL);
}
