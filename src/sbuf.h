/* sbuf.h — a growable byte buffer for building responses and text.
 *
 * Zero-initialise (`struct sbuf b = {0};`), append, take or free. After a
 * failed append the buffer remembers the failure (b->oom) and ignores
 * further appends, so a sequence of appends can be checked once at the
 * end. The bytes are always NUL-terminated once anything was appended. */
#ifndef INGOT_SBUF_H
#define INGOT_SBUF_H

#include <stdbool.h>
#include <stddef.h>

struct sbuf {
	char *p;    /* [cap], p[len] == 0 */
	size_t len;
	size_t cap;
	bool oom;   /* an append failed; contents are incomplete */
};

/* Append n bytes / a C string / printf output. Return 0, or -1 on
 * allocation failure (b->oom set). */
int sbuf_put(struct sbuf *b, const void *s, size_t n);
int sbuf_puts(struct sbuf *b, const char *s);
int sbuf_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Removes the first n bytes (n <= len). */
void sbuf_consume(struct sbuf *b, size_t n);

/* Hands the bytes to the caller (free with ing_free; never NULL unless
 * out of memory) and resets b. */
char *sbuf_take(struct sbuf *b, size_t *len);

/* Frees the bytes and zeroes b. Accepts NULL. */
void sbuf_free(struct sbuf *b);

#endif
