/* test_fuzz_regress.c — the fuzz harnesses as an ordinary test.
 *
 * Replays every file under fuzz/regress/<target>/ (inputs that once
 * crashed a harness, minimized, kept after the fix) through the same
 * harness bodies libFuzzer runs, then the seeds built in memory
 * (tests/harness_seeds.c): tiny models, cut-down vocabularies, the shared
 * conformance texts. A broken invariant aborts, which fails the test with
 * the input's name printed just before. At the end every byte the library
 * allocated must be freed. Run from the repository root (tests/run.sh
 * does); $INGOT_FUZZ_REGRESS overrides the directory. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "harness_fuzz.h"
#include "mem.h"

typedef int (*harness_fn)(const uint8_t *, size_t);

static uint8_t *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	struct stat st;
	uint8_t *buf = NULL;
	if (fstat(fileno(f), &st) == 0 && (buf = malloc((size_t)st.st_size + 1)) &&
	    fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	*len = buf ? (size_t)st.st_size : 0;
	return buf;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs fn on every regular file in dir (sorted); returns how many. */
static int replay_dir(const char *dir, harness_fn fn)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	char **names = NULL;
	size_t n = 0, cap = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap && !(names = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names)))
			abort();
		names[n++] = strdup(e->d_name);
	}
	closedir(d);
	if (n > 1)
		qsort(names, n, sizeof *names, name_cmp);
	int count = 0;
	for (size_t i = 0; i < n; i++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		struct stat st;
		size_t len;
		uint8_t *buf;
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (buf = read_all(path, &len))) {
			fprintf(stderr, "replay %s (%zu bytes)\n", path, len);
			fn(buf, len);
			free(buf);
			count++;
		}
		free(names[i]);
	}
	free(names);
	return count;
}

struct seed_run {
	harness_fn fn;
	int count;
};

static void run_seed(const char *name, const uint8_t *data, size_t size, void *ctx)
{
	struct seed_run *r = ctx;
	fprintf(stderr, "seed %s (%zu bytes)\n", name, size);
	/* a copy of exactly size bytes, so ASan sees reads past the input */
	uint8_t *copy = malloc(size ? size : 1);
	if (!copy)
		abort();
	memcpy(copy, data, size);
	r->fn(copy, size);
	free(copy);
	r->count++;
}

int main(void)
{
	const char *root = getenv("INGOT_FUZZ_REGRESS");
	if (!root || !*root)
		root = "fuzz/regress";
	char dir[2048];
	static const struct { const char *name; harness_fn fn; } targets[] = {
		{"gguf", harness_gguf}, {"tokenizer", harness_tokenizer}, {"grammar", harness_grammar},
		{"request", harness_request}, {"template", harness_template},
		{"http", harness_http},
	};
	for (size_t i = 0; i < sizeof targets / sizeof *targets; i++) {
		snprintf(dir, sizeof dir, "%s/%s", root, targets[i].name);
		int n = replay_dir(dir, targets[i].fn);
		printf("%s: %d regression inputs replayed\n", targets[i].name, n);
	}

	struct seed_run gguf = {harness_gguf, 0}, tok = {harness_tokenizer, 0};
	struct seed_run gram = {harness_grammar, 0};
	harness_gguf_seeds(run_seed, &gguf);
	harness_tokenizer_seeds(run_seed, &tok);
	harness_grammar_seeds(run_seed, &gram);
	printf("seeds: %d GGUF, %d tokenizer, %d grammar\n", gguf.count, tok.count, gram.count);
	CHECK(gram.count >= 5, "only %d grammar seeds", gram.count);
	struct seed_run req = {harness_request, 0}, tpl = {harness_template, 0},
			http = {harness_http, 0};
	harness_request_seeds(run_seed, &req);
	harness_template_seeds(run_seed, &tpl);
	harness_http_seeds(run_seed, &http);
	printf("request seeds: %d request, %d template, %d HTTP\n", req.count, tpl.count, http.count);
	CHECK(gguf.count >= 6, "only %d GGUF seeds", gguf.count);
	CHECK(tok.count > 0, "no tokenizer seeds (is %s/vocab there?)", check_testdata_dir());
	CHECK(req.count > 0 && http.count > 0, "no request or HTTP seeds");
	CHECK(tpl.count > 0, "no template seeds (is %s/templates there?)", check_testdata_dir());

	harness_http_cleanup();
	harness_api_cleanup();
	harness_tokenizer_cleanup();
	harness_grammar_cleanup();
	CHECK(ing_mem_live() == 0, "%zu bytes still allocated after the harnesses", ing_mem_live());
	return check_summary("test_fuzz_regress");
}
