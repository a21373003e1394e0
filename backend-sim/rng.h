/*
 * The simulator's random streams: xoshiro256** (Blackman and Vigna), each
 * seeded with splitmix64 outputs of the run's seed. A simulation has two:
 * the schedule's (strategy.c: switches, PCT's priorities and change points)
 * and the core's (sh_plat_random: steal order), so that a replay, which
 * draws no schedule, leaves the core's stream as it was.
 */
#ifndef SH_SIM_RNG_H
#define SH_SIM_RNG_H

#include <stdint.h>

typedef struct sh_simrng {
  uint64_t s[4];
} sh_simrng;

/* Seeds r with the next four splitmix64 outputs of *x (which advances):
 * streams seeded in turn from one x are distinct. */
void sh_simrng_seed(sh_simrng *r, uint64_t *x);

/* 64-bit rotation left by k, 0 < k < 64 (the trace hash mixes with it too). */
static inline uint64_t sh_simrng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256**. Inline, as the two below: a draw at every scheduling point. */
static inline uint64_t sh_simrng_next(sh_simrng *r) {
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

/* Uniform in [0, n), n > 0 (the modulo bias is below 2^-40 for our n). */
static inline uint64_t sh_simrng_below(sh_simrng *r, uint64_t n) { return sh_simrng_next(r) % n; }

#endif
