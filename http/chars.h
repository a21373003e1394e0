/*
 * Byte classes of HTTP/1.1 (RFC 9110, 9112) as one 256-entry table, so
 * that the parser's loops test a byte with one load and a mask.
 */
#ifndef SH_HTTP_CHARS_H
#define SH_HTTP_CHARS_H

#include <stdint.h>

enum {
  SH_HC_TCHAR = 1u << 0,  /* token: methods, header names */
  SH_HC_VALUE = 1u << 1,  /* field value: HTAB, SP, 0x21-0x7E, 0x80-0xFF */
  SH_HC_TARGET = 1u << 2, /* request target: 0x21-0x7E */
  SH_HC_HEX = 1u << 3,    /* HEXDIG */
  SH_HC_DIGIT = 1u << 4,  /* DIGIT */
};

extern const uint8_t sh_http_cls[256];
/* ASCII lower case of each byte (others unchanged). */
extern const uint8_t sh_http_lower[256];

#endif
