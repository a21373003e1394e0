/*
 * What the CAF benches (bench/caf/NAME.cpp) share beyond bench/common/: the
 * actor system's configuration from the standard parameters, and the
 * runtime's name for the header line.
 */
#ifndef BENCH_CAF_BENCH_HPP
#define BENCH_CAF_BENCH_HPP

#include <cstddef>
#include <string>

#include <caf/all.hpp>

#include "bench.h"

/* An actor system configuration with p.workers scheduler threads. */
struct caf_bench_config : caf::actor_system_config {
  explicit caf_bench_config(const bench_params &p) {
    set("scheduler.max-threads", static_cast<std::size_t>(p.workers));
  }
};

/* "CAF <major>.<minor>.<patch>", from the headers compiled against. */
inline std::string caf_bench_runtime() {
  return "CAF " + std::to_string(CAF_VERSION / 10000) + "." +
         std::to_string(CAF_VERSION / 100 % 100) + "." + std::to_string(CAF_VERSION % 100);
}

#endif
