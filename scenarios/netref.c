/* The network scenarios' reference (netref.h). */
#include "netref.h"

void nr_note(sh_scn *s, nr_events *e, const char *who, uint32_t i, int ev, int error) {
  bool ok = true;
  if (ev == SH_CHANNEL_OPEN) ok = !e->open && !e->closed, e->open = 1;
  if (ev == SH_CHANNEL_EOF) ok = e->open && !e->eof && !e->closed, e->eof = 1;
  if (ev == SH_CHANNEL_WRITABLE) ok = e->open && !e->closed;
  if (ev == SH_CHANNEL_CLOSED) ok = e->open && !e->closed, e->closed = 1, e->err = error;
  SH_SCN_CHECK(s, ok, "%s %u: event %d out of turn (open %d eof %d closed %d)", who, i, ev,
               e->open, e->eof, e->closed);
}

bool nr_check(sh_scn *s, const sh_buf *b, size_t from, uint32_t key, uint64_t *at,
              const char *who, uint32_t i) {
  const uint8_t *p;
  size_t n, off = from;
  /* Bounded by the buffer's length: each turn passes a span. */
  while ((n = sh_buf_span(b, off, &p)) > 0) {
    for (size_t k = 0; k < n; k++) {
      uint8_t want = nr_pattern(key, *at + k);
      if (p[k] != want) {
        SH_SCN_CHECK(s, false, "%s %u: byte %llu is %u, want %u", who, i,
                     (unsigned long long)(*at + k), p[k], want);
        return false;
      }
    }
    *at += n;
    off += n;
  }
  return true;
}

int nr_fill(sh_buf *b, uint32_t key, uint32_t hdr, uint64_t at, uint64_t n) {
  uint8_t p[NR_CHUNK];
  /* Bounded by n: each turn appends up to NR_CHUNK bytes. */
  for (uint64_t done = 0; done < n;) {
    uint64_t k = n - done < NR_CHUNK ? n - done : NR_CHUNK;
    for (uint64_t j = 0; j < k; j++) {
      uint64_t o = at + done + j;
      p[j] = hdr != 0 && o < 4 ? (uint8_t)(hdr >> (8 * o)) : nr_pattern(key, o);
    }
    int rc = sh_buf_append(b, p, k);
    if (rc != 0) return rc;
    done += k;
  }
  return 0;
}

sh_bytes *nr_bytes(uint32_t key, uint32_t hdr, uint64_t at, uint64_t n) {
  sh_bytes *b = sh_bytes_new(NULL, 0);
  if (b != NULL && nr_fill(&b->buf, key, hdr, at, n) != 0) {
    sh_msg_free(&b->hdr);
    b = NULL;
  }
  return b;
}
