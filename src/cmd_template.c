/* cmd_template.c — `ingot template TEMPLATE.jinja [CONTEXT.json]`.
 *
 * Renders a chat template with the variables of a JSON object read from
 * CONTEXT.json or stdin and writes the result to stdout exactly (nothing
 * added). On failure prints the error to stderr (for raise_exception, its
 * message) and exits 1. INGOT_TEMPLATE_NOW="YYYY-MM-DD HH:MM:SS" fixes the
 * clock of strftime_now. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "mem.h"
#include "template.h"

/* f: stdout for --help, else stderr; returns 2, the usage error's status */
static int usage(FILE *f)
{
	fprintf(f, "usage: ingot template TEMPLATE.jinja [CONTEXT.json]\n"
		   "  renders TEMPLATE with the JSON object CONTEXT (default: stdin)\n");
	return 2;
}

int cmd_template(int argc, char **argv)
{
	if (cli_help_asked(argc, argv))
		return usage(stdout), 0;
	if (argc < 2 || argc > 3)
		return usage(stderr);
	size_t tlen = 0, clen = 0, olen = 0;
	char *src = cli_read_file(argv[1], &tlen), *ctx = NULL, *out = NULL;
	struct template *t = NULL;
	ing_err err = { 0 };
	int status = 1;
	if (!src) {
		fprintf(stderr, "ingot template: cannot read %s: %s\n", argv[1], strerror(errno));
		goto done;
	}
	ctx = argc == 3 ? cli_read_file(argv[2], &clen) : cli_read_stdin(&clen);
	if (!ctx) {
		fprintf(stderr, "ingot template: cannot read the context %s\n",
			argc == 3 ? argv[2] : "from stdin");
		goto done;
	}
	if (template_parse(src, tlen, &t, &err) ||
	    template_render_json(t, ctx, clen, NULL, &out, &olen, &err)) {
		fprintf(stderr, "ingot template: %s\n", err.msg);
		goto done;
	}
	if (fwrite(out, 1, olen, stdout) != olen || fflush(stdout)) {
		fprintf(stderr, "ingot template: write failed\n");
		goto done;
	}
	status = 0;
done:
	ing_free(out);
	template_free(t);
	ing_free(ctx);
	ing_free(src);
	return status;
}
