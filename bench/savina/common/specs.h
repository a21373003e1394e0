/*
 * The Savina benchmarks' parameters, shared by the stackhouse programs and
 * their CAF twins (the Erlang and Go twins repeat them). Defaults are
 * Savina's, except where a comment in specs.c says otherwise.
 */
#ifndef BENCH_SAVINA_SPECS_H
#define BENCH_SAVINA_SPECS_H

#include "savina.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const sv_spec sv_pingpong;
extern const sv_spec sv_counting;
extern const sv_spec sv_threadring;
extern const sv_spec sv_fjthrput;
extern const sv_spec sv_big;
extern const sv_spec sv_chameneos;
extern const sv_spec sv_fib;
extern const sv_spec sv_fibpool;

/* Chameneos' colours: what two that meet become. */
int sv_complement(int a, int b);

/* fjthrput's work per message (Savina's performComputation): sin(theta)^2,
 * never zero for the thetas the benchmark passes. */
double sv_fj_work(double theta);

/* fib(n) by iteration: what the fib benchmarks check against. */
uint64_t sv_fib_value(uint64_t n);
/* Calls of the recursive fib(n) (1 for n < 2): the fib benchmarks' actors. */
uint64_t sv_fib_calls(uint64_t n);

#ifdef __cplusplus
}
#endif
#endif
