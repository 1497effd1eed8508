/* err.h — status codes and error messages shared by every module.
 *
 * Library functions return an int status (ING_OK or one of the codes below)
 * and, where a caller can learn more, write a human-readable message into an
 * `ing_err` that the caller owns (usually embedded in a handle). Only main()
 * prints messages and exits. */
#ifndef INGOT_ERR_H
#define INGOT_ERR_H

#include <stddef.h>

enum {
	ING_OK = 0,
	ING_ERR_IO,          /* open/read/mmap failed, see errno text in msg */
	ING_ERR_FORMAT,      /* malformed input file or data */
	ING_ERR_NOMEM,       /* allocation failed */
	ING_ERR_INVALID,     /* bad argument from the caller */
	ING_ERR_UNSUPPORTED, /* well-formed but not something we handle */
	ING_ERR_RANGE,       /* value outside the allowed range */
	ING_ERR_NOTFOUND,    /* named thing does not exist */
	ING_ERR_BUSY,        /* cannot be taken now; the same call may succeed later */
};

#define ING_ERR_MSG_MAX 512

typedef struct ing_err {
	int code;
	char msg[ING_ERR_MSG_MAX];
} ing_err;

/* Records code and a printf-style message in e (e may be NULL) and returns
 * code, so callers can write `return ing_err_set(e, ING_ERR_FORMAT, ...)`. */
int ing_err_set(ing_err *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Resets e to ING_OK with an empty message. */
void ing_err_clear(ing_err *e);

/* Static name of a status code ("format error", ...). */
const char *ing_err_name(int code);

#endif
