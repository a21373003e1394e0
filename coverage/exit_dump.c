/*
 * Linked into the coverage build's shsim (and the simulator tests that fork
 * through its runner) with -Wl,--wrap=_exit. Each simulation runs in a
 * forked child that ends with _exit(), which skips the exit-time hook that
 * writes the coverage counters: without this, what the simulated scenarios
 * execute would not count.
 */
#include <stdnoreturn.h>

void __gcov_dump(void);
noreturn void __real__exit(int status);
noreturn void __wrap__exit(int status);

noreturn void __wrap__exit(int status) {
  __gcov_dump();
  __real__exit(status);
}
