/* cli.c — command table and helpers shared by the subcommands. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "quant.h"

#include "mem.h"
#include "forward.h"
#include "model.h"
#include "pool.h"
#include "runner.h"
#include "tokenizer.h"
#include "pull.h"

static const struct cli_command commands[] = {
	{ "pull", cmd_pull },
	{ "info", cmd_info },
	{ "tokenize", cmd_tokenize },
	{ "run", cmd_run },
	{ "bench", cmd_bench },
	{ "perplexity", cmd_perplexity },
	{ "template", cmd_template },
	{ "serve", cmd_serve },
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

/* Reads f to its end into a NUL-terminated ing_malloc'd buffer. */
static char *read_stream(FILE *f, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = ing_malloc(cap + 1);
	while (buf) {
		n += fread(buf + n, 1, cap - n, f);
		if (n < cap)
			break;
		char *nb = cap < ((size_t)1 << 40) ? ing_realloc(buf, cap * 2 + 1) : NULL;
		if (!nb)
			ing_free(buf);
		buf = nb;
		cap *= 2;
	}
	if (buf && ferror(f)) {
		ing_free(buf);
		buf = NULL;
	}
	if (buf) {
		buf[n] = '\0';
		*len = n;
	}
	return buf;
}

char *cli_read_stdin(size_t *len) { return read_stream(stdin, len); }

char *cli_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = read_stream(f, len);
	fclose(f);
	return buf;
}

bool cli_help_asked(int argc, char **argv)
{
	return argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));
}

const char *cli_plural(long n)
{
	return n == 1 ? "" : "s";
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

int cli_parse_int(const char *s, long lo, long hi, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (end == s || *end || errno || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

int cli_parse_list(const char *s, int *out, int max, int (*item)(const char *tok, void *ctx),
		   void *ctx)
{
	int n = 0;
	char buf[256];
	if (strlen(s) >= sizeof buf)
		return -1;
	snprintf(buf, sizeof buf, "%s", s);
	for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
		int v = n < max ? item(tok, ctx) : -1;
		if (v < 0)
			return -1;
		out[n++] = v;
	}
	return n > 0 ? n : -1;
}

struct int_range {
	long lo, hi;
};

static int int_item(const char *tok, void *ctx)
{
	const struct int_range *r = ctx;
	int v;
	return cli_parse_int(tok, r->lo, r->hi, &v) ? -1 : v;
}

int cli_parse_ints(const char *s, int *out, int max, long lo, long hi)
{
	struct int_range r = { lo, hi };
	return lo < 0 ? -1 : cli_parse_list(s, out, max, int_item, &r);
}

void cli_bad_value(const char *who, const struct option *lo, int opt, const char *arg,
		   const char *want)
{
	const char *name = NULL;
	for (; lo && lo->name; lo++)
		if (!lo->flag && lo->val == opt) {
			name = lo->name;
			break;
		}
	if (name)
		fprintf(stderr, "%s: bad value '%s' for --%s", who, arg, name);
	else
		fprintf(stderr, "%s: bad value '%s' for -%c", who, arg, opt);
	if (want)
		fprintf(stderr, " (%s)", want);
	fputc('\n', stderr);
}

/* Default context: the trained length, capped so the KV cache stays under
 * a quarter of physical memory. */
static int64_t default_ctx(const struct model *m, enum qtype kv_type)
{
	const struct model_hparams *hp = &m->hp;
	double per_pos = fwd_kv_bytes_per_pos(hp, kv_type);
	double mem = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
	int64_t cap = (int64_t)(mem / 4 / per_pos);
	int64_t n = hp->ctx_train < cap ? hp->ctx_train : cap;
	return n > 0 ? n : 512;
}

int cli_session_open(struct cli_session *s, const char *path, struct fwd_config *fc,
		     int threads, int runner_kind, const char *who, ing_err *err)
{
	int rc = model_open(path, &s->m, err);
	if (rc)
		return rc;
	if (cli_tokenizer_open(path, &s->tk))
		return ing_err_set(err, ING_ERR_FORMAT, "cannot load the vocabulary");
	fc->n_threads = cli_threads(threads);
	if (fc->n_ctx <= 0)
		fc->n_ctx = default_ctx(s->m, fc->kv_type);
	if ((rc = fwd_create(s->m, fc, &s->f, err)) ||
	    (rc = pool_create(fc->n_threads, 1, &s->pool, err)))
		return rc;
	if (err->msg[0])
		fprintf(stderr, "%s: note: %s\n", who, err->msg);
	ing_err_clear(err);
	return runner_create((enum runner_kind)runner_kind, s->f, s->pool, &s->r, err);
}

void cli_session_close(struct cli_session *s)
{
	runner_destroy(s->r);
	pool_destroy(s->pool);
	fwd_destroy(s->f);
	tokenizer_close(s->tk);
	model_close(s->m);
	*s = (struct cli_session){ 0 };
}
