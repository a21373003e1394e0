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
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <vector>

#include <caf/all.hpp>

#include "bench.h"
#include "caf_bench.hpp"
#include "workloads.h"

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
  bench_params b;
  bench_notice_args n;
};

/* One repetition on a fresh actor system (a bench_rep_fn).
 * extra[0]: NaN, CAF has no park counter. */
int run_once(void *ctx, uint32_t senders, bench_sample *s, double extra[BENCH_EXTRAS]) {
  const auto *pp = static_cast<const params *>(ctx);
  run r;
  r.senders = senders;
  r.burst = static_cast<uint32_t>(pp->n.burst);
  r.warm = bench_warm_ops(&pp->b, 1, 10000);
  r.sent = std::vector<line_counter>(senders);
  {
    caf_bench_config cfg{pp->b};
    caf::actor_system sys{cfg};
    r.receiver = sys.spawn(receiver, &r);
    for (uint32_t i = 0; i < senders; i++) r.sender_addr.push_back(sys.spawn(sender, &r, i));
    for (auto &a : r.sender_addr)
      for (uint64_t k = 0; k < pp->n.window; k++) caf::anon_send(a, credit_atom::value);
    bench_probe probe = {&r, received, warm, in_flight, nullptr};
    bench_measure(&pp->b, &probe, s);
    r.stop.store(true, std::memory_order_relaxed);
    caf::anon_send_exit(r.receiver, caf::exit_reason::user_shutdown);
    for (auto &a : r.sender_addr) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    /* The receiver may still handle queued data and read sender_addr: keep
     * the handles until every actor is done, and drop them before the system. */
    sys.await_all_actors_done();
    r.receiver = nullptr;
    r.sender_addr.clear();
  }
  extra[0] = NAN;
  return s->warm_timed_out ? -ETIMEDOUT : 0;
}

int run_case(params &pp, const char *id, uint32_t senders) {
  char desc[64];
  std::snprintf(desc, sizeof desc, "CAF: %u sender%s -> 1", senders, senders == 1 ? "" : "s");
  return bench_run_case(&pp.b, id, desc, senders, bench_notice_msgs_per_op(&pp.n), run_once, &pp);
}

const bench_spec spec = {&bench_notice,
                         "caf notice",
                         "CAF messages per second into one receiver",
                         "scheduler threads",
                         "scheduler threads (default: one per CPU)",
                         "senders in the N-senders case (default: 2 x workers)"};

}  // namespace

int main(int argc, char **argv) {
  params p;
  bench_opt own[BENCH_NOTICE_NOPTS];
  bench_notice_opts(&p.n, own);
  bench_setup(&spec, own, BENCH_NOTICE_NOPTS, argc, argv, &p.b);
  char detail[64];
  bench_notice_detail(&p.n, detail, sizeof detail);
  bench_begin(&p.b, caf_bench_runtime().c_str(), detail, nullptr);
  int status = 0;
  status |= run_case(p, "1sender", 1);
  status |= run_case(p, "Nsenders", static_cast<uint32_t>(p.b.actors));
  return bench_end(status);
}
