/*
 * CAF twin of bench/savina/threadring.c: each member learns its successor
 * from a message, then forwards the token; the one that gets it with no
 * passes left tells the main thread, which then collects every member's
 * passes.
 */
#include "caf_savina.hpp"

using next_atom = caf::atom_constant<caf::atom("next")>;
using token_atom = caf::atom_constant<caf::atom("token")>;
using passes_atom = caf::atom_constant<caf::atom("passes")>;

namespace {

struct member_state {
  caf::actor next;
  uint64_t passes = 0;
};

caf::behavior member(caf::stateful_actor<member_state> *self, caf::actor main) {
  return {[=](next_atom, caf::actor next) { self->state.next = next; },
          [=](token_atom, uint64_t left) {
            if (left == 0) {
              self->send(main, done_atom::value);
              return;
            }
            self->state.passes++;
            self->send(self->state.next, token_atom::value, left - 1);
          },
          [=](passes_atom) {
            self->quit();
            return self->state.passes;
          }};
}

int run(void *, const sv_params *p, sv_sample *s) {
  return sv_caf_run(p, s, p->n, [&](caf::actor_system &sys, caf::scoped_actor &self) {
    std::vector<caf::actor> ring;
    for (uint64_t i = 0; i < p->actors; i++) ring.push_back(sys.spawn(member, caf::actor{self}));
    for (size_t i = 0; i < ring.size(); i++)
      self->send(ring[i], next_atom::value, ring[(i + 1) % ring.size()]);
    self->send(ring[0], token_atom::value, p->n);
    self->receive([](done_atom) {});
    uint64_t sum = 0;
    for (auto &m : ring)
      self->request(m, caf::infinite, passes_atom::value)
          .receive([&](uint64_t passes) { sum += passes; }, [](caf::error &) {});
    return sum == p->n ? 0 : -EPROTO;
  });
}

}  // namespace

int main(int argc, char **argv) { return sv_caf_main(&sv_threadring, argc, argv, run); }
