/*
 * CAF twin of bench/savina/big.c: each actor, once it knows its peers,
 * sends request(peer, ping) to a random other and, in the response
 * handler, the next, n in all, then tells the main thread; its ping handler
 * counts and answers. The main thread then collects the counts.
 */
#include "caf_savina.hpp"

using ping_atom = caf::atom_constant<caf::atom("ping")>;
using peers_atom = caf::atom_constant<caf::atom("peers")>;
using answered_atom = caf::atom_constant<caf::atom("answered")>;

namespace {

struct big_state {
  std::vector<caf::actor> peers;
  uint64_t index = 0, rng = 0, sent = 0, answered = 0;
};

using big_actor = caf::stateful_actor<big_state>;

/* Another actor than self, at random (xorshift64, as in big.c). */
const caf::actor &pick(big_state &st) {
  st.rng ^= st.rng << 13;
  st.rng ^= st.rng >> 7;
  st.rng ^= st.rng << 17;
  uint64_t w = st.peers.size();
  return st.peers[(st.index + 1 + st.rng % (w - 1)) % w];
}

void ping_next(big_actor *self, caf::actor main, uint64_t n) {
  if (self->state.sent == n) {
    self->send(main, done_atom::value);
    return;
  }
  self->state.sent++;
  self->request(pick(self->state), caf::infinite, ping_atom::value).then([=](ping_atom) {
    ping_next(self, main, n);
  });
}

caf::behavior big(big_actor *self, caf::actor main, uint64_t n) {
  return {[=](peers_atom, std::vector<caf::actor> peers, uint64_t index) {
            self->state.peers = std::move(peers);
            self->state.index = index;
            self->state.rng = 0x9e3779b97f4a7c15u * (index + 1);
            ping_next(self, main, n);
          },
          [=](ping_atom) {
            self->state.answered++;
            return ping_atom::value;
          },
          [=](answered_atom) {
            self->quit();
            return self->state.answered;
          }};
}

int run(void *, const sv_params *p, sv_sample *s) {
  if (p->actors < 2) return -EINVAL;
  return sv_caf_run(p, s, 2 * p->actors * p->n,
                    [&](caf::actor_system &sys, caf::scoped_actor &self) {
    std::vector<caf::actor> all;
    for (uint64_t i = 0; i < p->actors; i++) all.push_back(sys.spawn(big, caf::actor{self}, p->n));
    for (uint64_t i = 0; i < p->actors; i++) self->send(all[i], peers_atom::value, all, i);
    for (uint64_t i = 0; i < p->actors; i++) self->receive([](done_atom) {});
    uint64_t sum = 0;
    for (auto &a : all)
      self->request(a, caf::infinite, answered_atom::value)
          .receive([&](uint64_t c) { sum += c; }, [](caf::error &) {});
    return sum == p->actors * p->n ? 0 : -EPROTO;
  });
}

}  // namespace

int main(int argc, char **argv) { return sv_caf_main(&sv_big, argc, argv, run); }
