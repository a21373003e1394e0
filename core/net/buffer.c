/*
 * Byte buffers (contract in buffer.h and net.h).
 *
 * Shape. Every page of the chain holds at least one byte (check() lets the
 * tail alone be empty). Pages are consumed at the head and freed as soon
 * as they are empty, and appends fill the tail page before a new one, so a
 * buffer only appended to and consumed holds at most one page more than
 * its bytes need. sh_buf_move relinks whole pages, partly consumed ones
 * too, so a buffer filled by moves may hold as little as a byte a page.
 * Whatever may fail (a page from the pool) is had before anything
 * changes, so that every call that fails leaves the buffer as it was.
 *
 * Bounds. Every loop walks the pages of a chain (at most one per byte, and
 * the tail: check(), in the test builds) or the pages a call needs
 * (n / SH_PAGE_DATA + 1: spares).
 */
#include "net/buffer.h"

#include <errno.h>
#include <string.h>

#include "base/atomic.h"
#include "base/check.h"
#include "mem/mem.h"

/* A page is one pooled object: with the pool's 16-byte object header it must
 * fit the 4096-byte class, or every page would cost 8 KiB. */
_Static_assert(sizeof(sh_page) + 16 <= 4096, "a page must fit the pool's 4096-byte class");

static void bytes_drop(sh_msg *m) { sh_buf_clear(&((sh_bytes *)m)->buf); }
static void datagram_drop(sh_msg *m) { sh_buf_clear(&((sh_datagram *)m)->buf); }
SH_MSG_DEFINE_DROP(sh_bytes, SH_NOTICE, 0, bytes_drop);
SH_MSG_DEFINE_DROP(sh_datagram, SH_NOTICE, 0, datagram_drop);

static size_t page_len(const sh_page *p) { return p->end - p->start; }

/* The shape above, walked: compiled into the test builds only. */
static void check(const sh_buf *b) {
#ifdef SH_DEBUG
  size_t sum = 0, pages = 0;
  const sh_page *last = NULL;
  for (const sh_page *p = b->head; p != NULL; p = p->next) {
    SH_ASSERT(p->start <= p->end && p->end <= SH_PAGE_DATA);
    SH_ASSERT(page_len(p) > 0 || p->next == NULL);
    sum += page_len(p);
    last = p;
    SH_ASSERT(++pages <= sum + 1); /* a page a byte at most, and the tail */
  }
  SH_ASSERT(sum == b->len);
  SH_ASSERT(last == b->tail);
#else
  (void)b;
#endif
}

static sh_page *page_new(void) {
  sh_page *p = sh_mem_alloc(sizeof(sh_page));
  if (p == NULL) return NULL;
  p->next = NULL;
  p->start = p->end = 0;
  return p;
}

static void free_chain(sh_page *p) {
  while (p != NULL) {
    sh_page *next = p->next;
    sh_mem_free(p);
    p = next;
  }
}

/* Links the chain first..last at b's tail (their bytes already counted by
 * the caller). */
static void link_tail(sh_buf *b, sh_page *first, sh_page *last) {
  if (b->tail != NULL)
    b->tail->next = first;
  else
    b->head = first;
  b->tail = last;
  last->next = NULL;
}

/* Copies n bytes to the tail page's room and then into the pages of
 * `spare`, linked as they fill; the room plus the spares hold n. */
static void fill(sh_buf *b, const uint8_t *src, size_t n, sh_page *spare) {
  while (n > 0) {
    sh_page *t = b->tail;
    if (t == NULL || t->end == SH_PAGE_DATA) {
      SH_ASSERT(spare != NULL);
      t = spare;
      spare = spare->next;
      link_tail(b, t, t);
    }
    size_t k = SH_PAGE_DATA - t->end;
    if (k > n) k = n;
    memcpy(t->data + t->end, src, k);
    t->end += (uint32_t)k;
    b->len += k;
    src += k;
    n -= k;
  }
  SH_ASSERT(spare == NULL);
}

static size_t tail_room(const sh_buf *b) {
  return b->tail != NULL ? SH_PAGE_DATA - b->tail->end : 0;
}

/* The pages n bytes need past a tail room of `room`, all of them or none:
 * *out NULL and -ENOMEM. */
static int spares(size_t n, size_t room, sh_page **out) {
  *out = NULL;
  size_t need = n > room ? (n - room + SH_PAGE_DATA - 1) / SH_PAGE_DATA : 0;
  SH_ASSERT(need <= n / SH_PAGE_DATA + 1); /* the bound the file comment states */
  for (size_t i = 0; i < need; i++) {
    sh_page *p = page_new();
    if (p == NULL) {
      free_chain(*out);
      *out = NULL;
      return -ENOMEM;
    }
    p->next = *out;
    *out = p;
  }
  return 0;
}

void sh_buf_clear(sh_buf *b) {
  SH_FROM_USER();
  free_chain(b->head);
  b->head = b->tail = NULL;
  b->len = 0;
}

int sh_buf_append(sh_buf *b, const void *p, size_t n) {
  SH_FROM_USER();
  sh_page *spare;
  if (spares(n, tail_room(b), &spare) != 0) return -ENOMEM;
  fill(b, p, n, spare);
  check(b);
  return 0;
}

/* The page holding offset *off (then made relative to the page's start),
 * or NULL at or past the end. */
static const sh_page *seek(const sh_buf *b, size_t *off) {
  if (*off >= b->len) return NULL;
  const sh_page *p = b->head;
  while (*off >= page_len(p)) {
    *off -= page_len(p);
    p = p->next;
  }
  return p;
}

size_t sh_buf_peek(const sh_buf *b, size_t off, void *dst, size_t n) {
  size_t done = 0;
  for (const sh_page *p = seek(b, &off); p != NULL && done < n; p = p->next, off = 0) {
    size_t k = page_len(p) - off;
    if (k > n - done) k = n - done;
    memcpy((uint8_t *)dst + done, p->data + p->start + off, k);
    done += k;
  }
  return done;
}

size_t sh_buf_span(const sh_buf *b, size_t off, const uint8_t **p) {
  const sh_page *pg = seek(b, &off);
  if (pg == NULL) {
    *p = NULL;
    return 0;
  }
  *p = pg->data + pg->start + off;
  return page_len(pg) - off;
}

int64_t sh_buf_find(const sh_buf *b, size_t off, uint8_t byte) {
  size_t base = off;
  size_t in = off;
  for (const sh_page *p = seek(b, &in); p != NULL; p = p->next) {
    const uint8_t *at = p->data + p->start + in;
    const uint8_t *hit = memchr(at, byte, page_len(p) - in);
    if (hit != NULL) return (int64_t)(base + (size_t)(hit - at));
    base += page_len(p) - in;
    in = 0;
  }
  return -1;
}

void sh_buf_consume(sh_buf *b, size_t n) {
  SH_FROM_USER();
  if (n > b->len) n = b->len;
  b->len -= n;
  while (n > 0) {
    sh_page *p = b->head;
    if (n < page_len(p)) {
      p->start += (uint32_t)n;
      break;
    }
    n -= page_len(p);
    b->head = p->next;
    if (b->head == NULL) b->tail = NULL;
    sh_mem_free(p);
  }
  check(b);
}

/*
 * Whole pages are relinked; only the page the n-th byte falls inside is
 * split, by copying its first bytes (less than a page) into dst's tail room
 * or a page had beforehand.
 */
int sh_buf_move(sh_buf *dst, sh_buf *src, size_t n) {
  SH_FROM_USER();
  SH_ASSERT(dst != src);
  if (n > src->len) n = src->len;
  if (n == 0) return 0;
  size_t whole = 0;
  sh_page *last = NULL, *p = src->head;
  while (whole < n && page_len(p) <= n - whole) {
    whole += page_len(p);
    last = p;
    p = p->next;
  }
  size_t rem = n - whole;
  size_t room = last != NULL ? SH_PAGE_DATA - last->end : tail_room(dst);
  sh_page *spare;
  if (spares(rem, room, &spare) != 0) return -ENOMEM;
  if (last != NULL) {
    sh_page *first = src->head;
    src->head = last->next;
    if (src->head == NULL) src->tail = NULL;
    link_tail(dst, first, last);
    src->len -= whole;
    dst->len += whole;
  }
  if (rem > 0) {
    fill(dst, p->data + p->start, rem, spare);
    p->start += (uint32_t)rem;
    src->len -= rem;
  }
  check(src);
  check(dst);
  return 0;
}

int sh_buf_iov(const sh_buf *b, struct iovec *iov, int max, size_t limit) {
  int k = 0;
  for (const sh_page *p = b->head; p != NULL && k < max && limit > 0; p = p->next) {
    size_t n = page_len(p);
    if (n == 0) continue;
    if (n > limit) n = limit;
    iov[k].iov_base = (void *)(p->data + p->start);
    iov[k].iov_len = n;
    limit -= n;
    k++;
  }
  return k;
}

size_t sh_buf_pages(const sh_buf *b) {
  size_t n = 0;
  for (const sh_page *p = b->head; p != NULL; p = p->next) n++;
  return n;
}

/* A new message of type t whose buffer (at offset `at`) holds a copy of n
 * bytes; NULL when out of memory. */
static sh_msg *with_copy(const sh_msg_type *t, size_t at, const void *p, size_t n) {
  sh_msg *m = sh_msg_alloc(t);
  if (m == NULL) return NULL;
  if (sh_buf_append((sh_buf *)((uint8_t *)m + at), p, n) != 0) {
    sh_msg_free(m);
    return NULL;
  }
  return m;
}

sh_bytes *sh_bytes_new(const void *p, size_t n) {
  return (sh_bytes *)with_copy(&sh_bytes_type, offsetof(sh_bytes, buf), p, n);
}

sh_datagram *sh_datagram_new(const sh_netaddr *to, const void *p, size_t n) {
  sh_datagram *d =
      (sh_datagram *)with_copy(&sh_datagram_type, offsetof(sh_datagram, buf), p, n);
  if (d != NULL && to != NULL) d->peer = *to;
  return d;
}
