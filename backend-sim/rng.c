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

/* xoshiro256**. */
uint64_t sh_simrng_next(sh_simrng *r) {
  uint64_t *s = r->s;
  uint64_t v = sh_simrng_rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = sh_simrng_rotl(s[3], 45);
  return v;
}

uint64_t sh_simrng_below(sh_simrng *r, uint64_t n) { return sh_simrng_next(r) % n; }
