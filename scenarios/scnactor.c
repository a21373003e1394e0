/*
 * The scenario framework's building blocks for scenario actors
 * (scenario.h): spawning, kicks and rounds, numbered messages and asks.
 * Public API only; the runs themselves are scenario.c's.
 */
#include <stackhouse/scenario.h>

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The framework's messages in words, for traces (sh_msg_type.describe). */
static int go_describe(const sh_msg *m, char *buf, size_t n) {
  return snprintf(buf, n, "n=%u", (unsigned)((const sh_scn_go *)m)->n);
}

/* sh_scn_num_ask and sh_scn_num share the layout {hdr, v}. */
static int num_describe(const sh_msg *m, char *buf, size_t n) {
  return snprintf(buf, n, "v=%llu", (unsigned long long)((const sh_scn_num *)m)->v);
}

SH_MSG_DEFINE_DESCRIBED(sh_scn_go, SH_NOTICE, 0, go_describe);
SH_MSG_DEFINE_DESCRIBED(sh_scn_num_ask, SH_ASK, 0, num_describe);
SH_MSG_DEFINE_DESCRIBED(sh_scn_num, SH_REPLY, 0, num_describe);

int sh_scn_actor_init(sh_actor *self, void *arg) {
  const sh_scn_arg *a = arg;
  sh_scn_actor *sa = (sh_scn_actor *)self;
  sa->s = a->s;
  sa->id = a->id;
  return 0;
}

int sh_scn_spawn(sh_scn *s, sh_system *sys, const sh_actor_class *c, uint32_t id,
                 uint32_t instances, const sh_addr **out) {
  /* init runs inside sh_spawn: the argument may live on this stack. */
  sh_scn_arg a = {s, id};
  return sh_spawn(sys, c, &a, instances, out);
}

int sh_scn_spawn_on(sh_scn *s, sh_system *sys, const sh_actor_class *c, uint32_t id,
                    uint32_t worker, const sh_addr **out) {
  sh_scn_arg a = {s, id};
  return sh_spawn_on(sys, c, &a, worker, out);
}

int sh_scn_spawn_each(sh_scn *s, sh_system *sys, const sh_actor_class *c, uint32_t n,
                      unsigned how, const sh_addr **out) {
  uint32_t workers = sh_system_workers(sys);
  int rc = 0;
  for (uint32_t i = 0; i < n && rc == 0; i++) {
    const sh_addr *a;
    rc = (how & SH_SCN_EACH_PINNED) ? sh_scn_spawn_on(s, sys, c, i, i % workers, &a)
                                    : sh_scn_spawn(s, sys, c, i, 1, &a);
    if (rc == 0 && out != NULL) out[i] = a;
    /* Kicked at once: the first actors may start while the others are
     * still being spawned. */
    if (rc == 0 && (how & SH_SCN_EACH_KICK)) rc = sh_scn_kick(a);
  }
  return rc;
}

int sh_scn_kick_n(const sh_addr *to, uint32_t n) {
  sh_scn_go *g = sh_msg_new(sh_scn_go, .n = n);
  return g != NULL ? sh_notice(to, &g->hdr) : -ENOMEM;
}

int sh_scn_kick(const sh_addr *to) { return sh_scn_kick_n(to, 0); }

uint32_t sh_scn_go_n(sh_stack *st) {
  const sh_msg *m = sh_stack_msg(st);
  assert(sh_msg_is(m, &sh_scn_go_type));
  return ((const sh_scn_go *)m)->n;
}

void sh_scn_next_round(sh_actor *self, bool more, atomic_uint *left) {
  sh_scn *s = sh_scn_of(self);
  if (!more) {
    sh_scn_count_down(s, sh_actor_system(self), left);
    return;
  }
  int rc = sh_scn_kick(sh_self(self));
  SH_SCN_CHECK(s, rc == 0, "actor %u: next round not sent: %d", sh_scn_id(self), rc);
}

sh_yield sh_scn_round_end(sh_stack *st, bool more, atomic_uint *left) {
  sh_scn_next_round(sh_stack_actor(st), more, left);
  return sh_return(st, NULL);
}

sh_future *sh_scn_ask_num_as(sh_stack *st, const sh_msg_type *t, const sh_addr *to, uint64_t v,
                             int64_t timeout_ms) {
  assert(t->size == sizeof(sh_scn_num_ask) && t->kind == SH_ASK);
  sh_scn_num_ask *q = (sh_scn_num_ask *)sh_msg_alloc(t);
  if (q == NULL) return NULL;
  q->v = v;
  return sh_ask(st, to, &q->hdr, timeout_ms);
}

sh_future *sh_scn_ask_num(sh_stack *st, const sh_addr *to, uint64_t v, int64_t timeout_ms) {
  return sh_scn_ask_num_as(st, &sh_scn_num_ask_type, to, v, timeout_ms);
}

sh_msg *sh_scn_num_new(uint64_t v) {
  sh_scn_num *r = sh_msg_new(sh_scn_num, .v = v);
  return r != NULL ? &r->hdr : NULL;
}

sh_yield sh_scn_answer(sh_stack *st, uint64_t v) {
  sh_msg *r = sh_scn_num_new(v);
  return r != NULL ? sh_return(st, r) : sh_throw(st, -ENOMEM);
}

bool sh_scn_num_of(const sh_future *f, uint64_t *v) {
  const sh_scn_num *r = sh_future_reply(f, sh_scn_num);
  if (sh_future_error(f) != 0 || r == NULL) return false;
  *v = r->v;
  return true;
}

