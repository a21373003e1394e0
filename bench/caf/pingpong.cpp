/*
 * CAF (C++ Actor Framework, 0.17) version of bench/pingpong.c, for
 * bench/compare_caf.sh: the same workload, measured by the same C code
 * (bench/common/bench.c, malloc_count.c) in the same way.
 *
 * A pair is a pinger and a ponger (event-based actors). The pinger sends
 * request(ponger, infinite, ping, n) and, in the response handler (.then),
 * counts the round trip and sends the next request, until the main thread
 * raises the stop flag; the ponger's handler returns n, which CAF sends back
 * as the response. That is CAF's ask/reply.
 *
 * Placement: CAF has no way to pin an actor to a worker. Its work-stealing
 * scheduler runs an actor woken by a message on the sending worker's own
 * queue, so a pair tends to stay on one worker (like our "same worker"
 * case) until an idle worker steals it. The cases are therefore "1 pair"
 * and "N pairs" with CAF deciding; compare_caf.sh sets them against both of
 * our placements.
 *
 * Fairness (the slowest pair's round trips over the mean pair's in the
 * measured phase) is worth watching here: CAF's worker runs an actor woken
 * from its own thread next (its local queue is LIFO) and, by default, lets
 * an actor run until its mailbox is empty, so a pair that keeps answering
 * itself can keep a worker to itself while other pairs wait.
 */
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <vector>

#include <caf/all.hpp>

#include "bench.h"
#include "caf_bench.hpp"
#include "workloads.h"

using ping_atom = caf::atom_constant<caf::atom("ping")>;
using go_atom = caf::atom_constant<caf::atom("go")>;

namespace {

/* One pair's progress, on its own cache line: only the pinger writes it. */
struct alignas(64) pair_stat {
  std::atomic<uint64_t> rounds{0};
};

/* What the main thread and the actors share for one run of one case. */
struct run {
  uint32_t pairs = 0;
  uint64_t warm_rounds = 0;
  std::vector<pair_stat> stat;
  std::vector<uint64_t> mark[2]; /* each pair's rounds at the phase's start and end */
  std::atomic<bool> stop{false};
  std::atomic<unsigned> finished{0};
  std::atomic<unsigned> errors{0};
};

struct pinger_state {
  uint64_t n = 0;
};

using pinger_actor = caf::stateful_actor<pinger_state>;

void pinger_end(pinger_actor *self, run *r, bool failed) {
  if (failed) r->errors.fetch_add(1, std::memory_order_relaxed);
  r->finished.fetch_add(1, std::memory_order_relaxed);
  self->quit();
}

/* Sends the next ping; its response handler counts and recurses. */
void ask_next(pinger_actor *self, const caf::actor &ponger, run *r, uint32_t idx) {
  if (r->stop.load(std::memory_order_relaxed)) {
    pinger_end(self, r, false);
    return;
  }
  uint64_t n = ++self->state.n;
  self->request(ponger, caf::infinite, ping_atom::value, n)
      .then(
          [=](uint64_t m) {
            if (m != n) {
              pinger_end(self, r, true);
              return;
            }
            /* relaxed: single writer, polled by the main thread. */
            auto &c = r->stat[idx].rounds;
            c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
            ask_next(self, ponger, r, idx);
          },
          [=](caf::error &) { pinger_end(self, r, true); });
}

caf::behavior pinger(pinger_actor *self, caf::actor ponger, run *r, uint32_t idx) {
  return {[=](go_atom) { ask_next(self, ponger, r, idx); }};
}

caf::behavior ponger(caf::event_based_actor *) {
  return {[](ping_atom, uint64_t n) { return n; }};
}

/* ---- probe ------------------------------------------------------------- */

/* Pair i's round trips so far (a bench_count_fn). */
uint64_t pair_rounds(void *ctx, uint32_t i) {
  return static_cast<run *>(ctx)->stat[i].rounds.load(std::memory_order_relaxed);
}

uint64_t total_rounds(void *ctx) {
  return bench_count_sum(pair_rounds, ctx, static_cast<run *>(ctx)->pairs);
}

/* As in bench/pingpong.c; CAF may starve some pairs for the whole run. */
bool all_warm(void *ctx) {
  auto *r = static_cast<run *>(ctx);
  return bench_count_warm(pair_rounds, ctx, r->pairs, r->warm_rounds);
}

void mark_pairs(void *ctx, int which) {
  auto *r = static_cast<run *>(ctx);
  bench_count_mark(pair_rounds, ctx, r->pairs, r->mark[which].data());
}

/* Every pinger quit after the stop flag. */
bool all_finished(void *ctx) {
  auto *r = static_cast<run *>(ctx);
  return r->finished.load(std::memory_order_relaxed) == r->pairs;
}

/* One repetition on a fresh actor system (a bench_rep_fn).
 * extra[0]: NaN, CAF has no park counter; extra[1]: fairness. */
int run_once(void *ctx, uint32_t pairs, bench_sample *s, double extra[BENCH_EXTRAS]) {
  const auto *p = static_cast<const bench_params *>(ctx);
  run r;
  r.pairs = pairs;
  r.warm_rounds = bench_warm_ops(p, pairs, 1000);
  r.stat = std::vector<pair_stat>(pairs);
  r.mark[0].assign(pairs, 0);
  r.mark[1].assign(pairs, 0);
  int rc = 0;
  {
    caf_bench_config cfg{*p};
    caf::actor_system sys{cfg};
    std::vector<caf::actor> all;
    for (uint32_t i = 0; i < pairs; i++) {
      auto po = sys.spawn(ponger);
      auto pi = sys.spawn(pinger, po, &r, i);
      all.push_back(po);
      all.push_back(pi);
      caf::anon_send(pi, go_atom::value);
    }
    bench_probe probe = {&r, total_rounds, all_warm, nullptr, mark_pairs};
    bench_measure(p, &probe, s);
    r.stop.store(true, std::memory_order_relaxed);
    if (!bench_wait(all_finished, &r, 10000)) rc = -ETIMEDOUT;
    if (r.errors.load() != 0) rc = -EPROTO;
    if (s->warm_timed_out) rc = -ETIMEDOUT;
    for (auto &a : all) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  } /* the system's destructor waits for every actor */
  extra[0] = NAN;
  extra[1] = bench_fairness(r.mark[0].data(), r.mark[1].data(), r.pairs);
  return rc;
}

int run_case(bench_params &p, const char *id, uint32_t pairs) {
  char desc[64];
  std::snprintf(desc, sizeof desc, "CAF: %u pair%s, scheduler decides", pairs,
                pairs == 1 ? "" : "s");
  return bench_run_case(&p, id, desc, pairs, 2.0, run_once, &p);
}

const bench_spec spec = {&bench_pingpong,
                         "caf pingpong",
                         "CAF request/response round trips per second",
                         "scheduler threads",
                         "scheduler threads (default: one per CPU)",
                         "pairs in the N-pairs case (default: 2 x workers)"};

}  // namespace

int main(int argc, char **argv) {
  bench_params p;
  bench_setup(&spec, nullptr, 0, argc, argv, &p);
  bench_begin(&p, caf_bench_runtime().c_str(), nullptr, nullptr);
  int status = 0;
  status |= run_case(p, "1pair", 1);
  status |= run_case(p, "Npairs", static_cast<uint32_t>(p.actors));
  return bench_end(status);
}
