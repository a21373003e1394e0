// C++ against stackhouse's C API: the headers compile as C++17 (the
// scenario framework's too), and the library says its version.
#include <cstdio>
#include <cstring>

#include <stackhouse/scenario.h>
#include <stackhouse/stackhouse.h>

int main() {
  std::printf("stackhouse %s (headers %s, %d)\n", sh_version(), SH_VERSION_STRING, SH_VERSION_NUMBER);
  return std::strcmp(sh_version(), SH_VERSION_STRING) == 0 ? 0 : 1;
}
