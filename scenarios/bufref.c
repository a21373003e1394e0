/* The byte buffers' reference and checks (bufref.h). */
#include "bufref.h"

#include <assert.h>

#include <stdlib.h>
#include <string.h>

/* Offsets a check asks at, at most: the fixed ones and two drawn. */
#define BR_OFFSETS 10
/* Pieces br_churn appends or moves, at most (the rest goes in one). */
#define BR_PIECES 24

/* memchr over one flat array: nothing of the buffer's pages in it. */
int64_t br_find(const uint8_t *ref, size_t len, size_t off, uint8_t byte) {
  if (off >= len) return -1;
  const uint8_t *hit = memchr(ref + off, byte, len - off);
  return hit != NULL ? (int64_t)(hit - ref) : -1;
}

size_t br_peek(const uint8_t *ref, size_t len, size_t off, uint8_t *dst, size_t n) {
  if (off >= len) return 0;
  size_t k = len - off < n ? len - off : n;
  memcpy(dst, ref + off, k);
  return k;
}

/* Every span from 0: its bytes are the array's, none is empty, and they
 * add up to len. A drawn page boundary (a span's start past 0) in *bnd, or
 * 0 when the buffer is one span. */
static bool spans(sh_scn *s, const sh_buf *b, const uint8_t *ref, size_t len, size_t *bnd,
                  const char *who, uint32_t i) {
  size_t off = 0, n, pages = 0;
  const uint8_t *p;
  uint64_t pick = sh_scn_rand(s);
  *bnd = 0;
  /* Bounded by len: each turn passes a span of at least a byte. */
  while ((n = sh_buf_span(b, off, &p)) > 0) {
    if (!SH_SCN_CHECK(s, off + n <= len && memcmp(p, ref + off, n) == 0,
                      "%s %u: sh_buf_span at %zu: %zu bytes, not the reference's (len %zu)",
                      who, i, off, n, len))
      return false;
    if (off > 0 && pick % ++pages == 0) *bnd = off; /* uniform over the boundaries */
    off += n;
  }
  return SH_SCN_CHECK(s, off == len && p == NULL, "%s %u: spans end at %zu, len %zu", who, i,
                      off, len);
}

/* The offsets to ask at: the fixed ones, either side of a page boundary,
 * and two drawn (one inside, one past the end). How many. */
static uint32_t offsets(sh_scn *s, size_t len, size_t bnd, size_t *o) {
  uint32_t n = 0;
  o[n++] = 0;
  o[n++] = 1;
  o[n++] = len;
  o[n++] = len + 1 + sh_scn_below(s, 5000);
  if (len > 0) o[n++] = len - 1, o[n++] = sh_scn_below(s, len);
  if (bnd > 0) o[n++] = bnd - 1, o[n++] = bnd, o[n++] = bnd + 1;
  assert(n <= BR_OFFSETS);
  return n;
}

static bool peek_at(sh_scn *s, const sh_buf *b, const uint8_t *ref, size_t len, size_t off,
                    uint8_t *got, uint8_t *want, const char *who, uint32_t i) {
  size_t left = off < len ? len - off : 0;
  size_t sizes[] = {0, 1, left, left + 1 + sh_scn_below(s, 3), sh_scn_below(s, left + 2)};
  for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++) {
    size_t n = sizes[j] < left + 4 ? sizes[j] : left + 4; /* the scratch's room */
    size_t g = sh_buf_peek(b, off, got, n), w = br_peek(ref, len, off, want, n);
    if (!SH_SCN_CHECK(s, g == w && memcmp(got, want, w) == 0,
                      "%s %u: sh_buf_peek(%zu, %zu) of %zu bytes: %zu bytes%s, want %zu", who,
                      i, off, n, len, g, g == w ? " that differ" : "", w))
      return false;
  }
  const uint8_t *p;
  size_t n = sh_buf_span(b, off, &p);
  bool same = n == 0 || memcmp(p, ref + off, n) == 0;
  return SH_SCN_CHECK(s, (n > 0) == (off < len) && n <= left && same,
                      "%s %u: sh_buf_span(%zu) of %zu bytes: %zu", who, i, off, len, n);
}

static bool find_at(sh_scn *s, const sh_buf *b, const uint8_t *ref, size_t len, size_t off,
                    uint8_t hint, const char *who, uint32_t i) {
  uint8_t bytes[4] = {hint, (uint8_t)sh_scn_below(s, 256), 0, 0};
  uint32_t nb = 2;
  if (off < len) bytes[nb++] = ref[off];                          /* found at off */
  if (off < len) bytes[nb++] = ref[off + sh_scn_below(s, len - off)]; /* found later */
  for (uint32_t j = 0; j < nb; j++) {
    int64_t g = sh_buf_find(b, off, bytes[j]), w = br_find(ref, len, off, bytes[j]);
    if (!SH_SCN_CHECK(s, g == w, "%s %u: sh_buf_find(%zu, %u) of %zu bytes: %lld, want %lld",
                      who, i, off, bytes[j], len, (long long)g, (long long)w))
      return false;
  }
  return true;
}

bool br_check(sh_scn *s, const sh_buf *b, const uint8_t *ref, size_t len, uint8_t hint,
              const char *who, uint32_t i) {
  if (!SH_SCN_CHECK(s, sh_buf_len(b) == len, "%s %u: sh_buf_len %zu, want %zu", who, i,
                    sh_buf_len(b), len))
    return false;
  size_t bnd, o[BR_OFFSETS];
  if (!spans(s, b, ref, len, &bnd, who, i)) return false;
  uint32_t n = offsets(s, len, bnd, o);
  uint8_t *scratch = malloc(2 * (len + 4));
  if (scratch == NULL) return false;
  bool ok = true;
  for (uint32_t j = 0; j < n && ok; j++)
    ok = peek_at(s, b, ref, len, o[j], scratch, scratch + len + 4, who, i) &&
         find_at(s, b, ref, len, o[j], hint, who, i);
  free(scratch);
  return ok;
}

/* A piece's size: a byte, around a page, or drawn up to the rest. */
static size_t piece(sh_scn *s, size_t left) {
  static const size_t sizes[] = {1, SH_PAGE_DATA - 1, SH_PAGE_DATA, SH_PAGE_DATA + 1};
  uint64_t k = sh_scn_below(s, 8);
  size_t n = k < 4 ? sizes[k] : 1 + sh_scn_below(s, left + 1);
  return n < left ? n : left;
}

/* ref appended to a in drawn pieces, then moved to m in drawn pieces. */
static bool fill_and_move(sh_scn *s, sh_buf *a, sh_buf *m, const uint8_t *ref, size_t len) {
  size_t done = 0;
  for (uint32_t k = 0; k < BR_PIECES && done < len; k++) {
    size_t n = k + 1 < BR_PIECES ? piece(s, len - done) : len - done;
    if (sh_buf_append(a, ref + done, n) != 0) return false;
    done += n;
  }
  if (done < len && sh_buf_append(a, ref + done, len - done) != 0) return false;
  for (uint32_t k = 0; k < BR_PIECES && sh_buf_len(a) > 0; k++) {
    size_t n = sh_scn_below(s, 8) == 0 ? 0 : piece(s, sh_buf_len(a));
    if (sh_scn_below(s, 8) == 0) n = sh_buf_len(a) + 1 + sh_scn_below(s, 9); /* past the end */
    if (sh_buf_move(m, a, n) != 0) return false;
  }
  return sh_buf_move(m, a, sh_buf_len(a)) == 0;
}

bool br_churn(sh_scn *s, const uint8_t *ref, size_t len, uint8_t hint, const char *who,
              uint32_t i) {
  sh_buf a = SH_BUF_INIT, m = SH_BUF_INIT;
  bool ok = fill_and_move(s, &a, &m, ref, len);
  ok = ok && SH_SCN_CHECK(s, sh_buf_len(&a) == 0, "%s %u: %zu bytes left after the moves", who,
                          i, sh_buf_len(&a));
  ok = ok && br_check(s, &m, ref, len, hint, who, i);
  size_t cut = sh_scn_below(s, 4) == 0 ? len + sh_scn_below(s, 3) : sh_scn_below(s, len + 1);
  sh_buf_consume(&m, cut);
  size_t gone = cut < len ? cut : len;
  ok = ok && br_check(s, &m, ref + gone, len - gone, hint, who, i);
  sh_buf_clear(&a);
  sh_buf_clear(&m);
  const uint8_t *p;
  return ok && SH_SCN_CHECK(s, sh_buf_len(&m) == 0 && sh_buf_span(&m, 0, &p) == 0,
                            "%s %u: a cleared buffer is not empty", who, i);
}
