/*
 * Byte buffers (the public sh_buf of net.h): chains of fixed-size pages from
 * the worker's pools (mem.h), so that steady-state reads and writes allocate
 * nothing. A page's bytes are data[start, end); pages are appended at the
 * tail and consumed at the head. This header adds what the channel layer
 * needs beyond the public calls: writing straight from the pages.
 */
#ifndef SH_BUFFER_H
#define SH_BUFFER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <stackhouse/net.h>

struct sh_page {
  sh_page *next;
  uint32_t start, end; /* data[start, end) holds bytes */
  uint8_t data[SH_PAGE_DATA];
};

/* Fills up to max iovecs with the buffer's bytes from the head, at most
 * `limit` bytes in all; how many iovecs. */
int sh_buf_iov(const sh_buf *b, struct iovec *iov, int max, size_t limit);
/* Pages the buffer holds (for accounting and tests). */
size_t sh_buf_pages(const sh_buf *b);

#endif
