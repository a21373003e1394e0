/*
 * The reference model's rules of the timer wheels' timing (model.c has the
 * others and the list):
 *
 *   timer.early  the wheel hands a timer node over (an actor timer's run or
 *                a periodic tick, an ask's or a sleep's timeout) only once
 *                the virtual clock reached its expiry: the time it was
 *                armed plus its delay, in nanoseconds. The wheel counts in
 *                ticks of 1 ms and must round an expiry up to its tick; a
 *                fire even a nanosecond early breaks this rule, in every
 *                simulated run of every scenario.
 *   timer.armed  the wheel hands over only a node armed in it, once per
 *                arming (a periodic timer is re-armed at each tick).
 *
 * A node's entry lives from its arming to its fire or to the cancel that
 * takes it out of the wheel; a node still in a wheel when the workers stop
 * is discarded without a fire, and the model's reset forgets it. The clock
 * read here is the virtual one, read without a step: the run and its trace
 * hash are the same with the rule as without.
 */
#include "modelrules.h"

#include <stddef.h>

#include "base/check.h"
#include "plat.h"

static void armed(uintptr_t t, uint64_t expiry_ns) {
  SH_ASSERT(expiry_ns != UINT64_MAX); /* timer.c caps expiries far below */
  sh_simmodel_get(SH_SIMMODEL_K_ARMED, t, 0)->v = expiry_ns;
}

static void fired(uintptr_t t) {
  sh_simmodel_entry *e = sh_simmodeltab_find(SH_SIMMODEL_K_ARMED, t, 0);
  if (e == NULL)
    sh_simmodel_violation("timer.armed: the wheel fired a timer node that is not armed in it "
                          "(fired twice, or taken out by its cancel)");
  uint64_t now = sh_plat_now_ns(), expiry = e->v;
  sh_simmodeltab_del(e);
  if (now < expiry)
    sh_simmodel_violation("timer.early: a timer fired at %llu ns, %llu ns before its expiry "
                          "(%llu ns)", (unsigned long long)now,
                          (unsigned long long)(expiry - now), (unsigned long long)expiry);
}

static void disarmed(uintptr_t t) {
  sh_simmodel_entry *e = sh_simmodeltab_find(SH_SIMMODEL_K_ARMED, t, 0);
  if (e == NULL)
    sh_simmodel_violation("timer.armed: a cancel took a timer node out of a wheel it is not "
                          "armed in");
  sh_simmodeltab_del(e);
}

void sh_simmodel_timer(sh_model_event ev, uintptr_t t, uint64_t c) {
  SH_ASSERT(t != 0);
  switch (ev) {
  case SH_MODEL_TIMER_ARM: armed(t, c); break;
  case SH_MODEL_TIMER_FIRE: fired(t); break;
  case SH_MODEL_TIMER_DISARM: disarmed(t); break;
  default: SH_ASSERT(0 && "not a timer node's event");
  }
}
