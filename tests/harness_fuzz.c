/* harness_fuzz.c — what the fuzz harnesses share (see harness_fuzz.h). */
#include "harness_fuzz.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void harness_fail(const char *what, ...)
{
	va_list ap;
	va_start(ap, what);
	fputs("harness: ", stderr);
	vfprintf(stderr, what, ap);
	fputc('\n', stderr);
	va_end(ap);
	fflush(stderr);
	abort();
}
