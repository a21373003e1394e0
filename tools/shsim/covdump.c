/*
 * covdump.h: the gcov runtime's own entry points, through weak references,
 * so that the installed (uninstrumented) libstackhouse-shsim.a needs no
 * coverage build and no wrapper of _exit from the program it is linked into.
 */
#include "covdump.h"

#include <stddef.h>

/* clang --coverage: compiler-rt's profile runtime defines __gcov_dump in the
 * object every instrumented file pulls in, so the reference resolves.
 * gcc --coverage: libgcov.a defines __gcov_dump in a member of its own that
 * a weak reference does not pull out of the archive (it resolves only when
 * something else links it, e.g. -Wl,-u,__gcov_dump), while __gcov_exit,
 * the hook the skipped destructors would have called, is in the member
 * every instrumented file needs. Weak: NULL in a build without coverage. */
extern void __gcov_dump(void) __attribute__((weak));
extern void __gcov_exit(void) __attribute__((weak));

void covdump_write(void) {
  if (__gcov_dump != NULL)
    __gcov_dump();
  else if (__gcov_exit != NULL)
    __gcov_exit();
}
