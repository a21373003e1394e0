/*
 * CAF twin of bench/savina/fib.c: an actor per call; the actor asked for
 * fib(n), n >= 2, spawns two actors, requests fib(n - 1) and fib(n - 2) and
 * answers the sum through a response promise; every actor quits once it
 * answered.
 */
#include "caf_fib.hpp"

namespace {

caf::behavior fib_actor(caf::event_based_actor *self) {
  return {[=](fib_atom, uint64_t n) -> caf::result<uint64_t> {
    if (n < 2) {
      self->quit();
      return n;
    }
    auto a = self->spawn(fib_actor), b = self->spawn(fib_actor);
    return sv_caf_fib_split(self, a, b, n, [=] { self->quit(); });
  }};
}

int run(void *, const sv_params *p, sv_sample *s) {
  return sv_caf_run(p, s, 2 * sv_fib_calls(p->n), [&](caf::actor_system &sys, caf::scoped_actor &self) {
    return sv_caf_fib_root(self, sys.spawn(fib_actor), p->n) ? 0 : -EPROTO;
  });
}

}  // namespace

int main(int argc, char **argv) { return sv_caf_main(&sv_fib, argc, argv, run); }
