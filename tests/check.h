/* check.h — the minimal assertion layer of ingot's C tests.
 *
 * CHECK(cond, fmt, ...) records a failure with file:line and a message and
 * carries on, so one run reports every broken case. A test binary returns
 * check_summary("name") from main: it prints "name: N checks, M failed" and
 * yields the exit status (0 only when nothing failed). */
#ifndef INGOT_CHECK_H
#define INGOT_CHECK_H

#include <stddef.h>
#include <stdio.h>

extern long check_count, check_failed;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		check_count++;                                               \
		if (!(cond)) {                                               \
			check_failed++;                                      \
			if (check_failed <= 50) {                            \
				fprintf(stderr, "%s:%d: CHECK(%s) failed: ", \
					__FILE__, __LINE__, #cond);          \
				fprintf(stderr, __VA_ARGS__);                \
				fputc('\n', stderr);                         \
			}                                                    \
		}                                                            \
	} while (0)

/* Prints the summary line and returns the process exit status. */
int check_summary(const char *name);

/* The whole file at path, NUL-terminated, with its length in *len (len may
 * be NULL); NULL when it cannot be opened or memory runs out. The caller
 * free()s it. */
char *check_read_file(const char *path, size_t *len);

/* Directory of the shared test data (../shared/testdata relative to the
 * repository root, or $INGOT_TESTDATA). */
const char *check_testdata_dir(void);

/* Path of the default model ($INGOT_MODEL or the pull cache), or NULL with a
 * note on stderr when it is not installed. */
const char *check_default_model(void);

#endif
