/*
 * CAF twin of bench/savina/chameneos.c: the same mall and chameneos, with
 * plain sends; the mall tells the main thread the meetings summed once
 * every chameneos faded.
 */
#include "caf_savina.hpp"

using meet_atom = caf::atom_constant<caf::atom("meet")>;
using change_atom = caf::atom_constant<caf::atom("change")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;
using faded_atom = caf::atom_constant<caf::atom("faded")>;

namespace {

struct mall_state {
  uint64_t left = 0, met = 0, faded = 0;
  caf::actor waiting;
};

caf::behavior mall(caf::stateful_actor<mall_state> *self, caf::actor main, uint64_t meetings,
                   uint64_t members) {
  self->state.left = meetings;
  return {[=](meet_atom, caf::actor from, int colour) {
            auto &st = self->state;
            if (st.left == 0) {
              self->send(from, stop_atom::value);
            } else if (!st.waiting) {
              st.waiting = from;
            } else {
              st.left--;
              self->send(st.waiting, meet_atom::value, from, colour);
              st.waiting = caf::actor{};
            }
          },
          [=](faded_atom, uint64_t count) {
            self->state.met += count;
            if (++self->state.faded == members) {
              self->send(main, done_atom::value, self->state.met == 2 * meetings);
              self->quit();
            }
          }};
}

struct chameneos_state {
  int colour = 0;
  uint64_t meetings = 0;
};

caf::behavior chameneos(caf::stateful_actor<chameneos_state> *self, caf::actor m, int colour) {
  self->state.colour = colour;
  self->send(m, meet_atom::value, caf::actor{self}, colour);
  return {[=](meet_atom, caf::actor other, int other_colour) {
            auto &st = self->state;
            st.colour = sv_complement(st.colour, other_colour);
            st.meetings++;
            self->send(other, change_atom::value, st.colour);
            self->send(m, meet_atom::value, caf::actor{self}, st.colour);
          },
          [=](change_atom, int c) {
            self->state.colour = c;
            self->state.meetings++;
            self->send(m, meet_atom::value, caf::actor{self}, c);
          },
          [=](stop_atom) {
            self->send(m, faded_atom::value, self->state.meetings);
            self->quit();
          }};
}

int run(void *, const sv_params *p, sv_sample *s) {
  if (p->actors < 2) return -EINVAL;
  return sv_caf_run(p, s, 4 * p->n, [&](caf::actor_system &sys, caf::scoped_actor &self) {
    auto m = sys.spawn(mall, caf::actor{self}, p->n, p->actors);
    for (uint64_t i = 0; i < p->actors; i++) sys.spawn(chameneos, m, static_cast<int>(i % 3));
    bool ok = false;
    self->receive([&](done_atom, bool good) { ok = good; });
    return ok ? 0 : -EPROTO;
  });
}

}  // namespace

int main(int argc, char **argv) { return sv_caf_main(&sv_chameneos, argc, argv, run); }
