/*
 * sh_version (stackhouse.h): the library says the version it was built as,
 * the headers' SH_VERSION_STRING, and the number macros agree with it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <stackhouse/stackhouse.h>

static void test_version_is_the_headers(void **state) {
  (void)state;
  const char *v = sh_version();
  assert_non_null(v);
  assert_string_equal(v, SH_VERSION_STRING);
  /* A static string: the same pointer every time. */
  assert_ptr_equal(sh_version(), v);
}

static void test_version_numbers(void **state) {
  (void)state;
  int major = -1, minor = -1, patch = -1, end = 0;
  assert_int_equal(sscanf(sh_version(), "%d.%d.%d%n", &major, &minor, &patch, &end), 3);
  assert_int_equal((size_t)end, strlen(sh_version()));
  assert_int_equal(major, SH_VERSION_MAJOR);
  assert_int_equal(minor, SH_VERSION_MINOR);
  assert_int_equal(patch, SH_VERSION_PATCH);
  assert_int_equal(SH_VERSION_NUMBER, major * 10000 + minor * 100 + patch);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_version_is_the_headers),
      cmocka_unit_test(test_version_numbers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
