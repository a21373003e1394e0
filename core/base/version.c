/*
 * sh_version (stackhouse.h): the version the library was built as, so that
 * a program can tell which libstackhouse.so it runs with.
 */
#include <stackhouse/stackhouse.h>

const char *sh_version(void) { return SH_VERSION_STRING; }
