/* make_seeds.c — writes the harness seeds (tests/harness_seeds.c) as files.
 *
 *   make_seeds gguf DIR        one .gguf per GGUF seed
 *   make_seeds tokenizer DIR   one file per (vocabulary, text) seed
 *   make_seeds grammar DIR     one file per (schema, drive bytes) seed
 *   make_seeds request|template|http DIR   (tests/harness_seeds_api.c)
 *
 * Exit status 0, or 1 when a file cannot be written. */
#include <stdio.h>
#include <string.h>

#include "harness_fuzz.h"

struct out {
	const char *dir;
	const char *ext;
	int failed, written;
};

static void write_seed(const char *name, const uint8_t *data, size_t size, void *ctx)
{
	struct out *o = ctx;
	char path[4096];
	snprintf(path, sizeof path, "%s/%s%s", o->dir, name, o->ext);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(data, 1, size, f) != size) {
		perror(path);
		o->failed = 1;
	} else {
		o->written++;
	}
	if (f && fclose(f) != 0)
		o->failed = 1;
}

int main(int argc, char **argv)
{
	static const struct { const char *name; void (*fn)(harness_seed_fn, void *); } kinds[] = {
		{"gguf", harness_gguf_seeds}, {"tokenizer", harness_tokenizer_seeds},
		{"request", harness_request_seeds}, {"template", harness_template_seeds},
		{"http", harness_http_seeds}, {"grammar", harness_grammar_seeds},
	};
	size_t k = 0;
	while (argc == 3 && k < sizeof kinds / sizeof *kinds && strcmp(argv[1], kinds[k].name))
		k++;
	if (argc != 3 || k == sizeof kinds / sizeof *kinds) {
		fprintf(stderr, "usage: %s gguf|tokenizer|grammar|request|template|http DIR\n", argv[0]);
		return 2;
	}
	struct out o = {argv[2], k == 0 ? ".gguf" : "", 0, 0};
	kinds[k].fn(write_seed, &o);
	fprintf(stderr, "make_seeds: %d %s seeds in %s\n", o.written, argv[1], o.dir);
	return o.failed;
}
