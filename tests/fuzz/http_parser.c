/*
 * libFuzzer target of the HTTP/1.1 request parser (`make fuzz-http`): each
 * input is a byte stream a client might send; the oracle (http_oracle.h)
 * feeds it whole, byte by byte and in pieces whose sizes derive from the
 * input itself, under two sets of limits, and the run aborts when the
 * transcripts differ or the parser kept more input than its bounds allow.
 * ASan reports what a request, a page or the parser leaked.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "http_oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* FNV-1a of the input: the pieces follow the bytes, so the fuzzer that
   * changes the bytes also explores the cuts. */
  uint64_t seed = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; i++) seed = (seed ^ data[i]) * 0x100000001b3ull;
  if (!http_oracle_check(data, size, seed)) abort();
  return 0;
}
