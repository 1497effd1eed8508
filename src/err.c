/* err.c — see err.h. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>

int ing_err_set(ing_err *e, int code, const char *fmt, ...)
{
	if (!e)
		return code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	e->code = code;
	return code;
}

void ing_err_clear(ing_err *e)
{
	if (!e)
		return;
	e->code = ING_OK;
	e->msg[0] = '\0';
}

const char *ing_err_name(int code)
{
	switch (code) {
	case ING_OK: return "ok";
	case ING_ERR_IO: return "I/O error";
	case ING_ERR_FORMAT: return "format error";
	case ING_ERR_NOMEM: return "out of memory";
	case ING_ERR_INVALID: return "invalid argument";
	case ING_ERR_UNSUPPORTED: return "unsupported";
	case ING_ERR_RANGE: return "out of range";
	case ING_ERR_NOTFOUND: return "not found";
	case ING_ERR_BUSY: return "busy";
	}
	return "unknown error";
}
