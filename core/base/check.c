/*
 * The end of a failed assertion. stdio is used here only: the process is
 * about to abort, and the message is what tells the reader which invariant
 * broke.
 */
#include "base/check.h"

#include <stdio.h>
#include <stdlib.h>

void sh_check_fail(const char *expr, const char *file, int line) {
  fprintf(stderr, "stackhouse: %s:%d: check failed: %s\n", file, line, expr);
  fflush(stderr);
  abort();
}
