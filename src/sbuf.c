/* sbuf.c — growable byte buffer (see sbuf.h). Capacity doubles, so n
 * appends cost O(total bytes). */
#include "sbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mem.h"

static int sbuf_reserve(struct sbuf *b, size_t extra)
{
	if (b->oom)
		return -1;
	if (b->len + extra + 1 <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + extra + 1) {
		if (cap > ((size_t)1 << 40)) {
			b->oom = true;
			return -1;
		}
		cap *= 2;
	}
	char *p = ing_realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

int sbuf_put(struct sbuf *b, const void *s, size_t n)
{
	if (sbuf_reserve(b, n))
		return -1;
	if (n)
		memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
	return 0;
}

int sbuf_puts(struct sbuf *b, const char *s)
{
	return sbuf_put(b, s, strlen(s));
}

int sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char tmp[256];
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	if ((size_t)n < sizeof tmp)
		return sbuf_put(b, tmp, (size_t)n);
	if (sbuf_reserve(b, (size_t)n))
		return -1;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

void sbuf_consume(struct sbuf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
	} else {
		memmove(b->p, b->p + n, b->len - n);
		b->len -= n;
	}
	if (b->p)
		b->p[b->len] = 0;
}

char *sbuf_take(struct sbuf *b, size_t *len)
{
	if (!b->p && !b->oom)
		sbuf_reserve(b, 0);
	char *p = b->oom ? NULL : b->p;
	if (p)
		p[b->len] = 0;
	if (len)
		*len = b->len;
	if (!p)
		ing_free(b->p);
	*b = (struct sbuf){ 0 };
	return p;
}

void sbuf_free(struct sbuf *b)
{
	if (!b)
		return;
	ing_free(b->p);
	*b = (struct sbuf){ 0 };
}
