/*
 * The mutations of a choice sequence (mutate.h), for shsim explore.
 */
#include "mutate.h"

#include <string.h>

/* A preemption is inserted at most this many steps after its anchor. */
#define INSERT_AFTER_MAX 64

uint64_t mutate_below(uint64_t *x, uint64_t n) {
  /* splitmix64: the campaign's own stream. */
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return n == 0 ? 0 : z % n;
}

static bool is_switch(const sh_sim_choice *c) {
  return c->kind == SH_SIM_PREEMPT || c->kind == SH_SIM_FORCED;
}

static uint32_t fibers_seen(const sh_sim_choice *c, size_t n) {
  uint32_t most = 2;
  for (size_t i = 0; i < n; i++)
    if (is_switch(&c[i]) && c[i].to > most) most = c[i].to;
  return most + 2; /* one more than any seen, and the chance of a new one */
}

static size_t drop_span(uint64_t *x, sh_sim_choice *c, size_t n) {
  if (n == 0) return 0;
  size_t i = (size_t)mutate_below(x, n), most = n - i < 8 ? n - i : 8;
  size_t len = 1 + (size_t)mutate_below(x, most);
  memmove(&c[i], &c[i + len], (n - i - len) * sizeof(*c));
  return n - len;
}

/* A preemption a few steps after a random decision's (or early on). */
static size_t insert_preempt(uint64_t *x, sh_sim_choice *c, size_t n, size_t cap) {
  if (n >= cap) return n;
  uint64_t at = 1 + mutate_below(x, 1000);
  size_t k = (size_t)mutate_below(x, n + 1);
  if (k < n && c[k].kind != SH_SIM_DRAW) at = c[k].step + 1 + mutate_below(x, INSERT_AFTER_MAX);
  size_t pos = 0; /* after the last decision of the schedule at or before it */
  for (size_t i = 0; i < n; i++)
    if (c[i].kind != SH_SIM_DRAW && c[i].step <= at) pos = i + 1;
  memmove(&c[pos + 1], &c[pos], (n - pos) * sizeof(*c));
  c[pos] = (sh_sim_choice){.step = at, .to = (uint32_t)mutate_below(x, fibers_seen(c, n)),
                           .kind = SH_SIM_PREEMPT};
  return n + 1;
}

static void tweak(uint64_t *x, sh_sim_choice *c, size_t n) {
  if (n == 0) return;
  sh_sim_choice *t = &c[mutate_below(x, n)];
  if (is_switch(t)) {
    t->to = (uint32_t)mutate_below(x, fibers_seen(c, n));
  } else if (t->kind == SH_SIM_DRAW) {
    uint64_t how = mutate_below(x, 4);
    if (how == 0)
      t->value = 0;
    else if (how == 1)
      t->value++;
    else if (how == 2 && t->value > 0)
      t->value--;
    else
      t->value ^= 1ull << mutate_below(x, 16);
  }
}

size_t mutate_sequence(uint64_t *x, const sh_sim_choice *in, size_t n, sh_sim_choice *c) {
  size_t cap = n + MUTANT_SLACK;
  memcpy(c, in, n * sizeof(*c));
  for (uint64_t k = 1 + mutate_below(x, 4); k > 0; k--) {
    switch (mutate_below(x, 9)) {
    case 0: case 1: n = drop_span(x, c, n); break;
    case 2: case 3: case 4: n = insert_preempt(x, c, n, cap); break;
    case 5: case 6: case 7: tweak(x, c, n); break;
    default: n = (size_t)mutate_below(x, n + 1); break; /* cut short */
    }
  }
  return n;
}

