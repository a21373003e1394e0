/*
 * What the two CAF fib twins share: fib(n) for n >= 2 from two requests,
 * sent with request(...).then (the actor keeps handling messages while
 * they are out) and joined by a response promise once both answered.
 */
#ifndef BENCH_SAVINA_CAF_FIB_HPP
#define BENCH_SAVINA_CAF_FIB_HPP

#include <memory>

#include "caf_savina.hpp"

using fib_atom = caf::atom_constant<caf::atom("fib")>;

/* Asks a and b for fib(n - 1) and fib(n - 2); the returned promise gets the
 * sum. then() runs on both's arrival (e.g. to stop a and b). */
template <class Then>
caf::response_promise sv_caf_fib_split(caf::event_based_actor *self, const caf::actor &a,
                                       const caf::actor &b, uint64_t n, Then then) {
  auto rp = self->make_response_promise();
  struct join {
    uint64_t sum = 0;
    int got = 0;
  };
  auto j = std::make_shared<join>();
  auto on_result = [=](uint64_t v) mutable {
    j->sum += v;
    if (++j->got == 2) {
      then();
      rp.deliver(j->sum);
    }
  };
  self->request(a, caf::infinite, fib_atom::value, n - 1).then(on_result);
  self->request(b, caf::infinite, fib_atom::value, n - 2).then(on_result);
  return rp;
}

/* Asks root for fib(n) from the main thread; whether the answer is right. */
inline bool sv_caf_fib_root(caf::scoped_actor &self, const caf::actor &root, uint64_t n) {
  bool ok = false;
  self->request(root, caf::infinite, fib_atom::value, n)
      .receive([&](uint64_t v) { ok = v == sv_fib_value(n); }, [](caf::error &) {});
  return ok;
}

#endif
