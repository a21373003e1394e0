/*
 * Reads the malloc counter (bench/common/malloc_count.c) of a program that
 * was not written as a benchmark: linked into it beside the counter, this
 * makes SIGUSR1 write one line to stderr,
 *
 *   mallocs=N frees=M
 *
 * the allocations and frees of the whole process so far. A script reads the
 * line twice around a phase it drives from outside (bench/echo.sh --mallocs
 * does so with the echo example) and takes the difference.
 *
 * The handler only sums relaxed atomics and calls write(), both safe in a
 * signal handler, and allocates nothing, so reading the counter does not
 * move it.
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "malloc_count.h"

/* Appends the decimal digits of v at p; returns the end. */
static char *put_u64(char *p, uint64_t v) {
  char digits[20];
  int n = 0;
  do digits[n++] = (char)('0' + v % 10);
  while ((v /= 10) != 0);
  while (n > 0) *p++ = digits[--n];
  return p;
}

static char *put_str(char *p, const char *s) {
  size_t n = strlen(s);
  memcpy(p, s, n);
  return p + n;
}

static void report(int sig) {
  (void)sig;
  char line[64], *p = line;
  p = put_u64(put_str(p, "mallocs="), malloc_count_read());
  p = put_u64(put_str(p, " frees="), malloc_count_frees());
  *p++ = '\n';
  ssize_t unused = write(STDERR_FILENO, line, (size_t)(p - line));
  (void)unused; /* nothing to do about a lost line in a handler */
}

/* Installed before main, so that the program needs no change: its threads
 * block only the signals it waits for itself, and any of them may run it. */
__attribute__((constructor)) static void install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = report;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);
}
