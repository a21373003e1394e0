/*
 * Savina's Counting: a producer sends n increments to a counter, then asks
 * for the count, which must be n. Messages: n + 2 (the increments, the
 * retrieve request, its reply).
 *
 * Every message is a notice: the retrieve request must come after the
 * increments, and an actor's asks and notices wait in separate mailboxes
 * (no order between them), while notices from one sender stay in order. So
 * the counter answers the retrieve notice with a notice of its own.
 */
#include <errno.h>

#include "common/specs.h"
#include "common/sv_sh.h"

typedef struct start_notice {
  sh_msg hdr;
  const sh_addr *counter;
  uint64_t increments;
} start_notice;
typedef struct increment_notice {
  sh_msg hdr;
} increment_notice;
typedef struct retrieve_notice {
  sh_msg hdr;
  const sh_addr *reply_to;
} retrieve_notice;
typedef struct count_notice {
  sh_msg hdr;
  uint64_t count;
} count_notice;
SH_MSG_DEFINE(start_notice, SH_NOTICE, 0);
SH_MSG_DEFINE(increment_notice, SH_NOTICE, 0);
SH_MSG_DEFINE(retrieve_notice, SH_NOTICE, 0);
SH_MSG_DEFINE(count_notice, SH_NOTICE, 0);

typedef struct producer {
  sh_actor base;
  uint64_t expected;
} producer;

typedef struct counter {
  sh_actor base;
  uint64_t count;
} counter;

static int send_all(producer *p, const start_notice *go) {
  p->expected = go->increments;
  int rc = 0;
  for (uint64_t i = 0; i < go->increments && rc == 0; i++)
    rc = sv_sh_notice(go->counter, increment_notice);
  if (rc == 0) rc = sv_sh_notice(go->counter, retrieve_notice, .reply_to = sh_self(&p->base));
  return rc;
}

static sh_yield producer_notice(sh_actor *self, sh_stack *st) {
  producer *p = (producer *)self;
  const sh_msg *m = sh_stack_msg(st);
  if (sh_msg_is(m, &start_notice_type)) {
    int rc = send_all(p, (const start_notice *)m);
    if (rc != 0) sh_system_exit(sh_actor_system(self), rc);
  } else {
    uint64_t count = ((const count_notice *)m)->count;
    sh_system_exit(sh_actor_system(self), count == p->expected ? 0 : -EPROTO);
  }
  return sh_return(st, NULL);
}

static sh_yield counter_notice(sh_actor *self, sh_stack *st) {
  counter *c = (counter *)self;
  const sh_msg *m = sh_stack_msg(st);
  if (sh_msg_is(m, &increment_notice_type)) {
    c->count++;
  } else {
    const retrieve_notice *r = (const retrieve_notice *)m;
    int rc = sv_sh_notice(r->reply_to, count_notice, .count = c->count);
    if (rc != 0) sh_system_exit(sh_actor_system(self), rc);
  }
  return sh_return(st, NULL);
}

static const sh_actor_class producer_class = {
    .name = "producer",
    .size = sizeof(producer),
    .notice = producer_notice,
};

static const sh_actor_class counter_class = {
    .name = "counter",
    .size = sizeof(counter),
    .notice = counter_notice,
};

static int start(sh_system *sys, void *ctx) {
  const sv_params *p = ctx;
  const sh_addr *prod, *count;
  int rc = sh_spawn(sys, &counter_class, NULL, 1, &count);
  if (rc == 0) rc = sh_spawn(sys, &producer_class, NULL, 1, &prod);
  if (rc == 0) rc = sv_sh_notice(prod, start_notice, .counter = count, .increments = p->n);
  return rc;
}

static int run(void *ctx, const sv_params *p, sv_sample *s) {
  (void)ctx;
  return sv_sh_run(p, s, p->n + 2, start, (void *)p);
}

int main(int argc, char **argv) {
  sv_params p;
  sv_setup(&sv_counting, argc, argv, &p);
  return sv_main(&p, "stackhouse", run, NULL);
}
