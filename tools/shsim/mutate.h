/*
 * The mutations of a choice sequence, for shsim explore (explore.c): on
 * what a replay follows, the schedule's decisions anchored by their step
 * and the values drawn anchored by their place in their stream. A span of
 * decisions dropped, a preemption inserted a few steps after a decision, a
 * switch sent to another fiber, a value drawn changed, the sequence cut
 * short. Deterministic: every choice comes from the caller's stream.
 */
#ifndef SHSIM_MUTATE_H
#define SHSIM_MUTATE_H

#include <stddef.h>
#include <stdint.h>

#include <stackhouse/sim.h>

/* Decisions a mutation may add: the room `out` needs beyond `n`. */
#define MUTANT_SLACK 64

/* A number below n (0 for n 0) from the splitmix64 stream *x. */
uint64_t mutate_below(uint64_t *x, uint64_t n);

/* 1 to 4 mutations of in[0..n) into out (room for n + MUTANT_SLACK); the
 * mutant's length. */
size_t mutate_sequence(uint64_t *x, const sh_sim_choice *in, size_t n, sh_sim_choice *out);

#endif
