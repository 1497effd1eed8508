/* cmd_tokenize.c — `ingot tokenize`: token ids of a text, one line. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "gguf.h"
#include "mem.h"
#include "tokenizer.h"

/* f: stdout for --help, else stderr; returns 2, the usage error's status */
static int usage(FILE *f)
{
	fprintf(f, "usage: ingot tokenize [-m MODEL] [-p TEXT] [--special]\n"
		   "  without -p the text is all of stdin, exactly as given\n"
		   "  --special  add BOS/EOS as the model asks and parse special-token text\n");
	return 2;
}

/* Opens only the vocabulary of the model at path. */
int cli_tokenizer_open(const char *path, struct tokenizer **tk)
{
	ing_err err = { 0 };
	struct gguf *g;
	if (gguf_open(path, &g, &err) != ING_OK) {
		fprintf(stderr, "ingot: %s\n", err.msg);
		return -1;
	}
	int rc = tokenizer_open(g, tk, &err);
	gguf_close(g);
	if (rc) {
		fprintf(stderr, "ingot: %s: %s\n", path, err.msg);
		return -1;
	}
	return 0;
}

int cmd_tokenize(int argc, char **argv)
{
	if (cli_help_asked(argc, argv))
		return usage(stdout), 0;
	const char *model_arg = NULL, *prompt = NULL;
	int special = 0, opt;
	static const struct option longopts[] = {
		{ "model", required_argument, 0, 'm' }, { "prompt", required_argument, 0, 'p' },
		{ "special", no_argument, 0, 's' }, { 0 }
	};
	while ((opt = getopt_long(argc, argv, "m:p:", longopts, NULL)) != -1) {
		switch (opt) {
		case 'm': model_arg = optarg; break;
		case 'p': prompt = optarg; break;
		case 's': special = 1; break;
		default: return usage(stderr);
		}
	}
	if (optind != argc)
		return usage(stderr);
	char path[4096];
	struct tokenizer *tk;
	if (cli_model_path(model_arg, path, sizeof path) || cli_tokenizer_open(path, &tk))
		return 1;
	size_t len;
	char *text = prompt ? NULL : cli_read_stdin(&len);
	if (!prompt && !text) {
		fprintf(stderr, "ingot tokenize: cannot read stdin\n");
		tokenizer_close(tk);
		return 1;
	}
	if (prompt)
		len = strlen(prompt);
	struct token_ids ids = { 0 };
	ing_err err = { 0 };
	unsigned flags = special ? TOKENIZER_ADD_SPECIAL | TOKENIZER_PARSE_SPECIAL : 0;
	int rc = tokenizer_encode(tk, prompt ? prompt : text, len, flags, &ids, &err);
	if (rc == ING_OK) {
		for (size_t i = 0; i < ids.n; i++)
			printf(i ? " %d" : "%d", ids.ids[i]);
		printf("\n");
	} else {
		fprintf(stderr, "ingot tokenize: %s\n", err.msg);
	}
	token_ids_free(&ids);
	ing_free(text);
	tokenizer_close(tk);
	return rc ? 1 : 0;
}
