/*
 * A plain reference for the byte buffers of net.h (sh_buf_*), and checks
 * that drive every public sh_buf_* call over a buffer against it. The
 * reference is a flat byte array: what the buffer should hold, byte for
 * byte, whatever its pages look like. Each check compares one call's
 * result with the same question asked of the array (br_find, br_peek), at
 * the offsets where a chain of pages goes wrong: 0, 1, inside, at a page
 * boundary and either side of it, the last byte, the end, past the end.
 * The first difference fails the run (SH_SCN_CHECK), naming the call, the
 * offset, what the buffer said and what the array says.
 */
#ifndef SCN_BUFREF_H
#define SCN_BUFREF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stackhouse/net.h>
#include <stackhouse/scenario.h>

/* The reference of sh_buf_find: the first `byte` at or after off, or -1. */
int64_t br_find(const uint8_t *ref, size_t len, size_t off, uint8_t byte);
/* The reference of sh_buf_peek: copies up to n bytes from off; how many. */
size_t br_peek(const uint8_t *ref, size_t len, size_t off, uint8_t *dst, size_t n);

/* Checks the read-only calls (sh_buf_len, sh_buf_span, sh_buf_peek,
 * sh_buf_find) on b against ref[0, len), at drawn and boundary offsets;
 * `hint` is a byte to look for besides drawn ones (a protocol's
 * delimiter). False at the first difference. */
bool br_check(sh_scn *s, const sh_buf *b, const uint8_t *ref, size_t len, uint8_t hint,
              const char *who, uint32_t i);

/* Checks the calls that change a buffer (sh_buf_append, sh_buf_move,
 * sh_buf_consume, sh_buf_clear) with ref[0, len): appends it in drawn
 * pieces, moves it in drawn pieces (0 and past the end among them) into a
 * second buffer whose pages are then as small as the pieces, consumes a
 * drawn prefix, checking both buffers (br_check) along the way; frees
 * what it made. False at the first difference (or out of memory). */
bool br_churn(sh_scn *s, const uint8_t *ref, size_t len, uint8_t hint, const char *who,
              uint32_t i);

#endif
