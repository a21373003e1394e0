/*
 * A minimal stackhouse program: an entry actor asks an adder actor for a
 * running sum, ten times, each time suspending its stack until the reply
 * comes, then ends the program with the total as its exit status (55).
 *
 *   build/release/examples/adder; echo $?
 */
#include <stackhouse/stackhouse.h>
#include <stdio.h>

typedef struct add_ask { sh_msg hdr; int n; } add_ask;
typedef struct sum_reply { sh_msg hdr; long sum; } sum_reply;
SH_MSG_DEFINE(add_ask, SH_ASK, 0);
SH_MSG_DEFINE(sum_reply, SH_REPLY, 0);

/* The adder keeps a running total; each ask is one stack that returns at once. */
typedef struct adder { sh_actor base; long total; } adder;

static sh_yield adder_ask(sh_actor *self, sh_stack *st) {
  adder *a = (adder *)self;
  a->total += sh_stack_msg_as(st, add_ask)->n;
  sum_reply *r = sh_msg_new(sum_reply, .sum = a->total);
  return sh_return(st, &r->hdr);
}

static const sh_actor_class adder_class = {
    .name = "adder", .size = sizeof(adder), .ask = adder_ask};

/* The entry actor: its args notice runs a stack that loops over asks. */
typedef struct main_actor { sh_actor base; const sh_addr *adder; } main_actor;
typedef struct main_locals { int i; sh_future *f; } main_locals;
enum { START = SH_START, GOT_SUM };

static sh_yield main_notice(sh_actor *self, sh_stack *st) {
  main_actor *m = (main_actor *)self;
  main_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case START:
    if (sh_spawn(sh_actor_system(self), &adder_class, NULL, 1, &m->adder) != 0) break;
    l->i = 1;
    l->f = sh_ask(st, m->adder, &sh_msg_new(add_ask, .n = l->i)->hdr, 1000);
    return sh_suspend(st, GOT_SUM);
  case GOT_SUM:
    if (sh_future_failed(l->f)) break;
    if (++l->i <= 10) {
      l->f = sh_ask(st, m->adder, &sh_msg_new(add_ask, .n = l->i)->hdr, 1000);
      return sh_suspend(st, GOT_SUM);
    }
    printf("sum of 1..10 = %ld\n", sh_future_reply(l->f, sum_reply)->sum);
    sh_system_exit(sh_actor_system(self), (int)sh_future_reply(l->f, sum_reply)->sum);
    return sh_return(st, NULL);
  }
  sh_system_exit(sh_actor_system(self), 1);
  return sh_return(st, NULL);
}

static const sh_actor_class main_class = {
    .name = "main", .size = sizeof(main_actor), .locals_size = sizeof(main_locals),
    .notice = main_notice};

int main(int argc, char **argv) { return sh_run(NULL, &main_class, argc, argv); }
