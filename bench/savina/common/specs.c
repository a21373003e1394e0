/*
 * The Savina benchmarks' parameters (see specs.h).
 */
#include "specs.h"

#include <math.h>
#include <stddef.h>

const sv_spec sv_pingpong = {"pingpong", "2 per ping (the ping and its pong)", "pings", 40000,
                             10000, NULL, 2, 2};

const sv_spec sv_counting = {"counting", "n increments + the retrieve request + its reply",
                             "increments", 1000000, 100000, NULL, 2, 2};

/* Savina's ring has 100 actors; this suite runs 500. */
const sv_spec sv_threadring = {"threadring", "1 per pass of the token", "passes of the token",
                               100000, 20000, "actors in the ring", 500, 500};

const sv_spec sv_fjthrput = {"fjthrput", "actors x n (every message to a worker)",
                             "messages per actor", 10000, 2000, "actors", 60, 60};

const sv_spec sv_big = {"big", "2 x actors x n (every ping and its pong)", "pings per actor",
                        20000, 2000, "actors", 120, 120};

const sv_spec sv_chameneos = {"chameneos", "4 per meeting (2 requests, meet, change)",
                              "meetings", 200000, 20000, "chameneos", 100, 100};

/* Savina's fib is fib(25); this suite's is fib(22), an actor per call:
 * 2 x fib(23) - 1 = 57313 actors per run, about a second for the program. */
const sv_spec sv_fib = {"fib", "2 per call of fib (request and response)", "fib's argument", 22,
                        18, NULL, 1, 1};

/* Not in Savina: fib(n) with the same calls as fib, each a request to one
 * of a fixed pool of actors instead of a new actor. */
const sv_spec sv_fibpool = {"fibpool", "2 per call of fib (request and response)",
                            "fib's argument", 25, 18, "actors in the pool", 8, 8};

int sv_complement(int a, int b) { return a == b ? a : 3 - a - b; }

double sv_fj_work(double theta) {
  double s = sin(theta);
  return s * s;
}

uint64_t sv_fib_value(uint64_t n) {
  uint64_t a = 0, b = 1;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t c = a + b;
    a = b;
    b = c;
  }
  return a;
}

uint64_t sv_fib_calls(uint64_t n) { return 2 * sv_fib_value(n + 1) - 1; }
