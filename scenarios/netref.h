/*
 * The reference the network scenarios check streams against (net_stream,
 * net_accept, net_dgram): byte k of a stream named `key` is
 * nr_pattern(key, k), so that a receiver checks every byte as it reads it
 * and a byte lost, doubled, moved or damaged fails the run where it shows,
 * with its offset, the byte expected and the byte read; and a channel's
 * events come in their order (OPEN once, then EOF at most once, then
 * CLOSED once, nothing after it).
 */
#ifndef SCN_NETREF_H
#define SCN_NETREF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stackhouse/net.h>
#include <stackhouse/scenario.h>

#define NR_CHUNK 4096u

static inline uint8_t nr_pattern(uint32_t key, uint64_t off) {
  return (uint8_t)(((uint32_t)off * 2654435761u + key * 0x9E3779B9u + 0x7F4A7C15u) >> 24);
}

/* What a channel's hook heard. */
typedef struct nr_events {
  uint8_t open, eof, closed;
  int err; /* the close's */
} nr_events;

/* Notes event ev (error: the close's) of channel `who` i, checking its turn. */
void nr_note(sh_scn *s, nr_events *e, const char *who, uint32_t i, int ev, int error);

/* Checks the bytes of b from offset `from` as stream offsets *at.. of key,
 * and moves *at past them; false at the first wrong one (reported as
 * `who` i). */
bool nr_check(sh_scn *s, const sh_buf *b, size_t from, uint32_t key, uint64_t *at,
              const char *who, uint32_t i);

/* n bytes of stream key from offset at into b (appended); the first four
 * bytes of the stream are `hdr`'s, little-endian, when hdr is not 0. */
int nr_fill(sh_buf *b, uint32_t key, uint32_t hdr, uint64_t at, uint64_t n);

/* The same as a new sh_bytes; NULL when out of memory. */
sh_bytes *nr_bytes(uint32_t key, uint32_t hdr, uint64_t at, uint64_t n);

#endif
