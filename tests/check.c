/* check.c — see check.h. */
#include "check.h"

#include <stdlib.h>
#include <unistd.h>

long check_count, check_failed;

int check_summary(const char *name)
{
	printf("%s: %ld checks, %ld failed\n", name, check_count, check_failed);
	return check_failed ? 1 : 0;
}

char *check_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t cap = 0, n = 0, got;
	do { /* read until EOF: no size from fseek, so pipes work too */
		if (n == cap) {
			char *p = realloc(buf, (cap = cap ? 2 * cap : 65536) + 1);
			if (!p) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = p;
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
	} while (got > 0);
	fclose(f);
	buf[n] = 0;
	if (len)
		*len = n;
	return buf;
}

const char *check_testdata_dir(void)
{
	const char *d = getenv("INGOT_TESTDATA");
	return d && *d ? d : "../shared/testdata";
}

const char *check_default_model(void)
{
	static char path[4096];
	const char *m = getenv("INGOT_MODEL");
	if (m && *m)
		return m;
	const char *home = getenv("INGOT_HOME");
	if (home && *home)
		snprintf(path, sizeof path, "%s/gemma-3-270m-q4_k_m.gguf", home);
	else
		snprintf(path, sizeof path, "%s/.cache/ingot/models/gemma-3-270m-q4_k_m.gguf",
			 getenv("HOME") ? getenv("HOME") : ".");
	if (access(path, R_OK) != 0) {
		fprintf(stderr, "default model not found at %s (run ./ingot pull)\n", path);
		return NULL;
	}
	return path;
}
