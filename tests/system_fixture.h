/*
 * What test_system.c and test_msg.c share: a notice type, an actor class
 * that counts its init calls (one of which can be made to fail) and the
 * notices it handles, and a 2-worker system that is never started (the
 * test thread acts as a worker through support/manual.h), freed without a
 * shutdown: several tests are about what comes before one.
 */
#ifndef TESTS_SYSTEM_FIXTURE_H
#define TESTS_SYSTEM_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "support/manual.h"
#include "sched/system.h"
#include "sched/worker.h"

typedef struct note { sh_msg hdr; int a; long b; char c[24]; } note;
SH_MSG_DEFINE(note, SH_NOTICE, 0);
/* ---- actors -------------------------------------------------------------- */

static int inits;      /* init hook calls */
static int fail_at;    /* the init call (1-based) that fails, 0: none */
static int fail_with;  /* what it returns */
static int handled;    /* notices handled */

static int counting_init(sh_actor *self, void *arg) {
  (void)self, (void)arg;
  return ++inits == fail_at ? fail_with : 0;
}

static sh_yield counting_notice(sh_actor *self, sh_stack *st) {
  (void)self;
  handled++;
  return sh_return(st, NULL);
}

static const sh_actor_class plain_class = {.name = "plain", .size = sizeof(sh_actor),
                                           .init = counting_init, .notice = counting_notice};

/* ---- harness ------------------------------------------------------------- */

static int setup(void **state) {
  (void)state;
  inits = fail_at = fail_with = handled = 0;
  th_sys = th_system(2);
  return 0;
}

/* Frees without a shutdown: several tests are about what comes before one. */
static int teardown(void **state) {
  (void)state;
  sh_worker_enter(NULL);
  sh_system_free(th_sys);
  th_sys = NULL;
  return 0;
}
#endif
