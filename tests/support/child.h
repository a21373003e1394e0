/*
 * Running a piece of a test in a forked child: for runs that end the
 * process when they fail (a simulation's failure handler must not return),
 * so that the failure is reported to the test and the tests go on.
 */
#ifndef TESTS_SUPPORT_CHILD_H
#define TESTS_SUPPORT_CHILD_H

#include <stddef.h>

/* Runs body(arg) in a child under an alarm of watchdog_s seconds; the body
 * must end with _exit. What the child wrote with th_child_write goes to out
 * (size bytes, NUL-terminated). Returns the child's exit status, or 128 +
 * the signal that killed it. From the test thread. */
int th_in_child(void (*body)(const void *arg), const void *arg, unsigned watchdog_s, char *out,
                size_t size);
/* In the child: writes text to the parent's `out`. */
void th_child_write(const char *text);

#endif
