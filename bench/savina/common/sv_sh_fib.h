/*
 * What the two stackhouse fib programs (fib.c: an actor per call; fibpool.c:
 * a fixed pool) share: the request and its reply, the ask handler that
 * computes fib(n) from two asks, and the run that asks the root through a
 * bridge. Header-only, like sv_sh.h.
 */
#ifndef BENCH_SAVINA_SV_SH_FIB_H
#define BENCH_SAVINA_SV_SH_FIB_H

#include <errno.h>

#include "specs.h"
#include "sv_sh.h"

typedef struct fib_ask {
  sh_msg hdr;
  uint64_t n;
} fib_ask;
typedef struct fib_reply {
  sh_msg hdr;
  uint64_t value;
} fib_reply;
SH_MSG_DEFINE(fib_ask, SH_ASK, 0);
SH_MSG_DEFINE(fib_reply, SH_REPLY, 0);

/* Who computes fib(n - 1) and fib(n - 2) for actor self: to[0] and to[1].
 * 0 or a negative errno. */
typedef int (*sv_fib_pick_fn)(sh_actor *self, const sh_addr *to[2]);
/* Called with the same to[] once both answered (NULL: nothing to do). */
typedef void (*sv_fib_done_fn)(const sh_addr *to[2]);

typedef struct sv_fib_locals {
  const sh_addr *to[2];
  sh_future *f[2];
} sv_fib_locals;

enum { SV_FIB_ASKED = 1 };

static inline sh_yield sv_fib_reply(sh_stack *st, uint64_t value) {
  fib_reply *r = sh_msg_new(fib_reply, .value = value);
  return r != NULL ? sh_return(st, &r->hdr) : sh_throw(st, -ENOMEM);
}

/* The ask handler: fib(n) for n < 2, else the sum of two asks. */
static inline sh_yield sv_fib_ask(sh_actor *self, sh_stack *st, sv_fib_pick_fn pick,
                                  sv_fib_done_fn done) {
  sv_fib_locals *l = sh_stack_locals(st);
  uint64_t n = sh_stack_msg_as(st, fib_ask)->n;
  if (sh_stack_state(st) == SV_FIB_ASKED) {
    const fib_reply *a = sh_future_reply(l->f[0], fib_reply);
    const fib_reply *b = sh_future_reply(l->f[1], fib_reply);
    if (a == NULL || b == NULL) return sh_throw(st, -EPROTO);
    uint64_t sum = a->value + b->value;
    if (done != NULL) done(l->to);
    return sv_fib_reply(st, sum);
  }
  if (n < 2) return sv_fib_reply(st, n);
  int rc = pick(self, l->to);
  for (int i = 0; i < 2 && rc == 0; i++) {
    fib_ask *m = sh_msg_new(fib_ask, .n = n - 1 - (uint64_t)i);
    l->f[i] = m != NULL ? sh_ask(st, l->to[i], &m->hdr, SH_FOREVER) : NULL;
    if (l->f[i] == NULL) rc = -ENOMEM;
  }
  return rc == 0 ? sh_suspend(st, SV_FIB_ASKED) : sh_throw(st, rc);
}

/* Asks root for fib(n) from the main thread, checks the answer and ends
 * the run (sh_system_exit). */
static inline int sv_fib_root(sh_system *sys, const sh_addr *root, uint64_t n) {
  sh_bridge *b;
  int rc = sh_bridge_new(sys, &b);
  if (rc != 0) return rc;
  fib_ask *m = sh_msg_new(fib_ask, .n = n);
  rc = m != NULL ? sh_bridge_ask(b, root, &m->hdr, SH_FOREVER, NULL) : -ENOMEM;
  sh_bridge_reply r = {0};
  if (rc == 0) rc = sh_bridge_recv(b, SH_FOREVER, &r);
  if (rc == 0) rc = r.error;
  if (rc == 0) rc = ((const fib_reply *)r.msg)->value == sv_fib_value(n) ? 0 : -EPROTO;
  sh_msg_free(r.msg);
  sh_bridge_free(b);
  sh_system_exit(sys, rc);
  return 0;
}

#endif
