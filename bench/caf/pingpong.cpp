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
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include <caf/all.hpp>

#include "bench.h"
#include "malloc_count.h"

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

uint64_t total_rounds(void *ctx) {
  auto *r = static_cast<run *>(ctx);
  uint64_t n = 0;
  for (auto &s : r->stat) n += s.rounds.load(std::memory_order_relaxed);
  return n;
}

/* Every pair did its warm-up rounds, or twice as many were done in all:
 * CAF may starve some pairs for the whole run. */
bool all_warm(void *ctx) {
  auto *r = static_cast<run *>(ctx);
  if (total_rounds(ctx) >= 2 * r->warm_rounds * r->pairs) return true;
  for (auto &s : r->stat)
    if (s.rounds.load(std::memory_order_relaxed) < r->warm_rounds) return false;
  return true;
}

void mark_pairs(void *ctx, int which) {
  auto *r = static_cast<run *>(ctx);
  for (uint32_t i = 0; i < r->pairs; i++)
    r->mark[which][i] = r->stat[i].rounds.load(std::memory_order_relaxed);
}

double fairness(const run &r) {
  uint64_t min = UINT64_MAX, sum = 0;
  for (uint32_t i = 0; i < r.pairs; i++) {
    uint64_t d = r.mark[1][i] - r.mark[0][i];
    min = d < min ? d : min;
    sum += d;
  }
  return sum > 0 ? static_cast<double>(min) * r.pairs / static_cast<double>(sum) : 0;
}

struct params {
  uint64_t workers = 0, pairs = 0, rounds = 1000000, reps = 5, max_ms = 10000;
  const char *only = nullptr; /* --case: run only this case */
  bool quick = false, verbose = false;
};

bool wait_finished(run &r) {
  for (int i = 0; i < 10000; i++) {
    if (r.finished.load(std::memory_order_relaxed) == r.pairs) return true;
    bench_sleep_ms(1);
  }
  return false;
}

/* One repetition on a fresh actor system; false when the run is void. */
bool run_once(const params &pp, uint32_t pairs, bench_sample *s, double *fair) {
  run r;
  r.pairs = pairs;
  uint64_t warm = pp.rounds / 10 / pairs;
  r.warm_rounds = warm < 1000 ? 1000 : warm;
  r.stat = std::vector<pair_stat>(pairs);
  r.mark[0].assign(pairs, 0);
  r.mark[1].assign(pairs, 0);
  bool ok = true;
  {
    caf::actor_system_config cfg;
    cfg.set("scheduler.max-threads", static_cast<size_t>(pp.workers));
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
    bench_measure(&probe, pp.rounds, pp.max_ms, 30000, s);
    r.stop.store(true, std::memory_order_relaxed);
    bool fin = wait_finished(r);
    ok = fin && !s->warm_timed_out && r.errors.load() == 0;
    if (!ok)
      std::fprintf(stderr, "caf pingpong: finished %d, warm-up timed out %d, errors %u\n", fin,
                   s->warm_timed_out, r.errors.load());
    for (auto &a : all) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  } /* the system's destructor waits for every actor */
  *fair = fairness(r);
  return ok;
}

const bench_table table = {"rt/s", {"parks/krt", "fairness"}, false};

int run_case(const params &pp, const char *id, uint32_t pairs) {
  if (!bench_selected(pp.only, id)) return 0;
  bench_case c;
  std::memset(&c, 0, sizeof c);
  int status = 0;
  for (uint64_t i = 0; i < pp.reps; i++) {
    bench_sample s;
    /* CAF has no park counter: NaN prints as "nan" in that column. */
    double extra[BENCH_EXTRAS] = {NAN, 0};
    if (!run_once(pp, pairs, &s, &extra[1])) {
      std::fprintf(stderr, "caf pingpong %s: run %" PRIu64 " failed\n", id, i);
      status = 1;
      continue;
    }
    bench_case_add(&c, &s, 2.0, extra);
  }
  char desc[64];
  std::snprintf(desc, sizeof desc, "CAF: %u pair%s, scheduler decides", pairs,
                pairs == 1 ? "" : "s");
  bench_table_row(&table, id, desc, &c);
  if (pp.verbose) bench_case_print_reps(&c);
  bench_note_mallocs(id, &c);
  return status;
}

}  // namespace

int main(int argc, char **argv) {
  params p;
  const bench_opt opts[] = {
      {"workers", "scheduler threads (default: one per CPU)", &p.workers, nullptr, nullptr},
      {"pairs", "pairs in the N-pairs case (default: 2 x workers)", &p.pairs, nullptr, nullptr},
      {"rounds", "round trips measured per run, all pairs (default 1000000)", &p.rounds, nullptr,
       nullptr},
      {"reps", "runs per case; the median is shown (default 5)", &p.reps, nullptr, nullptr},
      {"max-ms", "cap on a measured phase in ms (default 10000)", &p.max_ms, nullptr, nullptr},
      {"case", "run only the case with this id (a table row id)", nullptr, nullptr, &p.only},
      {"verbose", "also print every rep's rate", nullptr, &p.verbose, nullptr},
      {"quick", "CI smoke: 20000 round trips, 1 run per case", nullptr, &p.quick, nullptr},
  };
  bench_parse(argc, argv, "CAF request/response round trips per second", opts,
              sizeof opts / sizeof opts[0]);
  if (p.quick) {
    p.rounds = 20000;
    p.reps = 1;
  }
  if (p.workers == 0) p.workers = bench_cpus();
  if (p.pairs == 0) p.pairs = 2 * p.workers;
  if (p.reps == 0 || p.reps > BENCH_MAX_REPS || p.rounds == 0 || p.pairs > 100000) {
    std::fprintf(stderr, "caf pingpong: options out of range\n");
    return 2;
  }
  std::printf("CAF %d.%d.%d pingpong: %" PRIu64 " scheduler threads on %u CPUs, %" PRIu64
              " round trips measured per run, median of %" PRIu64 "\n",
              CAF_VERSION / 10000, CAF_VERSION / 100 % 100, CAF_VERSION % 100, p.workers,
              bench_cpus(), p.rounds, p.reps);
  bench_print_load("start");
  bench_check_malloc_count();
  bench_table_header(&table);
  int status = 0;
  status |= run_case(p, "1pair", 1);
  status |= run_case(p, "Npairs", static_cast<uint32_t>(p.pairs));
  bench_print_load("end");
  return status;
}
