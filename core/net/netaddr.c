/*
 * IPv4 addresses as text (net.h). The parse is strict and local: dotted
 * decimal only, no resolver (it would block a worker) and none of the
 * older forms inet_aton takes ("10.1", octal "010.0.0.1", hex), which
 * would read a typo as some other address.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <stackhouse/net.h>

#include "base/atomic.h"

/* Longest text: "255.255.255.255:65535" and its NUL. */
#define NETADDR_TEXT 22

/* A decimal number of 1..max_digits digits, no sign and no leading zero,
 * at most max; *s moves past it. -1 when there is none. */
static long number(const char **s, int max_digits, long max) {
  const char *p = *s;
  long v = 0;
  int digits = 0;
  while (*p >= '0' && *p <= '9' && digits < max_digits + 1) {
    v = v * 10 + (*p - '0');
    p++;
    digits++;
  }
  if (digits == 0 || digits > max_digits || v > max) return -1;
  if (digits > 1 && **s == '0') return -1;
  *s = p;
  return v;
}

int sh_netaddr_parse(const char *s, sh_netaddr *out) {
  SH_FROM_USER();
  if (s == NULL || out == NULL) return -EINVAL;
  uint32_t ip = 0;
  for (int i = 0; i < 4; i++) {
    long octet = number(&s, 3, 255);
    if (octet < 0 || *s != (i < 3 ? '.' : ':')) return -EINVAL;
    s++;
    ip = ip << 8 | (uint32_t)octet;
  }
  long port = number(&s, 5, 65535);
  if (port < 0 || *s != '\0') return -EINVAL;
  out->ip = ip;
  out->port = (uint16_t)port;
  return 0;
}

int sh_netaddr_format(const sh_netaddr *a, char *buf, size_t size) {
  SH_FROM_USER();
  if (a == NULL || (buf == NULL && size > 0)) return -EINVAL;
  char text[NETADDR_TEXT];
  int n = snprintf(text, sizeof text, "%u.%u.%u.%u:%u", (unsigned)(a->ip >> 24),
                   (unsigned)(a->ip >> 16 & 0xff), (unsigned)(a->ip >> 8 & 0xff),
                   (unsigned)(a->ip & 0xff), (unsigned)a->port);
  if (n < 0 || (size_t)n >= size) return -ENOSPC;
  memcpy(buf, text, (size_t)n + 1);
  return 0;
}
