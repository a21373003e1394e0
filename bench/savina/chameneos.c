/*
 * Savina's Chameneos: C chameneos, each of one of three colours, go to a
 * mall to meet; the mall pairs them two by two until M meetings took place.
 * A chameneos asks the mall to meet (a request); the mall, holding the
 * first, passes the second's request to it; the first takes the colour
 * both get (sv_complement), tells the second (a change), and both ask the
 * mall again. Messages: 4 per meeting. Once M meetings took place, the mall
 * answers each request with a stop; each chameneos then reports its
 * meetings, whose sum must be 2 x M.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/specs.h"
#include "common/sv_sh.h"

typedef struct meet_notice {
  sh_msg hdr;
  const sh_addr *from;
  int colour;
} meet_notice;
typedef struct change_notice {
  sh_msg hdr;
  int colour;
} change_notice;
typedef struct stop_notice {
  sh_msg hdr;
} stop_notice;
typedef struct faded_notice {
  sh_msg hdr;
  uint64_t meetings;
} faded_notice;
SH_MSG_DEFINE(meet_notice, SH_NOTICE, 0);
SH_MSG_DEFINE(change_notice, SH_NOTICE, 0);
SH_MSG_DEFINE(stop_notice, SH_NOTICE, 0);
typedef struct go_notice {
  sh_msg hdr;
} go_notice;
SH_MSG_DEFINE(faded_notice, SH_NOTICE, 0);
SH_MSG_DEFINE(go_notice, SH_NOTICE, 0);

typedef struct mall {
  sh_actor base;
  uint64_t meetings; /* to take place in all */
  uint64_t left;    /* meetings still to take place */
  uint64_t faded;   /* chameneos that stopped */
  uint64_t met;     /* their meetings, summed */
  uint64_t members; /* chameneos in all */
  const sh_addr *waiting;
  int waiting_colour;
} mall;

typedef struct chameneos {
  sh_actor base;
  const sh_addr *mall;
  int colour;
  uint64_t meetings;
} chameneos;

typedef struct chameneos_arg {
  const sh_addr *mall;
  int colour;
} chameneos_arg;

/* The mall's answer to a request: stop once the meetings are done, else
 * hold it or pair it with the one held. */
static int mall_meet(mall *m, const meet_notice *req) {
  if (m->left == 0) return sv_sh_notice(req->from, stop_notice);
  if (m->waiting == NULL) {
    m->waiting = req->from;
    m->waiting_colour = req->colour;
    return 0;
  }
  m->left--;
  const sh_addr *first = m->waiting;
  m->waiting = NULL;
  return sv_sh_notice(first, meet_notice, .from = req->from, .colour = req->colour);
}

static sh_yield mall_notice(sh_actor *self, sh_stack *st) {
  mall *m = (mall *)self;
  const sh_msg *msg = sh_stack_msg(st);
  int rc = 0;
  if (sh_msg_is(msg, &meet_notice_type)) {
    rc = mall_meet(m, (const meet_notice *)msg);
  } else {
    m->met += ((const faded_notice *)msg)->meetings;
    if (++m->faded == m->members) {
      sh_system_exit(sh_actor_system(self), m->met == 2 * m->meetings ? 0 : -EPROTO);
      return sh_return(st, NULL);
    }
  }
  if (rc != 0) sh_system_exit(sh_actor_system(self), rc);
  return sh_return(st, NULL);
}

/* The mall's parameters, set before any message reaches it. */
static int mall_init(sh_actor *self, void *arg) {
  const sv_params *p = arg;
  mall *m = (mall *)self;
  m->meetings = m->left = p->n;
  m->members = p->actors;
  return 0;
}

static const sh_actor_class mall_class = {
    .name = "mall",
    .size = sizeof(mall),
    .init = mall_init,
    .notice = mall_notice,
};

static int chameneos_init(sh_actor *self, void *arg) {
  chameneos *c = (chameneos *)self;
  const chameneos_arg *a = arg;
  c->mall = a->mall;
  c->colour = a->colour;
  return 0;
}

/* A meeting as the first of the pair: both take the new colour. */
static int chameneos_met(chameneos *c, const meet_notice *other) {
  c->colour = sv_complement(c->colour, other->colour);
  c->meetings++;
  int rc = sv_sh_notice(other->from, change_notice, .colour = c->colour);
  if (rc == 0) rc = sv_sh_notice(c->mall, meet_notice, .from = sh_self(&c->base), .colour = c->colour);
  return rc;
}

static sh_yield chameneos_notice(sh_actor *self, sh_stack *st) {
  chameneos *c = (chameneos *)self;
  const sh_msg *msg = sh_stack_msg(st);
  int rc;
  if (sh_msg_is(msg, &meet_notice_type)) {
    rc = chameneos_met(c, (const meet_notice *)msg);
  } else if (sh_msg_is(msg, &change_notice_type)) {
    c->colour = ((const change_notice *)msg)->colour;
    c->meetings++;
    rc = sv_sh_notice(c->mall, meet_notice, .from = sh_self(self), .colour = c->colour);
  } else if (sh_msg_is(msg, &stop_notice_type)) {
    rc = sv_sh_notice(c->mall, faded_notice, .meetings = c->meetings);
  } else { /* the first request */
    rc = sv_sh_notice(c->mall, meet_notice, .from = sh_self(self), .colour = c->colour);
  }
  if (rc != 0) sh_system_exit(sh_actor_system(self), rc);
  return sh_return(st, NULL);
}

static const sh_actor_class chameneos_class = {
    .name = "chameneos",
    .size = sizeof(chameneos),
    .init = chameneos_init,
    .notice = chameneos_notice,
};

static int start(sh_system *sys, void *ctx) {
  sv_params *p = ctx;
  const sh_addr *m, *c;
  int rc = sh_spawn(sys, &mall_class, p, 1, &m);
  for (uint64_t i = 0; i < p->actors && rc == 0; i++) {
    chameneos_arg a = {m, (int)(i % 3)};
    rc = sh_spawn(sys, &chameneos_class, &a, 1, &c);
    if (rc == 0) rc = sv_sh_notice(c, go_notice);
  }
  return rc;
}

static int run(void *ctx, const sv_params *p, sv_sample *s) {
  (void)ctx;
  if (p->actors < 2) return -EINVAL;
  return sv_sh_run(p, s, 4 * p->n, start, (void *)p);
}

int main(int argc, char **argv) {
  sv_params p;
  sv_setup(&sv_chameneos, argc, argv, &p);
  return sv_main(&p, "stackhouse", run, NULL);
}
