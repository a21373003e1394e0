/*
 * CAF twin of bench/savina/fibpool.c: a fixed pool of actors; a member
 * asked for fib(n), n >= 2, requests fib(n - 1) and fib(n - 2) from the next
 * two members (round-robin from itself) and answers the sum through a
 * response promise, taking other requests meanwhile.
 */
#include "caf_fib.hpp"

using pool_atom = caf::atom_constant<caf::atom("pool")>;

namespace {

struct member_state {
  std::vector<caf::actor> pool;
  uint64_t next = 0;
};

using member_actor = caf::stateful_actor<member_state>;

const caf::actor &pick(member_state &st) {
  st.next = (st.next + 1) % st.pool.size();
  return st.pool[st.next];
}

caf::behavior member(member_actor *self) {
  return {[=](pool_atom, std::vector<caf::actor> pool, uint64_t index) {
            self->state.pool = std::move(pool);
            self->state.next = index;
          },
          [=](fib_atom, uint64_t n) -> caf::result<uint64_t> {
            if (n < 2) return n;
            const caf::actor &a = pick(self->state);
            return sv_caf_fib_split(self, a, pick(self->state), n, [] {});
          }};
}

int run(void *, const sv_params *p, sv_sample *s) {
  return sv_caf_run(p, s, 2 * sv_fib_calls(p->n), [&](caf::actor_system &sys, caf::scoped_actor &self) {
    std::vector<caf::actor> pool;
    for (uint64_t i = 0; i < p->actors; i++) pool.push_back(sys.spawn(member));
    for (uint64_t i = 0; i < p->actors; i++) self->send(pool[i], pool_atom::value, pool, i);
    bool ok = sv_caf_fib_root(self, pool[0], p->n);
    sv_caf_exit(pool);
    return ok ? 0 : -EPROTO;
  });
}

}  // namespace

int main(int argc, char **argv) { return sv_caf_main(&sv_fibpool, argc, argv, run); }
