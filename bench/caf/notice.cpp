/*
 * CAF (C++ Actor Framework, 0.17) version of bench/notice.c, for
 * bench/compare_caf.sh: N senders to one receiver with the same credit flow
 * control, measured by the same C code (bench/common/) in the same way.
 *
 * A sender handles a `credit` message by sending one burst of `data`
 * messages (self->send, CAF's fire-and-forget, our notice) to the receiver;
 * the receiver, after every burst from a given sender, sends it a credit
 * back; each sender starts with --window credits (anon_send from main).
 * So at most senders x window x burst data messages are in flight.
 * Placement is CAF's (it cannot pin actors); the receiver has no batch
 * variant (CAF's batching is its streaming API, a different workload).
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

using data_atom = caf::atom_constant<caf::atom("data")>;
using credit_atom = caf::atom_constant<caf::atom("credit")>;

namespace {

/* A counter on its own cache line: one writer (an actor), the main thread reads. */
struct alignas(64) line_counter {
  std::atomic<uint64_t> n{0};
  void own_add(uint64_t k) {
    /* relaxed: single writer; the main thread only polls it. */
    n.store(n.load(std::memory_order_relaxed) + k, std::memory_order_relaxed);
  }
  uint64_t read() const { return n.load(std::memory_order_relaxed); }
};

struct run {
  uint32_t senders = 0;
  uint32_t burst = 0;
  uint64_t warm = 0;
  caf::actor receiver;
  std::vector<caf::actor> sender_addr; /* filled before the first credit is sent */
  std::vector<line_counter> sent;
  line_counter received;
  std::atomic<bool> stop{false};
};

caf::behavior sender(caf::event_based_actor *self, run *r, uint32_t idx) {
  return {[=](credit_atom) {
    if (r->stop.load(std::memory_order_relaxed)) return;
    r->sent[idx].own_add(r->burst); /* before sending, as in bench/notice.c */
    for (uint32_t i = 0; i < r->burst; i++) self->send(r->receiver, data_atom::value, idx);
  }};
}

struct receiver_state {
  std::vector<uint32_t> from_count; /* data messages from each sender since its last credit */
};

caf::behavior receiver(caf::stateful_actor<receiver_state> *self, run *r) {
  self->state.from_count.assign(r->senders, 0);
  return {[=](data_atom, uint32_t from) {
    /* Counted before the credit goes out, as in bench/notice.c. */
    r->received.own_add(1);
    uint32_t &n = self->state.from_count[from];
    if (++n < r->burst) return;
    n = 0;
    self->send(r->sender_addr[from], credit_atom::value);
  }};
}

/* ---- probe ------------------------------------------------------------- */

uint64_t received(void *ctx) { return static_cast<run *>(ctx)->received.read(); }

bool warm(void *ctx) { return received(ctx) >= static_cast<run *>(ctx)->warm; }

uint64_t in_flight(void *ctx) {
  auto *r = static_cast<run *>(ctx);
  uint64_t sent = 0; /* sent first, as in bench/notice.c */
  for (auto &c : r->sent) sent += c.read();
  uint64_t got = received(ctx);
  return sent > got ? sent - got : 0;
}

struct params {
  uint64_t workers = 0, senders = 0, rounds = 4000000, reps = 5, max_ms = 10000, burst = 64,
           window = 4;
  const char *only = nullptr; /* --case: run only this case */
  bool quick = false, verbose = false;
};

/* One repetition on a fresh actor system; false when the run is void. */
bool run_once(const params &pp, uint32_t senders, bench_sample *s) {
  run r;
  r.senders = senders;
  r.burst = static_cast<uint32_t>(pp.burst);
  r.warm = pp.rounds / 10 < 10000 ? 10000 : pp.rounds / 10;
  r.sent = std::vector<line_counter>(senders);
  {
    caf::actor_system_config cfg;
    cfg.set("scheduler.max-threads", static_cast<size_t>(pp.workers));
    caf::actor_system sys{cfg};
    r.receiver = sys.spawn(receiver, &r);
    for (uint32_t i = 0; i < senders; i++) r.sender_addr.push_back(sys.spawn(sender, &r, i));
    for (auto &a : r.sender_addr)
      for (uint64_t k = 0; k < pp.window; k++) caf::anon_send(a, credit_atom::value);
    bench_probe probe = {&r, received, warm, in_flight, nullptr};
    bench_measure(&probe, pp.rounds, pp.max_ms, 30000, s);
    r.stop.store(true, std::memory_order_relaxed);
    caf::anon_send_exit(r.receiver, caf::exit_reason::user_shutdown);
    for (auto &a : r.sender_addr) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    /* The receiver may still handle queued data and read sender_addr: keep
     * the handles until every actor is done, and drop them before the system. */
    sys.await_all_actors_done();
    r.receiver = nullptr;
    r.sender_addr.clear();
  }
  return !s->warm_timed_out;
}

const bench_table table = {"notices/s", {"parks/kn", nullptr}, true};

int run_case(const params &pp, const char *id, uint32_t senders) {
  if (!bench_selected(pp.only, id)) return 0;
  bench_case c;
  std::memset(&c, 0, sizeof c);
  int status = 0;
  double msgs_per_op = 1.0 + 1.0 / static_cast<double>(pp.burst);
  /* CAF has no park counter. */
  const double extra[BENCH_EXTRAS] = {NAN, 0};
  for (uint64_t i = 0; i < pp.reps; i++) {
    bench_sample s;
    if (!run_once(pp, senders, &s)) {
      std::fprintf(stderr, "caf notice %s: run %" PRIu64 " failed (warm-up timed out)\n", id, i);
      status = 1;
      continue;
    }
    bench_case_add(&c, &s, msgs_per_op, extra);
  }
  char desc[64];
  std::snprintf(desc, sizeof desc, "CAF: %u sender%s -> 1", senders, senders == 1 ? "" : "s");
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
      {"senders", "senders in the N-senders case (default: 2 x workers)", &p.senders, nullptr,
       nullptr},
      {"rounds", "notices measured per run (default 4000000)", &p.rounds, nullptr, nullptr},
      {"reps", "runs per case; the median is shown (default 5)", &p.reps, nullptr, nullptr},
      {"max-ms", "cap on a measured phase in ms (default 10000)", &p.max_ms, nullptr, nullptr},
      {"burst", "notices per burst = per credit (default 64)", &p.burst, nullptr, nullptr},
      {"window", "credits (bursts) each sender starts with (default 4)", &p.window, nullptr,
       nullptr},
      {"case", "run only the case with this id (a table row id)", nullptr, nullptr, &p.only},
      {"verbose", "also print every rep's rate", nullptr, &p.verbose, nullptr},
      {"quick", "CI smoke: 40000 notices, 1 run per case", nullptr, &p.quick, nullptr},
  };
  bench_parse(argc, argv, "CAF messages per second into one receiver", opts,
              sizeof opts / sizeof opts[0]);
  if (p.quick) {
    p.rounds = 40000;
    p.reps = 1;
  }
  if (p.workers == 0) p.workers = bench_cpus();
  if (p.senders == 0) p.senders = 2 * p.workers;
  if (p.reps == 0 || p.reps > BENCH_MAX_REPS || p.rounds == 0 || p.senders == 0 ||
      p.senders > 100000 || p.burst == 0 || p.burst > 1000000 || p.window == 0 ||
      p.window > 1000000) {
    std::fprintf(stderr, "caf notice: options out of range\n");
    return 2;
  }
  std::printf("CAF %d.%d.%d notice: %" PRIu64 " scheduler threads on %u CPUs, %" PRIu64
              " notices measured per run, burst %" PRIu64 ", window %" PRIu64
              " bursts, median of %" PRIu64 "\n",
              CAF_VERSION / 10000, CAF_VERSION / 100 % 100, CAF_VERSION % 100, p.workers,
              bench_cpus(), p.rounds, p.burst, p.window, p.reps);
  bench_print_load("start");
  bench_check_malloc_count();
  bench_table_header(&table);
  int status = 0;
  status |= run_case(p, "1sender", 1);
  status |= run_case(p, "Nsenders", static_cast<uint32_t>(p.senders));
  bench_print_load("end");
  return status;
}
