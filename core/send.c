/*
 * The send path's slow steps (send.h) and the sends that need no stack:
 * sh_notice and sh_notice_try.
 */
#include "send.h"
#include "atomic.h"
#include "addr.h"
#include "check.h"
#include "msg.h"
#include "system.h"
#include "worker.h"

int sh_send_wait(sh_waiter *w) {
  sh_house *t = w->target;
  sh_gate *g = sh_house_gate(t, (sh_box)w->box);
  /* The gate went with the generation, or the generation ended: the target
   * is gone. A look only: it may change before the gate's lock is taken,
   * and the gate decides there (sh_gate_enter). */
  if (g == NULL || !sh_house_live(t, w->gen)) return -ESHUTDOWN;
  SH_ASSERT(w->msg != NULL);
  /* Admitted now or later, the message holds a slot. */
  w->msg->internal = w->gen | SH_MSG_SLOT;
  int rc = sh_gate_enter(g, w);
  if (rc == 0) sh_house_push(t, (sh_box)w->box, w->msg);
  return rc;
}

void sh_send_refused(sh_house *t, sh_box box) {
  sh_gate *g = sh_house_gate(t, box);
  if (g != NULL) sh_gate_refused(g);
}

void sh_send_drop_stopped(sh_system *sys, sh_msg *m) {
  sh_count(sys, SH_C_SENT);
  sh_count(sys, SH_C_DROPPED_STOPPED);
  sh_msg_free(m);
}

static bool notice_usable(const sh_addr *to, const sh_msg *m) {
  return to != NULL && m != NULL && m->type->kind == SH_NOTICE;
}

/* A notice that will not wait for room; on an error m is still the caller's. */
static int notice_now(const sh_addr *to, sh_msg *m, sh_house **t) {
  uint32_t gen;
  *t = sh_addr_pick(to, &gen);
  m->sender = NULL;
  m->id = 0;
  bool outside = sh_worker_current() == NULL;
  if (outside && !sh_system_outside_begin((*t)->sys)) return -ESHUTDOWN;
  sh_box box = sh_send_box(*t, SH_NOTICE);
  int rc = sh_send_now(*t, gen, box, m);
  if (outside) sh_system_outside_end((*t)->sys);
  if (rc == -EAGAIN) sh_send_refused(*t, box);
  return rc;
}

int sh_notice(const sh_addr *to, sh_msg *m) {
  SH_FROM_USER();
  if (!notice_usable(to, m)) {
    sh_msg_free(m);
    return -EINVAL;
  }
  sh_house *t;
  int rc = notice_now(to, m, &t);
  if (rc == -ESHUTDOWN)
    sh_send_drop_stopped(t->sys, m);
  else if (rc != 0)
    sh_msg_free(m);
  return rc;
}

int sh_notice_try(const sh_addr *to, sh_msg *m) {
  SH_FROM_USER();
  if (!notice_usable(to, m)) return -EINVAL;
  sh_house *t;
  return notice_now(to, m, &t);
}
