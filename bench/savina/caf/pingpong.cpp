/*
 * CAF twin of bench/savina/pingpong.c: the pinger sends
 * request(ponger, ping, i) and, in the response handler (.then), checks the
 * pong and sends the next; the ponger's handler returns i as the response.
 */
#include "caf_savina.hpp"

using ping_atom = caf::atom_constant<caf::atom("ping")>;

namespace {

void ping_next(caf::event_based_actor *self, caf::actor ponger, caf::actor main, uint64_t i,
               uint64_t n) {
  if (i > n) {
    self->send(main, done_atom::value, true);
    self->quit();
    return;
  }
  self->request(ponger, caf::infinite, ping_atom::value, i).then([=](uint64_t j) {
    if (j != i) {
      self->send(main, done_atom::value, false);
      self->quit();
      return;
    }
    ping_next(self, ponger, main, i + 1, n);
  });
}

caf::behavior pinger(caf::event_based_actor *self, caf::actor ponger, caf::actor main, uint64_t n) {
  ping_next(self, ponger, main, 1, n);
  return {};
}

caf::behavior ponger(caf::event_based_actor *) {
  return {[](ping_atom, uint64_t i) { return i; }};
}

int run(void *, const sv_params *p, sv_sample *s) {
  return sv_caf_run(p, s, 2 * p->n, [&](caf::actor_system &sys, caf::scoped_actor &self) {
    auto po = sys.spawn(ponger);
    sys.spawn(pinger, po, caf::actor{self}, p->n);
    bool ok = false;
    self->receive([&](done_atom, bool good) { ok = good; });
    sv_caf_exit({po});
    return ok ? 0 : -EPROTO;
  });
}

}  // namespace

int main(int argc, char **argv) { return sv_caf_main(&sv_pingpong, argc, argv, run); }
