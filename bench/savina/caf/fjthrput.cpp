/*
 * CAF twin of bench/savina/fjthrput.c: a driver actor sends n messages to
 * each of A workers, round after round; each worker computes sv_fj_work per
 * message and tells the main thread once it had its n.
 */
#include "caf_savina.hpp"

using work_atom = caf::atom_constant<caf::atom("work")>;

namespace {

struct worker_state {
  uint64_t got = 0;
  bool good = true;
};

caf::behavior worker(caf::stateful_actor<worker_state> *self, caf::actor main, uint64_t n) {
  return {[=](work_atom, double theta) {
    self->state.good = self->state.good && sv_fj_work(theta) > 0;
    if (++self->state.got == n) {
      self->send(main, done_atom::value, self->state.good);
      self->quit();
    }
  }};
}

void driver(caf::event_based_actor *self, std::vector<caf::actor> workers, uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    for (auto &w : workers) self->send(w, work_atom::value, 37.2);
}

int run(void *, const sv_params *p, sv_sample *s) {
  return sv_caf_run(p, s, p->actors * p->n, [&](caf::actor_system &sys, caf::scoped_actor &self) {
    std::vector<caf::actor> workers;
    for (uint64_t i = 0; i < p->actors; i++)
      workers.push_back(sys.spawn(worker, caf::actor{self}, p->n));
    sys.spawn(driver, workers, p->n);
    bool ok = true;
    for (uint64_t i = 0; i < p->actors; i++)
      self->receive([&](done_atom, bool good) { ok = ok && good; });
    return ok ? 0 : -EPROTO;
  });
}

}  // namespace

int main(int argc, char **argv) { return sv_caf_main(&sv_fjthrput, argc, argv, run); }
