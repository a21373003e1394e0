/*
 * fib(n) over a fixed pool of actors (not in Savina; the counterpart of
 * fib.c without a spawn per call): the same calls and messages, each
 * request going to a member of the pool, round-robin from the asker. A
 * member suspended on its two asks keeps taking requests in other stacks,
 * so the pool never deadlocks. Messages: 2 per call. The check: fib(n).
 */
#include <stdlib.h>

#include "common/sv_sh_fib.h"

typedef struct pool {
  uint32_t size;
  const sh_addr **members;
} pool;

typedef struct member {
  sh_actor base;
  const pool *pool;
  uint32_t next; /* where this member's next request goes */
} member;

typedef struct member_arg {
  const pool *pool;
  uint32_t index;
} member_arg;

static int member_init(sh_actor *self, void *arg) {
  member *m = (member *)self;
  const member_arg *a = arg;
  m->pool = a->pool;
  m->next = a->index;
  return 0;
}

static int pick_two(sh_actor *self, const sh_addr *to[2]) {
  member *m = (member *)self;
  for (int i = 0; i < 2; i++) {
    m->next = (m->next + 1) % m->pool->size;
    to[i] = m->pool->members[m->next];
  }
  return 0;
}

static sh_yield member_ask(sh_actor *self, sh_stack *st) {
  return sv_fib_ask(self, st, pick_two, NULL);
}

static const sh_actor_class member_class = {
    .name = "fib pool member",
    .size = sizeof(member),
    .locals_size = sizeof(sv_fib_locals),
    .init = member_init,
    .ask = member_ask,
};

typedef struct run_ctx {
  const sv_params *p;
  pool pool;
} run_ctx;

static int start(sh_system *sys, void *ctx) {
  run_ctx *r = ctx;
  int rc = 0;
  for (uint32_t i = 0; i < r->pool.size && rc == 0; i++) {
    member_arg a = {&r->pool, i};
    rc = sh_spawn(sys, &member_class, &a, 1, &r->pool.members[i]);
  }
  return rc == 0 ? sv_fib_root(sys, r->pool.members[0], r->p->n) : rc;
}

static int run(void *ctx, const sv_params *p, sv_sample *s) {
  (void)ctx;
  run_ctx r = {.p = p, .pool = {.size = (uint32_t)p->actors}};
  r.pool.members = calloc(r.pool.size, sizeof r.pool.members[0]);
  if (r.pool.members == NULL) return -ENOMEM;
  int rc = sv_sh_run(p, s, 2 * sv_fib_calls(p->n), start, &r);
  free(r.pool.members);
  return rc;
}

int main(int argc, char **argv) {
  sv_params p;
  sv_setup(&sv_fibpool, argc, argv, &p);
  return sv_main(&p, "stackhouse", run, NULL);
}
