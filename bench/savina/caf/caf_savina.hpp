/*
 * What the CAF (C++ Actor Framework, 0.17) twins of the Savina programs
 * share: a run on a fresh actor system of p->workers scheduler threads,
 * measured by the same harness (bench/savina/common/savina.c) as ours, and
 * the atoms they use. Actors are event-based, spawned with CAF's defaults.
 */
#ifndef BENCH_SAVINA_CAF_SAVINA_HPP
#define BENCH_SAVINA_CAF_SAVINA_HPP

#include <cerrno>
#include <cstddef>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "common/savina.h"
#include "common/specs.h"

using go_atom = caf::atom_constant<caf::atom("go")>;
using done_atom = caf::atom_constant<caf::atom("done")>;

/* An actor system configuration with p.workers scheduler threads. */
struct sv_caf_config : caf::actor_system_config {
  explicit sv_caf_config(const sv_params &p) {
    set("scheduler.max-threads", static_cast<std::size_t>(p.workers));
  }
};

/*
 * One run: a fresh actor system, sv_begin, body(sys, self) spawns the
 * actors, sends the first messages and receives the result through the
 * scoped actor `self`, returning 0 or a negative errno (-EPROTO: a wrong
 * result); sv_end with msgs. Every actor must have quit (or been sent an
 * exit) when body returns: the system's destructor waits for them all.
 */
template <class Body>
int sv_caf_run(const sv_params *p, sv_sample *s, uint64_t msgs, Body body) {
  sv_caf_config cfg{*p};
  caf::actor_system sys{cfg};
  int rc;
  {
    caf::scoped_actor self{sys};
    sv_begin(s);
    rc = body(sys, self);
    sv_end(s, msgs);
  }
  return rc;
}

/* Ends actors that wait for messages forever. */
inline void sv_caf_exit(const std::vector<caf::actor> &all) {
  for (auto &a : all) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

/* "CAF <major>.<minor>.<patch>", from the headers compiled against. */
inline std::string sv_caf_runtime() {
  return "CAF-" + std::to_string(CAF_VERSION / 10000) + "." +
         std::to_string(CAF_VERSION / 100 % 100) + "." + std::to_string(CAF_VERSION % 100);
}

/* The program's main: options, runs, the output line. */
template <class RunFn>
int sv_caf_main(const sv_spec *spec, int argc, char **argv, RunFn run) {
  sv_params p;
  sv_setup(spec, argc, argv, &p);
  return sv_main(&p, sv_caf_runtime().c_str(), run, nullptr);
}

#endif
