/*
 * What the stackhouse Savina programs (bench/savina/NAME.c) share beyond
 * savina.h: one run on a fresh system. Header-only (static inline): the CAF
 * twins link savina.c and specs.c but have no stackhouse to link against.
 */
#ifndef BENCH_SAVINA_SV_SH_H
#define BENCH_SAVINA_SV_SH_H

#include <stackhouse/stackhouse.h>

#include "savina.h"

/*
 * One run on a fresh system of p->workers workers, each actor spawned with
 * the default placement: starts the system, sv_begin, start(sys, ctx) spawns
 * the actors and sends the first messages, then the main thread waits for
 * sh_system_exit (the actor that sees the result calls it, with 0 or a
 * negative errno), sv_end with msgs, and the system is shut down. Returns
 * the first error, or the exit code.
 */
static inline int sv_sh_run(const sv_params *p, sv_sample *s, uint64_t msgs,
                            int (*start)(sh_system *sys, void *ctx), void *ctx) {
  sh_config cfg;
  sh_config_default(&cfg);
  cfg.workers = (uint32_t)p->workers;
  sh_system *sys = NULL;
  int rc = sh_system_new(&cfg, &sys);
  if (rc == 0) rc = sh_system_start(sys);
  if (rc == 0) {
    sv_begin(s);
    rc = start(sys, ctx);
    if (rc != 0) sh_system_exit(sys, rc);
    rc = sh_system_wait(sys);
    sv_end(s, msgs);
  }
  if (sys != NULL) {
    sh_system_shutdown(sys);
    sh_system_free(sys);
  }
  return rc;
}

/* Sends a notice of type T (sh_msg_new's initialisers after it); -ENOMEM
 * when it cannot be allocated. */
#define sv_sh_notice(to, T, ...)                                   \
  __extension__({                                                  \
    T *m_ = sh_msg_new(T, __VA_ARGS__);                            \
    m_ != NULL ? sh_notice((to), &m_->hdr) : -ENOMEM;              \
  })

#endif
