/*
 * Coverage counters of a forked child, written before it ends with _exit().
 *
 * shsim runs every simulation in a forked child that ends with _exit(),
 * which skips the exit-time hook that writes a coverage build's counters:
 * without this, nothing the simulated scenarios execute (the user's actors
 * included) would count. A program built without coverage has no counters
 * and this does nothing.
 */
#ifndef SH_SHSIM_COVDUMP_H
#define SH_SHSIM_COVDUMP_H

/* Writes the process's gcov counters (gcc or clang --coverage), if any. */
void covdump_write(void);

#endif
