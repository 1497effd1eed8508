/* main.c — the ingot command line.
 *
 *   ingot pull                         install the default model, print its path
 *   ingot info [-m MODEL]              architecture, hyperparameters, tensors
 *   ingot tokenize [-m MODEL] [-p TEXT] [--special]
 *
 * Every command that takes -m falls back to the default model. Only this
 * file prints diagnostics and chooses exit codes: 0 success, 1 runtime
 * error, 2 usage error. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "version.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ingot COMMAND [options]\n"
		"\n"
		"commands:\n"
		"  pull                     install the default model (Gemma 3 270M Q4_K_M), print its path\n"
		"  info [-m MODEL]          architecture, hyperparameters, tensor types and sizes\n"
		"  tokenize [-m MODEL] [-p TEXT] [--special]\n"
		"                           token ids of TEXT (or of stdin, exactly as given)\n"
		"  run -p TEXT [options]    generate text (ingot run --help for options)\n"
		"  bench [options]          decode/prefill speed vs memory bandwidth, per runner\n"
		"  bench serve [options]    load generator against an OpenAI-compatible server\n"
		"  bench spec [options]     speculative decoding: acceptance and speedup per workload\n"
		"  perplexity -f FILE [--ctx N]\n"
		"                           perplexity on FILE, computed as llama.cpp's llama-perplexity\n"
		"  template TPL.jinja < CONTEXT.json   render a chat template with a JSON context\n"
		"  serve [options]          OpenAI-compatible HTTP server (ingot serve --help)\n"
		"\n"
		"-m defaults to the model installed by `ingot pull`; `ingot COMMAND --help` lists a\n"
		"command's options; `ingot --version` prints the version.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("ingot %s\n", INGOT_VERSION);
		return 0;
	}
	const struct cli_command *cmd = cli_command_find(argv[1]);
	if (!cmd) {
		fprintf(stderr, "ingot: unknown command '%s'\n\n", argv[1]);
		usage(stderr);
		return 2;
	}
	return cmd->run(argc - 1, argv + 1);
}
