/*
 * Savina's PingPong: a pinger and a ponger exchange n pings and pongs, one
 * at a time. Messages: 2 per ping.
 *
 * Written the stackhouse way: the ping is an ask and the pong its reply, so
 * the pinger runs one notice stack that asks, suspends on the future and
 * asks again (Savina's actors send each other plain messages). The check:
 * every pong carries its ping's number, and n of them came back.
 */
#include <errno.h>

#include "common/specs.h"
#include "common/sv_sh.h"

typedef struct ping_ask {
  sh_msg hdr;
  uint64_t n;
} ping_ask;
typedef struct pong_reply {
  sh_msg hdr;
  uint64_t n;
} pong_reply;
typedef struct start_notice {
  sh_msg hdr;
  const sh_addr *ponger;
  uint64_t pings;
} start_notice;
SH_MSG_DEFINE(ping_ask, SH_ASK, 0);
SH_MSG_DEFINE(pong_reply, SH_REPLY, 0);
SH_MSG_DEFINE(start_notice, SH_NOTICE, 0);

typedef struct pinger_locals {
  sh_future *f;
  uint64_t sent;
} pinger_locals;

enum { ASKED = 1 };

static sh_yield pinger_go(sh_actor *self, sh_stack *st) {
  const start_notice *go = sh_stack_msg_as(st, start_notice);
  pinger_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == ASKED) {
    const pong_reply *r = sh_future_reply(l->f, pong_reply);
    if (r == NULL || r->n != l->sent) {
      sh_system_exit(sh_actor_system(self), -EPROTO);
      return sh_return(st, NULL);
    }
  }
  if (l->sent == go->pings) {
    sh_system_exit(sh_actor_system(self), 0);
    return sh_return(st, NULL);
  }
  ping_ask *a = sh_msg_new(ping_ask, .n = ++l->sent);
  l->f = a != NULL ? sh_ask(st, go->ponger, &a->hdr, SH_FOREVER) : NULL;
  if (l->f == NULL) {
    sh_system_exit(sh_actor_system(self), -ENOMEM);
    return sh_return(st, NULL);
  }
  return sh_suspend(st, ASKED);
}

static const sh_actor_class pinger_class = {
    .name = "pinger",
    .size = sizeof(sh_actor),
    .locals_size = sizeof(pinger_locals),
    .notice = pinger_go,
};

static sh_yield ponger_ask(sh_actor *self, sh_stack *st) {
  (void)self;
  const ping_ask *a = sh_stack_msg_as(st, ping_ask);
  pong_reply *r = sh_msg_new(pong_reply, .n = a->n);
  return sh_return(st, r != NULL ? &r->hdr : NULL);
}

static const sh_actor_class ponger_class = {
    .name = "ponger",
    .size = sizeof(sh_actor),
    .ask = ponger_ask,
};

static int start(sh_system *sys, void *ctx) {
  const sv_params *p = ctx;
  const sh_addr *pinger, *ponger;
  int rc = sh_spawn(sys, &ponger_class, NULL, 1, &ponger);
  if (rc == 0) rc = sh_spawn(sys, &pinger_class, NULL, 1, &pinger);
  if (rc == 0) rc = sv_sh_notice(pinger, start_notice, .ponger = ponger, .pings = p->n);
  return rc;
}

static int run(void *ctx, const sv_params *p, sv_sample *s) {
  (void)ctx;
  return sv_sh_run(p, s, 2 * p->n, start, (void *)p);
}

int main(int argc, char **argv) {
  sv_params p;
  sv_setup(&sv_pingpong, argc, argv, &p);
  return sv_main(&p, "stackhouse", run, NULL);
}
