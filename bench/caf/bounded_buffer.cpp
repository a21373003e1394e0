/*
 * CAF (C++ Actor Framework, 0.17) version of bench/bounded_buffer.c, for
 * bench/compare_caf.sh: producers and consumers through a bounded buffer,
 * run and measured by the same C code (bench/common/workloads.c: the
 * passes, the item values, the work per item, the exactly-once check).
 *
 * CAF's mailboxes are unbounded, so the buffer is Savina's ProdCons manager,
 * ported as it is: the manager keeps the buffered items, the idle producers
 * and the idle consumers in three FIFO lists. An item from a producer goes
 * to an idle consumer if there is one, else into the buffer; then, if the
 * buffer holds `adjusted` items or more, the producer is parked, else told
 * to make its next item. A consumer, done with an item, says it is idle
 * again: it gets the buffer's first item if there is one (and a parked
 * producer is told to go on), else joins the idle consumers. adjusted is
 * Savina's buffer - producers: up to one item per producer may be on its
 * way, so the buffer never exceeds buffer - 1. Where buffer <= producers
 * Savina's manager would park producers with nothing to wake them; here
 * adjusted is then 1, which bounds the buffer by the producers instead.
 * 4 messages per item (Savina's), against stackhouse's 2.
 *
 * The main thread starts a pass with one message per producer (anon_send,
 * inside the measured window: CAF has no way to make them beforehand);
 * placement is CAF's (it cannot pin actors). The pool peak column is "-":
 * CAF has no such figure.
 */
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <deque>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "bench.h"
#include "caf_bench.hpp"
#include "workloads.h"

using start_atom = caf::atom_constant<caf::atom("start")>;
using produce_atom = caf::atom_constant<caf::atom("produce")>;
using data_atom = caf::atom_constant<caf::atom("data")>;
using idle_atom = caf::atom_constant<caf::atom("idle")>;

namespace {

struct params {
  bench_params b;
  bench_bb_args bb;
};

/* What the main thread and the actors share for one run of one case. The
 * handles are filled before the first start message is sent. */
struct run {
  const params *pp = nullptr;
  uint32_t producers = 0, consumers = 0;
  bench_bb *bb = nullptr;
  uint64_t pass = 0; /* the pass prepare_pass readied */
  caf::actor manager;
  std::vector<caf::actor> producer, consumer;
};

/* ---- producer ---------------------------------------------------------- */

struct producer_state {
  uint64_t next = 0, end = 0; /* the values still to make: next .. end - 1 */
  double acc = 0;             /* the work's result, kept */
};

caf::behavior producer(caf::stateful_actor<producer_state> *self, run *r, uint32_t idx) {
  auto make = [=] {
    producer_state &s = self->state;
    if (s.next == s.end) return; /* Savina's producer would exit here */
    uint64_t v = s.next++;
    s.acc = bench_bb_work(s.acc, v, r->pp->bb.prod_cost);
    bench_bb_produced(r->bb, idx);
    self->send(r->manager, data_atom::value, v, idx);
  };
  return {
      [=](start_atom, uint64_t first, uint64_t n) {
        self->state.next = first;
        self->state.end = first + n;
        make();
      },
      [=](produce_atom) { make(); },
  };
}

/* ---- manager ----------------------------------------------------------- */

struct manager_state {
  std::deque<uint64_t> buffer;
  std::deque<uint32_t> idle_producers; /* parked: the buffer was full enough */
  std::deque<uint32_t> idle_consumers;
  size_t adjusted = 1; /* park a producer at this many buffered items */
};

template <class T>
T pop_front(std::deque<T> &q) {
  T x = q.front();
  q.pop_front();
  return x;
}

caf::behavior manager(caf::stateful_actor<manager_state> *self, run *r) {
  manager_state &st = self->state;
  uint64_t buffer = r->pp->bb.buffer;
  st.adjusted = buffer > r->producers ? buffer - r->producers : 1;
  for (uint32_t i = 0; i < r->consumers; i++) st.idle_consumers.push_back(i);
  return {
      [=](data_atom, uint64_t v, uint32_t from) {
        manager_state &s = self->state;
        if (s.idle_consumers.empty())
          s.buffer.push_back(v);
        else
          self->send(r->consumer[pop_front(s.idle_consumers)], data_atom::value, v);
        if (s.buffer.size() >= s.adjusted)
          s.idle_producers.push_back(from);
        else
          self->send(r->producer[from], produce_atom::value);
      },
      [=](idle_atom, uint32_t c) {
        manager_state &s = self->state;
        if (s.buffer.empty()) {
          s.idle_consumers.push_back(c);
          return;
        }
        self->send(r->consumer[c], data_atom::value, pop_front(s.buffer));
        if (!s.idle_producers.empty())
          self->send(r->producer[pop_front(s.idle_producers)], produce_atom::value);
      },
  };
}

/* ---- consumer ---------------------------------------------------------- */

struct consumer_state {
  double acc = 0; /* the work's result, kept */
};

caf::behavior consumer(caf::stateful_actor<consumer_state> *self, run *r, uint32_t idx) {
  return {[=](data_atom, uint64_t v) {
    self->state.acc = bench_bb_work(self->state.acc, v, r->pp->bb.cons_cost);
    bench_bb_consumed(r->bb, idx, v);
    self->send(r->manager, idle_atom::value, idx);
  }};
}

/* ---- the driver of a pass (bench_bb_driver) ---------------------------- */

int prepare_pass(void *ctx, uint64_t pass) {
  static_cast<run *>(ctx)->pass = pass;
  return 0;
}

int start_pass(void *ctx) {
  auto *r = static_cast<run *>(ctx);
  for (uint32_t j = 0; j < r->producers; j++) {
    uint64_t first, n;
    bench_bb_share(r->bb, r->pass, j, &first, &n);
    caf::anon_send(r->producer[j], start_atom::value, first, n);
  }
  return 0;
}

/* ---- one run ----------------------------------------------------------- */

struct case_arg {
  const params *pp;
  uint32_t producers, consumers;
  uint32_t checked; /* runs whose items were each consumed exactly once */
};

/* The warm-up pass, then the measured one into s, on a fresh actor system. */
int passes(run &r, bench_sample *s) {
  caf_bench_config cfg{r.pp->b};
  caf::actor_system sys{cfg};
  r.manager = sys.spawn(manager, &r);
  for (uint32_t i = 0; i < r.consumers; i++) r.consumer.push_back(sys.spawn(consumer, &r, i));
  for (uint32_t j = 0; j < r.producers; j++) r.producer.push_back(sys.spawn(producer, &r, j));
  bench_bb_driver d = {&r, prepare_pass, start_pass, nullptr};
  bench_sample warm;
  uint64_t pool_peak;
  int rc = bench_bb_pass(r.bb, &d, 0, r.pp->b.max_ms, &warm, &pool_peak);
  if (rc == 0) rc = bench_bb_pass(r.bb, &d, 1, r.pp->b.max_ms, s, &pool_peak);
  caf::anon_send_exit(r.manager, caf::exit_reason::user_shutdown);
  for (auto &a : r.consumer) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  for (auto &a : r.producer) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  /* Actors may still read the handles: keep them until every actor is
   * done, and drop them before the system. */
  sys.await_all_actors_done();
  r.manager = nullptr;
  r.consumer.clear();
  r.producer.clear();
  return rc;
}

/* One repetition (a bench_rep_fn). extra[0]: peak RSS in MiB, extra[1]:
 * NaN, CAF has no pools to count. */
int run_once(void *ctx, uint32_t, bench_sample *s, double extra[BENCH_EXTRAS]) {
  auto *c = static_cast<case_arg *>(ctx);
  bench_rss_reset();
  run r;
  r.pp = c->pp;
  r.producers = c->producers;
  r.consumers = c->consumers;
  r.bb = bench_bb_new(r.producers, r.consumers, c->pp->b.rounds);
  int rc = r.bb != nullptr ? passes(r, s) : -ENOMEM;
  if (rc == 0) rc = bench_bb_check(r.bb, 2, "caf bounded_buffer");
  if (rc == 0) c->checked++;
  extra[0] = bench_rss_peak_mib();
  extra[1] = NAN;
  bench_bb_free(r.bb);
  return rc;
}

int run_case(const params &pp, const char *id, uint32_t producers, uint32_t consumers) {
  case_arg c = {&pp, producers, consumers, 0};
  char desc[64];
  std::snprintf(desc, sizeof desc, "CAF: %u producers, %u consumers", producers, consumers);
  int status = bench_run_case(&pp.b, id, desc, producers, 1.0, run_once, &c);
  if (pp.b.only == nullptr || std::string(pp.b.only) == id)
    std::printf("  check %s: %u/%" PRIu64 " runs: %" PRIu64 " items each consumed exactly once\n",
                id, c.checked, pp.b.reps, 2 * pp.b.rounds);
  return status;
}

const bench_spec spec = {&bench_bounded_buffer,
                         "caf bounded_buffer",
                         "CAF producers and consumers through Savina's bounded-buffer manager",
                         "scheduler threads",
                         "scheduler threads (default: one per CPU)",
                         "producers = consumers in the Npairs case (default: 2 x workers)"};

}  // namespace

int main(int argc, char **argv) {
  params p;
  bench_opt own[BENCH_BB_NOPTS];
  bench_bb_opts(&p.bb, own);
  bench_setup(&spec, own, BENCH_BB_NOPTS, argc, argv, &p.b);
  char detail[64];
  bench_bb_detail(&p.bb, detail, sizeof detail);
  bench_begin(&p.b, caf_bench_runtime().c_str(), detail,
              "mallocs/msg: per item (4 messages each); RSS MiB: peak resident set of a run; "
              "peak out: items alive");
  int status = 0;
  status |= run_case(p, "savina", static_cast<uint32_t>(p.bb.producers),
                     static_cast<uint32_t>(p.bb.consumers));
  status |= run_case(p, "Npairs", static_cast<uint32_t>(p.b.actors),
                     static_cast<uint32_t>(p.b.actors));
  return bench_end(status);
}
