/* cli.c — command table and helpers shared by the subcommands. */
#include "cli.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mem.h"
#include "pool.h"
#include "pull.h"

static const struct cli_command commands[] = {
	{ "pull", cmd_pull },
	{ "info", cmd_info },
	{ "tokenize", cmd_tokenize },
	{ "run", cmd_run },
	{ "bench", cmd_bench },
	{ "perplexity", cmd_perplexity },
};

const struct cli_command *cli_command_find(const char *name)
{
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

int cli_model_path(const char *arg, char *buf, size_t cap)
{
	if (arg) {
		snprintf(buf, cap, "%s", arg);
		return 0;
	}
	if (pull_default_path(buf, cap) != 0) {
		fprintf(stderr, "ingot: INGOT_HOME path too long\n");
		return -1;
	}
	if (access(buf, R_OK) != 0) {
		fprintf(stderr, "ingot: no model given and the default model is not installed at %s\n"
			"       run `./ingot pull` to install it, or pass -m MODEL.gguf\n", buf);
		return -1;
	}
	return 0;
}

char *cli_read_stdin(size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = ing_malloc(cap);
	if (!buf)
		return NULL;
	for (;;) {
		if (n == cap) {
			char *nb = cap < ((size_t)1 << 40) ? ing_realloc(buf, cap * 2) : NULL;
			if (!nb) {
				ing_free(buf);
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
		size_t r = fread(buf + n, 1, cap - n, stdin);
		n += r;
		if (r == 0) {
			if (ferror(stdin)) {
				ing_free(buf);
				return NULL;
			}
			break;
		}
	}
	*len = n;
	return buf;
}

int cli_threads(int requested)
{
	int cpus = pool_cpu_count();
	if (requested <= 0)
		return pool_physical_cores();
	if (requested > cpus) {
		fprintf(stderr, "ingot: note: %d threads requested but only %d CPUs are available; "
				"using %d (spinning workers must not outnumber cores)\n",
			requested, cpus, cpus);
		return cpus;
	}
	return requested;
}
