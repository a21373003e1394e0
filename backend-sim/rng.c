/* The simulator's random streams (rng.h). */
#include "rng.h"

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void sh_simrng_seed(sh_simrng *r, uint64_t *x) {
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(x);
}
