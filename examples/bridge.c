/*
 * An outside thread talking to actors (the program's main, through a
 * bridge), and back-pressure from a bounded mailbox.
 *
 * A slow "printer" actor takes lines through a notice mailbox of capacity 4.
 * A "producer" actor puts 20 lines into it from a stack: whenever the
 * mailbox is full its stack suspends (no thread blocks) until there is room.
 * Meanwhile main puts 10 lines of its own, blocking while the mailbox is
 * full, then asks the printer how many lines it printed and waits for the
 * answer. Exit status 0 when all 30 lines came out.
 *
 *   build/release/examples/bridge
 */
#include <stackhouse/stackhouse.h>
#include <stdio.h>

typedef struct line { sh_msg hdr; int from, n; } line;
typedef struct count_ask { sh_msg hdr; } count_ask;
typedef struct count_reply { sh_msg hdr; int printed; } count_reply;
typedef struct go { sh_msg hdr; } go;
SH_MSG_DEFINE(line, SH_NOTICE, 0);
SH_MSG_DEFINE(count_ask, SH_ASK, 0);
SH_MSG_DEFINE(count_reply, SH_REPLY, 0);
SH_MSG_DEFINE(go, SH_NOTICE, 0);

enum { FROM_ACTOR = 1, FROM_MAIN = 2, ACTOR_LINES = 20, MAIN_LINES = 10 };

/* ---- the printer: slow, with a bounded notice mailbox -------------------- */

typedef struct printer { sh_actor base; int printed; } printer;

static sh_yield printer_notice(sh_actor *self, sh_stack *st) {
  printer *p = (printer *)self;
  line *l = sh_stack_msg_as(st, line);
  printf("%s line %d\n", l->from == FROM_ACTOR ? "actor" : "main ", l->n);
  p->printed++;
  return sh_return(st, NULL);
}

static sh_yield printer_ask(sh_actor *self, sh_stack *st) {
  count_reply *r = sh_msg_new(count_reply, .printed = ((printer *)self)->printed);
  return sh_return(st, &r->hdr);
}

static const sh_actor_class printer_class = {
    .name = "printer", .size = sizeof(printer), .notice = printer_notice,
    .ask = printer_ask, .notice_capacity = 4, .max_per_run = 1};

/* ---- the producer: puts from a stack, suspending while the mailbox is full */

typedef struct producer { sh_actor base; const sh_addr *printer; } producer;
typedef struct producer_locals { int n; sh_future *f; } producer_locals;
enum { START = SH_START, PUT };

static int producer_init(sh_actor *self, void *arg) {
  ((producer *)self)->printer = arg;
  return 0;
}

static sh_yield producer_notice(sh_actor *self, sh_stack *st) {
  producer *p = (producer *)self;
  producer_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == PUT && sh_future_failed(l->f)) return sh_throw(st, sh_future_error(l->f));
  if (l->n == ACTOR_LINES) return sh_return(st, NULL);
  l->n++;
  l->f = sh_put(st, p->printer, &sh_msg_new(line, .from = FROM_ACTOR, .n = l->n)->hdr, SH_FOREVER);
  return sh_suspend(st, PUT); /* at once when there was room */
}

static const sh_actor_class producer_class = {
    .name = "producer", .size = sizeof(producer), .locals_size = sizeof(producer_locals),
    .init = producer_init, .notice = producer_notice};

/* ---- main: the outside thread -------------------------------------------- */

static int talk(sh_system *sys, const sh_addr *printer_addr) {
  sh_bridge *b;
  int rc = sh_bridge_new(sys, &b);
  if (rc != 0) return rc;
  for (int n = 1; n <= MAIN_LINES && rc == 0; n++) {
    line *l = sh_msg_new(line, .from = FROM_MAIN, .n = n);
    rc = sh_bridge_notice(b, printer_addr, &l->hdr, SH_FOREVER); /* blocks while full */
    if (rc != 0) sh_msg_free(&l->hdr); /* a failed send leaves it ours */
  }
  sh_mailbox_stats ms;
  sh_mailbox_stats_get(printer_addr, 0, SH_NOTICE, &ms);
  /* Ask until every line is out: the producer may still be putting. */
  int printed = 0;
  for (int tries = 0; rc == 0 && printed < ACTOR_LINES + MAIN_LINES && tries < 1000; tries++) {
    count_ask *a = sh_msg_new(count_ask);
    rc = sh_bridge_ask(b, printer_addr, &a->hdr, SH_FOREVER, NULL);
    if (rc != 0) {
      sh_msg_free(&a->hdr);
      break;
    }
    sh_bridge_reply r;
    rc = sh_bridge_recv(b, 5000, &r); /* at most 5 s */
    if (rc == 0 && r.error == 0) printed = ((count_reply *)r.msg)->printed;
    if (rc == 0) rc = r.error;
    sh_msg_free(r.msg);
  }
  sh_bridge_free(b);
  printf("printed %d lines; the mailbox held at most %u of %u, %llu sends waited for room\n",
         printed, ms.high_water, ms.capacity, (unsigned long long)ms.suspended);
  return rc == 0 && printed == ACTOR_LINES + MAIN_LINES ? 0 : 1;
}

int main(void) {
  sh_system *sys;
  if (sh_system_new(NULL, &sys) != 0) return 1;
  const sh_addr *printer_addr, *producer_addr;
  int rc = sh_system_start(sys);
  if (rc == 0) rc = sh_spawn(sys, &printer_class, NULL, 1, &printer_addr);
  if (rc == 0) rc = sh_spawn(sys, &producer_class, (void *)printer_addr, 1, &producer_addr);
  if (rc == 0) rc = sh_notice(producer_addr, &sh_msg_new(go)->hdr);
  if (rc == 0) rc = talk(sys, printer_addr);
  sh_system_shutdown(sys);
  sh_system_free(sys);
  return rc == 0 ? 0 : 1;
}
