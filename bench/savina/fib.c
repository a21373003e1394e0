/*
 * Savina's Fibonacci: fib(n) with an actor per call. The actor asked for
 * fib(n), n >= 2, spawns two actors, asks one for fib(n - 1) and the other
 * for fib(n - 2), suspends until both answered, stops them and answers the
 * sum. Messages: 2 per call (the request and its response); a run spawns
 * 2 x fib(n + 1) - 1 actors. The check: the root's answer is fib(n).
 *
 * A stopped actor's memory is kept until the system is freed (stackhouse's
 * addresses are plain pointers), so the peak RSS grows with the calls.
 */
#include "common/sv_sh_fib.h"

static int spawn_two(sh_actor *self, const sh_addr *to[2]);

static void stop_two(const sh_addr *to[2]) {
  sh_stop(to[0]);
  sh_stop(to[1]);
}

static sh_yield fib_actor_ask(sh_actor *self, sh_stack *st) {
  return sv_fib_ask(self, st, spawn_two, stop_two);
}

static const sh_actor_class fib_class = {
    .name = "fib",
    .size = sizeof(sh_actor),
    .locals_size = sizeof(sv_fib_locals),
    .ask = fib_actor_ask,
};

static int spawn_two(sh_actor *self, const sh_addr *to[2]) {
  sh_system *sys = sh_actor_system(self);
  int rc = sh_spawn(sys, &fib_class, NULL, 1, &to[0]);
  if (rc == 0) rc = sh_spawn(sys, &fib_class, NULL, 1, &to[1]);
  return rc;
}

static int start(sh_system *sys, void *ctx) {
  const sv_params *p = ctx;
  const sh_addr *root;
  int rc = sh_spawn(sys, &fib_class, NULL, 1, &root);
  return rc == 0 ? sv_fib_root(sys, root, p->n) : rc;
}

static int run(void *ctx, const sv_params *p, sv_sample *s) {
  (void)ctx;
  return sv_sh_run(p, s, 2 * sv_fib_calls(p->n), start, (void *)p);
}

int main(int argc, char **argv) {
  sv_params p;
  sv_setup(&sv_fib, argc, argv, &p);
  return sv_main(&p, "stackhouse", run, NULL);
}
