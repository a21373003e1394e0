/*
 * Forked children for tests: a pipe carries a word back to the parent.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* alarm */
#endif

#include "child.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* The child's end of the pipe to the parent. */
static int child_fd = -1;

void th_child_write(const char *text) {
  ssize_t n = write(child_fd, text, strlen(text));
  (void)n; /* a short write shows as a wrong answer in the parent */
}

int th_in_child(void (*body)(const void *arg), const void *arg, unsigned watchdog_s, char *out,
                size_t size) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(NULL); /* the child must not write the parent's buffered output again */
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    child_fd = fds[1];
    alarm(watchdog_s);
    body(arg);
    _exit(125); /* a body that returned */
  }
  close(fds[1]);
  size_t len = 0;
  /* Bounded by the buffer: the child writes a word or nothing, then exits. */
  while (len + 1 < size) {
    ssize_t n = read(fds[0], out + len, size - 1 - len);
    if (n <= 0) break;
    len += (size_t)n;
  }
  out[len] = '\0';
  close(fds[0]);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
