/* cli.h — subcommands of the ingot binary and the helpers they share.
 *
 * Each subcommand is `int cmd_NAME(int argc, char **argv)` (argv[0] is the
 * command name) returning the process exit status: 0 ok, 1 failure, 2 usage.
 * Subcommands print their own errors to stderr. */
#ifndef INGOT_CLI_H
#define INGOT_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

struct cli_command {
	const char *name;
	int (*run)(int argc, char **argv);
};

/* Command by name, or NULL. */
const struct cli_command *cli_command_find(const char *name);

/* Resolves the model path: the -m argument when given, else the default
 * model; prints how to get it and returns -1 when it is missing. */
int cli_model_path(const char *arg, char *buf, size_t cap);

/* Thread count to use: physical cores when requested <= 0, else requested
 * capped (with a note on stderr) at the CPUs we may run on. */
int cli_threads(int requested);

/* Whether the command's first argument (argv[1]; argv[0] is its name) is
 * -h or --help: the command then prints its usage to stdout and exits 0,
 * as a bad option prints it to stderr and exits 2. Only the first, so that
 * `run -p --help` still takes "--help" as its prompt. */
bool cli_help_asked(int argc, char **argv);

/* "s" after a count n other than 1 ("%d thread%s"), else "". */
const char *cli_plural(long n);

/* A decimal integer in [lo, hi] (lo, hi within int), the whole of s, into
 * *out: 0, or -1 (out untouched) for anything else. */
int cli_parse_int(const char *s, long lo, long hi, int *out);

/* A comma-separated list of at most max items (s under 256 bytes) into
 * out, each the value item(token, ctx) returns (-1: not an item): how
 * many, or -1. */
int cli_parse_list(const char *s, int *out, int max, int (*item)(const char *tok, void *ctx),
		   void *ctx);

/* A list of such integers in [lo, hi] (lo >= 0: a negative value is the
 * item parser's failure): how many, or -1. */
int cli_parse_ints(const char *s, int *out, int max, long lo, long hi);

struct option;

/* Prints "WHO: bad value 'ARG' for --NAME" to stderr, NAME being the long
 * name lo gives the option getopt_long returned as opt (or "-C" for a
 * short option without one), then " (WANT)" when want is not NULL. */
void cli_bad_value(const char *who, const struct option *lo, int opt, const char *arg,
		   const char *want);

/* Reads all of stdin / the file at path into a NUL-terminated buffer the
 * caller frees with ing_free(); *len excludes the NUL. NULL on failure. */
char *cli_read_stdin(size_t *len);
char *cli_read_file(const char *path, size_t *len);

struct tokenizer;
struct model;
struct fwd;
struct fwd_config;
struct pool;
struct runner;

/* What run, perplexity and friends hold: the model, its vocabulary, a
 * forward context, the thread pool and a runner over them. */
struct cli_session {
	struct model *m;
	struct tokenizer *tk;
	struct fwd *f;
	struct pool *pool;
	struct runner *r;
};

/* Opens everything for the model at path. fc->n_ctx <= 0 picks the default
 * context (trained length capped by memory); fc->n_threads is set from
 * `threads` (cli_threads). `who` prefixes notes on stderr. On failure err
 * says why; close with cli_session_close() either way. */
int cli_session_open(struct cli_session *s, const char *path, struct fwd_config *fc,
		     int threads, int runner_kind, const char *who, ing_err *err);
void cli_session_close(struct cli_session *s);

/* Opens the vocabulary of the model file at path; prints the error and
 * returns -1 on failure. */
int cli_tokenizer_open(const char *path, struct tokenizer **tk);

int cmd_pull(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_bench_serve(int argc, char **argv);
int cmd_bench_spec(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_serve(int argc, char **argv);

#endif
