/*
 * CAF twin of bench/savina/counting.c: the producer sends n increments,
 * then request(counter, retrieve); the counter's handler returns its count
 * as the response (CAF's mailbox keeps one sender's messages in order).
 */
#include "caf_savina.hpp"

using increment_atom = caf::atom_constant<caf::atom("increment")>;
using retrieve_atom = caf::atom_constant<caf::atom("retrieve")>;

namespace {

struct counter_state {
  uint64_t count = 0;
};

caf::behavior counter(caf::stateful_actor<counter_state> *self) {
  return {[=](increment_atom) { self->state.count++; },
          [=](retrieve_atom) { return self->state.count; }};
}

caf::behavior producer(caf::event_based_actor *self, caf::actor counter, caf::actor main,
                       uint64_t n) {
  for (uint64_t i = 0; i < n; i++) self->send(counter, increment_atom::value);
  self->request(counter, caf::infinite, retrieve_atom::value).then([=](uint64_t count) {
    self->send(main, done_atom::value, count == n);
    self->quit();
  });
  return {};
}

int run(void *, const sv_params *p, sv_sample *s) {
  return sv_caf_run(p, s, p->n + 2, [&](caf::actor_system &sys, caf::scoped_actor &self) {
    auto c = sys.spawn(counter);
    sys.spawn(producer, c, caf::actor{self}, p->n);
    bool ok = false;
    self->receive([&](done_atom, bool good) { ok = good; });
    sv_caf_exit({c});
    return ok ? 0 : -EPROTO;
  });
}

}  // namespace

int main(int argc, char **argv) { return sv_caf_main(&sv_counting, argc, argv, run); }
