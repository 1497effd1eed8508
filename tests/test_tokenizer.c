/* test_tokenizer.c — tokenizer conformance and behaviour.
 *
 * Conformance: every case of every vocabulary in testdata/vocab gives
 * exactly the ids llama.cpp's reference files list (no BOS, no special
 * parsing); SentencePiece vocabularies decode back to the input. Then, on
 * the default model (Gemma 3): special-token parsing and BOS only on
 * request, the EOG set, the streaming decoder on a 4-byte character split
 * over byte tokens, 1 MB of text without spaces, invalid UTF-8, concurrent
 * encodes, and allocation failures walked over open and encode. */
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "clock.h"
#include "gguf.h"
#include "gguf_writer.h"
#include "mem.h"
#include "tokenizer.h"
#include "tokenizer_int.h" /* the pre-tokenizer table, tested directly */

static struct tokenizer *open_vocab(const char *path, double *secs)
{
	ing_err err = {0};
	struct gguf *g;
	struct tokenizer *tk = NULL;
	if (gguf_open(path, &g, &err)) {
		CHECK(0, "gguf_open %s: %s", path, err.msg);
		return NULL;
	}
	double t0 = clock_now_s();
	int rc = tokenizer_open(g, &tk, &err);
	if (secs)
		*secs = clock_now_s() - t0;
	CHECK(rc == ING_OK, "tokenizer_open %s: %s", path, err.msg);
	gguf_close(g);
	return tk;
}

static void print_escaped(const char *s, size_t n)
{
	for (size_t i = 0; i < n && i < 120; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\n')
			fputs("\\n", stderr);
		else if (c < 0x20)
			fprintf(stderr, "\\x%02x", c);
		else
			fputc(c, stderr);
	}
}

/* Compares ids with one line of expected ids. */
static bool ids_match(const struct token_ids *ids, const char *line)
{
	size_t i = 0;
	char *end;
	for (const char *p = line;; p = end) {
		long v = strtol(p, &end, 10);
		if (end == p)
			break;
		if (i >= ids->n || ids->ids[i] != v)
			return false;
		i++;
	}
	return i == ids->n;
}

static void print_ids(const char *what, const struct token_ids *ids)
{
	fprintf(stderr, "    %s:", what);
	for (size_t i = 0; i < ids->n; i++)
		fprintf(stderr, " %d", ids->ids[i]);
	fputc('\n', stderr);
}

/* Decoded text equals the input, allowing for one added leading space. */
static bool same_but_leading_space(const char *a, size_t an, const char *b, size_t bn)
{
	if (an == bn)
		return memcmp(a, b, an) == 0;
	if (an == bn + 1 && a[0] == ' ')
		return memcmp(a + 1, b, bn) == 0;
	if (bn == an + 1 && b[0] == ' ')
		return memcmp(a, b + 1, an) == 0;
	return false;
}

static void check_roundtrip(const struct tokenizer *tk, const char *name, size_t k, const char *text,
			    size_t len, const struct token_ids *ids)
{
	char *dec;
	size_t dn;
	ing_err err = {0};
	int rc = tokenizer_decode(tk, ids->ids, ids->n, 0, &dec, &dn, &err);
	CHECK(rc == ING_OK, "%s case %zu: decode: %s", name, k, err.msg);
	if (rc)
		return;
	bool ok = same_but_leading_space(dec, dn, text, len);
	CHECK(ok, "%s case %zu: decode does not give the input back", name, k);
	if (!ok) {
		fputs("    got: '", stderr);
		print_escaped(dec, dn);
		fputs("'\n", stderr);
	}
	ing_free(dec);
}

/* Runs all cases of one vocabulary; returns the number that failed. */
static int run_vocab(const char *dir, const char *name)
{
	char path[1300], inp[1310], out[1310];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	snprintf(inp, sizeof inp, "%s.inp", path);
	snprintf(out, sizeof out, "%s.out", path);
	size_t in_len, out_len;
	char *in_text = check_read_file(inp, &in_len), *out_text = check_read_file(out, &out_len);
	double secs = 0;
	struct tokenizer *tk = open_vocab(path, &secs);
	CHECK(in_text && out_text, "%s: cannot read .inp/.out", name);
	if (!tk || !in_text || !out_text) {
		free(in_text);
		free(out_text);
		tokenizer_close(tk);
		return 1;
	}
	static const char sep[] = "\n__ggml_vocab_test__\n";
	int failed = 0;
	size_t k = 0;
	char *line = out_text;
	for (char *p = in_text, *q; (q = strstr(p, sep)); p = q + strlen(sep), k++) {
		char *nl = strchr(line, '\n');
		CHECK(nl != NULL, "%s: fewer expected lines than cases", name);
		if (!nl)
			break;
		*nl = '\0';
		struct token_ids ids = {0};
		ing_err err = {0};
		int rc = tokenizer_encode(tk, p, (size_t)(q - p), 0, &ids, &err);
		bool ok = rc == ING_OK && ids_match(&ids, line);
		CHECK(ok, "%s case %zu: ids differ (%s)", name, k, err.msg);
		if (!ok) {
			failed++;
			fputs("    text: '", stderr);
			print_escaped(p, (size_t)(q - p));
			fprintf(stderr, "'\n    want: %s\n", line);
			print_ids("got ", &ids);
		}
		if (tokenizer_kind(tk) == TOKENIZER_SPM)
			check_roundtrip(tk, name, k, p, (size_t)(q - p), &ids);
		token_ids_free(&ids);
		line = nl + 1;
	}
	CHECK(k > 0, "%s: no cases", name);
	printf("%-32s %2zu cases, %d failed, pre=%s, open %.3f s\n", name, k, failed,
	       tokenizer_pre_name(tk), secs);
	free(in_text);
	free(out_text);
	tokenizer_close(tk);
	return failed;
}

static void test_conformance(void)
{
	char dir[1024];
	snprintf(dir, sizeof dir, "%s/vocab", check_testdata_dir());
	DIR *d = opendir(dir);
	CHECK(d != NULL, "cannot open %s", dir);
	if (!d)
		return;
	int n = 0;
	for (struct dirent *e; (e = readdir(d));) {
		size_t len = strlen(e->d_name);
		if (len > 5 && strcmp(e->d_name + len - 5, ".gguf") == 0) {
			run_vocab(dir, e->d_name);
			n++;
		}
	}
	closedir(d);
	CHECK(n >= 6, "only %d vocabularies in %s", n, dir);
}

static bool contains(const struct token_ids *ids, int32_t id)
{
	for (size_t i = 0; i < ids->n; i++)
		if (ids->ids[i] == id)
			return true;
	return false;
}

static void encode(const struct tokenizer *tk, const char *s, unsigned flags, struct token_ids *ids)
{
	ing_err err = {0};
	ids->n = 0;
	int rc = tokenizer_encode(tk, s, strlen(s), flags, ids, &err);
	CHECK(rc == ING_OK, "encode '%s': %s", s, err.msg);
}

static void test_special(const struct tokenizer *tk)
{
	int32_t sot = tokenizer_find_token(tk, "<start_of_turn>");
	int32_t eot = tokenizer_find_token(tk, "<end_of_turn>");
	CHECK(sot >= 0 && eot >= 0, "gemma has <start_of_turn> %d and <end_of_turn> %d", sot, eot);
	CHECK(tokenizer_find_token(tk, "<no such token>") == TOKEN_NONE, "unknown text gives TOKEN_NONE");

	struct token_ids ids = {0};
	encode(tk, "<start_of_turn>user", TOKENIZER_PARSE_SPECIAL, &ids);
	CHECK(ids.n >= 2 && ids.ids[0] == sot, "parsed <start_of_turn> is one token first");
	CHECK(ids.n == 2, "<start_of_turn>user is 2 tokens with parsing, got %zu", ids.n);
	encode(tk, "<start_of_turn>user", 0, &ids);
	CHECK(!contains(&ids, sot), "without the flag <start_of_turn> is plain text");
	CHECK(ids.n > 2, "plain <start_of_turn>user takes several tokens, got %zu", ids.n);

	encode(tk, "Hello", TOKENIZER_ADD_SPECIAL, &ids);
	CHECK(tokenizer_adds_bos(tk) && ids.n > 0 && ids.ids[0] == tokenizer_bos(tk), "BOS added with the flag");
	encode(tk, "Hello", 0, &ids);
	CHECK(ids.n > 0 && ids.ids[0] != tokenizer_bos(tk), "no BOS without the flag");
	encode(tk, "", TOKENIZER_ADD_SPECIAL, &ids);
	CHECK(ids.n == 1 && ids.ids[0] == tokenizer_bos(tk), "empty text with the flag is just BOS");
	encode(tk, "", 0, &ids);
	CHECK(ids.n == 0, "empty text gives no tokens");

	CHECK(tokenizer_eot(tk) == eot, "EOT is <end_of_turn> (%d, want %d)", tokenizer_eot(tk), eot);
	CHECK(tokenizer_is_eog(tk, eot), "<end_of_turn> ends generation");
	CHECK(tokenizer_is_eog(tk, tokenizer_eos(tk)), "EOS ends generation");
	CHECK(!tokenizer_is_eog(tk, tokenizer_bos(tk)), "BOS does not end generation");
	CHECK(!tokenizer_is_eog(tk, -1) && !tokenizer_is_eog(tk, tokenizer_n_vocab(tk)), "out of range is not EOG");
	CHECK(tokenizer_is_control(tk, sot), "<start_of_turn> is control");

	/* user-defined tokens are split out even without the flag */
	int32_t nl2 = tokenizer_find_token(tk, "\n\n"), strike = tokenizer_find_token(tk, "</s>");
	encode(tk, "a\n\nb</s>c", 0, &ids);
	CHECK(nl2 >= 0 && strike >= 0 && contains(&ids, nl2) && contains(&ids, strike),
	      "user-defined \\n\\n and </s> are single tokens");
	CHECK(!tokenizer_is_eog(tk, strike), "Gemma's HTML </s> does not end generation");

	int32_t chat[] = {tokenizer_bos(tk), sot};
	char *s;
	size_t n;
	ing_err err = {0};
	CHECK(tokenizer_decode(tk, chat, 2, 0, &s, &n, &err) == ING_OK && n == 0, "control tokens hidden");
	ing_free(s);
	CHECK(tokenizer_decode(tk, chat, 2, TOKENIZER_RENDER_SPECIAL, &s, &n, &err) == ING_OK &&
		      strcmp(s, "<bos><start_of_turn>") == 0,
	      "control tokens rendered with the flag");
	ing_free(s);
	int32_t bad = tokenizer_n_vocab(tk);
	CHECK(tokenizer_decode(tk, &bad, 1, 0, &s, &n, &err) == ING_ERR_RANGE, "decode rejects bad ids");
	token_ids_free(&ids);
}

static void test_stream(const struct tokenizer *tk)
{
	static const unsigned char llama[] = {0xF0, 0x9F, 0xA6, 0x99}; /* U+1F999 */
	int32_t ids[4];
	for (int i = 0; i < 4; i++) {
		char name[8];
		snprintf(name, sizeof name, "<0x%02X>", llama[i]);
		ids[i] = tokenizer_find_token(tk, name);
		CHECK(ids[i] >= 0, "byte token %s exists", name);
	}
	struct tokenizer_stream st;
	ing_err err = {0};
	CHECK(tokenizer_stream_init(&st, tk, 0, &err) == ING_OK, "stream init: %s", err.msg);
	const char *out;
	size_t n;
	for (int i = 0; i < 3; i++) {
		tokenizer_stream_feed(&st, ids[i], &out, &n, &err);
		CHECK(n == 0, "byte %d of a 4-byte char gives nothing yet (%zu bytes)", i, n);
	}
	tokenizer_stream_feed(&st, ids[3], &out, &n, &err);
	CHECK(n == 4 && memcmp(out, llama, 4) == 0, "the 4th byte completes the char (%zu bytes)", n);
	tokenizer_stream_flush(&st, &out, &n);
	CHECK(n == 0, "nothing held after a complete char");

	/* an unfinished char followed by text: U+FFFD, then the text */
	int32_t hi = tokenizer_find_token(tk, "Hello");
	tokenizer_stream_feed(&st, ids[0], &out, &n, &err);
	CHECK(n == 0, "lead byte held");
	tokenizer_stream_feed(&st, hi, &out, &n, &err);
	CHECK(n == 8 && memcmp(out, "\xef\xbf\xbdHello", 8) == 0, "broken char becomes U+FFFD");
	tokenizer_stream_feed(&st, ids[0], &out, &n, &err);
	tokenizer_stream_flush(&st, &out, &n);
	CHECK(n == 3 && memcmp(out, "\xef\xbf\xbd", 3) == 0, "flush turns held bytes into U+FFFD");
	CHECK(tokenizer_stream_feed(&st, -5, &out, &n, &err) == ING_ERR_RANGE, "feed rejects bad ids");

	/* streaming a real encode gives the decoded text */
	static const char text[] = "Grüße 🦙 from Zürich — 日本語のテキスト";
	struct token_ids t = {0};
	encode(tk, text, 0, &t);
	char joined[256];
	size_t jn = 0;
	for (size_t i = 0; i < t.n; i++) {
		tokenizer_stream_feed(&st, t.ids[i], &out, &n, &err);
		if (jn + n < sizeof joined) {
			memcpy(joined + jn, out, n);
			jn += n;
		}
	}
	tokenizer_stream_flush(&st, &out, &n);
	CHECK(jn == strlen(text) && memcmp(joined, text, jn) == 0, "stream gives the text back");
	token_ids_free(&t);
	tokenizer_stream_free(&st);
}

/* 1 MB of lowercase letters with no spaces, deterministic. */
static char *make_nospace(size_t n)
{
	char *s = malloc(n + 1);
	uint32_t x = 12345;
	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		s[i] = (char)('a' + (x >> 16) % 26);
	}
	s[n] = '\0';
	return s;
}

static void test_big(const struct tokenizer *tk, const char *name)
{
	size_t n = 1 << 20;
	char *text = make_nospace(n);
	struct token_ids ids = {0};
	ing_err err = {0};
	double t0 = clock_now_s();
	int rc = tokenizer_encode(tk, text, n, 0, &ids, &err);
	double secs = clock_now_s() - t0;
	CHECK(rc == ING_OK, "%s: 1 MB encode: %s", name, err.msg);
	printf("%s: 1 MB without spaces -> %zu tokens in %.2f s\n", name, ids.n, secs);
	char *dec;
	size_t dn;
	rc = tokenizer_decode(tk, ids.ids, ids.n, 0, &dec, &dn, &err);
	CHECK(rc == ING_OK && dn == n && memcmp(dec, text, n) == 0, "%s: 1 MB decodes back", name);
	if (!rc)
		ing_free(dec);
	token_ids_free(&ids);
	free(text);
}

static void test_invalid_utf8(const struct tokenizer *tk, const char *name)
{
	static const char *const cases[] = {
		"\xff", "\xc3", "a\xe2\x82", "\xf0\x9f\xa6", "\x80\x80" "abc", "\xed\xa0\x80", "\xc0\xaf",
		"\xf8\x88\x80\x80\x80", "ok \xfe\xff ok", "\xf4\x90\x80\x80",
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		struct token_ids ids = {0};
		ing_err err = {0};
		int rc = tokenizer_encode(tk, cases[i], strlen(cases[i]), 0, &ids, &err);
		CHECK(rc == ING_OK && ids.n > 0, "%s: invalid UTF-8 case %zu encodes", name, i);
		for (size_t k = 0; k < ids.n; k++)
			CHECK(ids.ids[k] >= 0 && ids.ids[k] < tokenizer_n_vocab(tk), "%s: id in range", name);
		/* SPM byte fallback keeps every byte (llama.cpp's character split
		 * swallows a following space after bytes 0xF8..0xFF, hence no ' ') */
		if (tokenizer_kind(tk) == TOKENIZER_SPM && !strchr(cases[i], ' ')) {
			char *dec;
			size_t dn;
			rc = tokenizer_decode(tk, ids.ids, ids.n, 0, &dec, &dn, &err);
			CHECK(rc == ING_OK && dn == strlen(cases[i]) && memcmp(dec, cases[i], dn) == 0,
			      "%s: invalid UTF-8 case %zu round-trips", name, i);
			if (!rc)
				ing_free(dec);
		}
		token_ids_free(&ids);
	}
	/* random bytes */
	char buf[4096];
	uint32_t x = 99;
	for (size_t i = 0; i < sizeof buf; i++) {
		x = x * 1664525u + 1013904223u;
		buf[i] = (char)(x >> 24);
	}
	struct token_ids ids = {0};
	ing_err err = {0};
	CHECK(tokenizer_encode(tk, buf, sizeof buf, TOKENIZER_PARSE_SPECIAL, &ids, &err) == ING_OK,
	      "%s: random bytes encode", name);
	token_ids_free(&ids);
}

struct thread_arg {
	const struct tokenizer *tk;
	const char *text;
	const struct token_ids *want;
	int ok;
};

static void *thread_main(void *p)
{
	struct thread_arg *a = p;
	a->ok = 1;
	for (int r = 0; r < 20; r++) {
		struct token_ids ids = {0};
		ing_err err = {0};
		if (tokenizer_encode(a->tk, a->text, strlen(a->text), TOKENIZER_PARSE_SPECIAL, &ids, &err) ||
		    ids.n != a->want->n || memcmp(ids.ids, a->want->ids, ids.n * sizeof *ids.ids))
			a->ok = 0;
		token_ids_free(&ids);
	}
	return NULL;
}

static void test_threads(const struct tokenizer *tk, const char *name)
{
	static const char text[] = "<start_of_turn>user\nWrite a haiku about tokenizers, "
				   "in français and 日本語 — 1234567 times!<end_of_turn>\n";
	struct token_ids want = {0};
	encode(tk, text, TOKENIZER_PARSE_SPECIAL, &want);
	pthread_t th[4];
	struct thread_arg args[4];
	for (int i = 0; i < 4; i++) {
		args[i] = (struct thread_arg){tk, text, &want, 0};
		pthread_create(&th[i], NULL, thread_main, &args[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK(args[i].ok, "%s: thread %d encodes the same ids", name, i);
	}
	token_ids_free(&want);
}

/* Fails the n-th allocation of open and encode for growing n: every
 * failure must be reported and leak nothing. */
static void test_alloc_failures(const char *path, const char *name)
{
	ing_err err = {0};
	struct gguf *g;
	if (gguf_open(path, &g, &err)) {
		CHECK(0, "gguf_open %s: %s", path, err.msg);
		return;
	}
	static const char text[] = "Hello world, héllo wörld! 12345 <s>\n\n  x";
	size_t base = ing_mem_live();
	int opened = 0;
	for (long nth = 1; nth < 5000 && !opened; nth++) {
		struct tokenizer *tk = NULL;
		ing_mem_fail_at(nth, 0);
		int rc = tokenizer_open(g, &tk, &err);
		ing_mem_fail_at(0, 0);
		if (rc == ING_OK) {
			opened = 1;
			for (long k = 1; k < 500; k++) {
				struct token_ids ids = {0};
				ing_mem_fail_at(k, 0);
				int erc = tokenizer_encode(tk, text, strlen(text), TOKENIZER_PARSE_SPECIAL, &ids, &err);
				ing_mem_fail_at(0, 0);
				token_ids_free(&ids);
				if (erc == ING_OK)
					break;
				CHECK(erc == ING_ERR_NOMEM, "%s: encode failure %ld is NOMEM (%d)", name, k, erc);
			}
			tokenizer_close(tk);
		} else {
			CHECK(rc == ING_ERR_NOMEM && tk == NULL, "%s: open failure %ld is NOMEM (%d: %s)", name, nth,
			      rc, err.msg);
		}
		CHECK(ing_mem_live() == base, "%s: no leak after failure %ld (%zu bytes)", name, nth,
		      ing_mem_live() - base);
	}
	CHECK(opened, "%s: open eventually succeeds", name);
	gguf_close(g);
}

/* ---- pre-tokenizers without a vocabulary in testdata ------------------- */

struct words {
	char buf[512];
	size_t n;
};

static int collect_word(void *ctx, const char *w, size_t len, ing_err *err)
{
	struct words *ws = ctx;
	if (ws->n + len + 1 < sizeof ws->buf) {
		memcpy(ws->buf + ws->n, w, len);
		ws->n += len;
		ws->buf[ws->n++] = '|';
	}
	return ING_OK;
}

/* Splits text with pre-tokenizer name; want is the words joined by '|'. */
static void check_split(const char *name, const char *text, const char *want)
{
	const struct pre_tokenizer *pre = tok_pre_find(name);
	CHECK(pre != NULL, "pre-tokenizer %s is known", name);
	if (!pre)
		return;
	void *st = NULL;
	ing_err err = {0};
	int rc = tok_pre_compile(pre, &st, &err);
	CHECK(rc == ING_OK, "%s compiles: %s", name, err.msg);
	if (rc)
		return;
	struct words ws = {.n = 0};
	rc = tok_pre_split(st, text, strlen(text), collect_word, &ws, &err);
	ws.buf[ws.n] = '\0';
	CHECK(rc == ING_OK && strcmp(ws.buf, want) == 0, "%s splits '%s' as '%s', got '%s'", name, text, want,
	      ws.buf);
	tok_pre_free(st);
}

static void test_pre_tokenizers(void)
{
	static const char *const names[] = {
		"default", "gpt-2", "mpt", "olmo", "llama3", "llama-bpe", "dbrx", "smaug-bpe", "chatglm-bpe",
		"qwen2", "stablelm2", "deepseek-llm", "deepseek-coder", "deepseek-v3", "falcon", "starcoder",
		"refact", "command-r", "smollm", "poro-chat", "bloom", "viking", "tekken", "gpt-4o", "llama4",
		"seed-coder", "bailingmoe", "exaone", "codeshell", "jais", "megrez", NULL,
	};
	for (const char *const *n = names; *n; n++)
		check_split(*n, "Hello world", "Hello| world|"); /* compiles, splits words */
	CHECK(tok_pre_find("no-such-pre") == NULL, "unknown pre-tokenizer is NULL");

	check_split("gpt-2", "it's  12345 x\n\ny", "it|'s| | 12345| x|\n|\n|y|");
	check_split("llama3", "I'M 12345 don't\n\n  x", "I|'M| |123|45| don|'t|\n\n| | x|");
	check_split("qwen2", "a 123", "a| |1|2|3|");
	check_split("starcoder", "x=123", "x|=|1|2|3|");
	check_split("falcon", "1234567 a.b", "123|456|7| a|.|b|");
	check_split("deepseek-coder", "ab12 cd!", "ab|1|2| cd|!|");
	check_split("deepseek-llm", "ab 12\nc  ", "ab| |12|\n|c|  |");
	check_split("gpt-4o", "HelloWorld ABCdef", "Hello|World| ABCdef|");
	check_split("tekken", "HelloWorld", "Hello|World|");
	check_split("bloom", "a, b", "a|,| b|");
}

/* ---- small vocabularies built in memory --------------------------------- */

/* Opens a tokenizer over the GGUF w describes; returns the status and
 * leaves the message in err. */
static int open_written(struct gguf_writer *w, struct tokenizer **tk, ing_err *err)
{
	uint8_t *buf;
	size_t size;
	struct gguf *g;
	gguf_writer_finish(w, &buf, &size);
	int rc = gguf_open_memory(buf, size, &g, err);
	CHECK(rc == ING_OK, "written GGUF opens: %s", err->msg);
	*tk = NULL;
	if (!rc) {
		rc = tokenizer_open(g, tk, err);
		gguf_close(g);
	}
	free(buf);
	gguf_writer_free(w);
	return rc;
}

/* A byte-level vocabulary: the 256 byte stand-ins, then "ab", "abc", "xyz"
 * (no merges lead to it), "<|eot_id|>" (control), "<tag>" (user-defined). */
static struct tokenizer *bpe_vocab(const char *pre)
{
	static char chars[256][3];
	const char *toks[261];
	int32_t types[261];
	for (int b = 0; b < 256; b++) {
		size_t n = tok_bpe_byte_char((uint8_t)b, chars[b]);
		chars[b][n] = '\0';
		toks[b] = chars[b];
		types[b] = TOKEN_TYPE_NORMAL;
	}
	const char *extra[] = {"ab", "abc", "xyz", "<|eot_id|>", "<tag>"};
	const int32_t extra_type[] = {1, 1, 1, 3, 4};
	for (int i = 0; i < 5; i++) {
		toks[256 + i] = extra[i];
		types[256 + i] = extra_type[i];
	}
	const char *merges[] = {"a b", "ab c"};
	struct gguf_writer w;
	gguf_writer_init(&w, 3);
	gguf_writer_kv_str(&w, "tokenizer.ggml.model", "gpt2");
	gguf_writer_kv_str(&w, "tokenizer.ggml.pre", pre);
	gguf_writer_kv_arr_str(&w, "tokenizer.ggml.tokens", 261, toks);
	gguf_writer_kv_arr_i32(&w, "tokenizer.ggml.token_type", 261, types);
	gguf_writer_kv_arr_str(&w, "tokenizer.ggml.merges", 2, merges);
	struct tokenizer *tk;
	ing_err err = {0};
	int rc = open_written(&w, &tk, &err);
	CHECK(rc == ING_OK, "byte-level vocab (%s) opens: %s", pre, err.msg);
	return tk;
}

static bool ids_are(const struct token_ids *ids, size_t n, const int32_t *want)
{
	return ids->n == n && memcmp(ids->ids, want, n * sizeof *want) == 0;
}

static void test_bpe_synthetic(void)
{
	struct tokenizer *gpt2 = bpe_vocab("gpt-2"), *llama3 = bpe_vocab("llama3");
	if (!gpt2 || !llama3) {
		tokenizer_close(gpt2);
		tokenizer_close(llama3);
		return;
	}
	struct token_ids ids = {0};
	int32_t x = tokenizer_find_token(gpt2, "x"), y = tokenizer_find_token(gpt2, "y"),
		z = tokenizer_find_token(gpt2, "z");
	encode(gpt2, "abc", 0, &ids);
	CHECK(ids_are(&ids, 1, (int32_t[]){257}), "merges build abc");
	encode(gpt2, "xyz", 0, &ids);
	CHECK(ids_are(&ids, 3, (int32_t[]){x, y, z}), "no merge leads to xyz under gpt-2");
	encode(llama3, "xyz", 0, &ids);
	CHECK(ids_are(&ids, 1, (int32_t[]){258}), "llama3 ignores merges for a whole-word token");

	encode(gpt2, "a<tag>b", 0, &ids);
	CHECK(ids.n == 3 && ids.ids[1] == 260, "user-defined <tag> split out without the flag");
	encode(gpt2, "<|eot_id|>", 0, &ids);
	CHECK(ids.n > 1 && !contains(&ids, 259), "control text is plain without the flag");
	encode(gpt2, "<|eot_id|>", TOKENIZER_PARSE_SPECIAL, &ids);
	CHECK(ids_are(&ids, 1, (int32_t[]){259}), "control text parsed with the flag");
	CHECK(tokenizer_is_eog(gpt2, 259) && tokenizer_eot(gpt2) == 259, "<|eot_id|> is EOT and EOG");

	char *s;
	size_t n;
	ing_err err = {0};
	encode(gpt2, "a ,b 's", 0, &ids);
	CHECK(tokenizer_decode(gpt2, ids.ids, ids.n, 0, &s, &n, &err) == ING_OK && strcmp(s, "a,b's") == 0,
	      "gpt-2 decode cleans spaces before punctuation");
	ing_free(s);
	token_ids_free(&ids);
	tokenizer_close(gpt2);
	tokenizer_close(llama3);
}

/* A SentencePiece vocabulary named name: <unk> <s> </s>, byte tokens,
 * "▁", "▁x", "x", "<|end|>" (control). */
static struct tokenizer *spm_vocab(const char *name)
{
	static char bytes[256][7];
	const char *toks[263];
	int32_t types[263];
	float scores[263];
	const char *head[] = {"<unk>", "<s>", "</s>"};
	const int32_t head_type[] = {2, 3, 3};
	for (int i = 0; i < 3; i++) {
		toks[i] = head[i];
		types[i] = head_type[i];
	}
	for (int b = 0; b < 256; b++) {
		snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
		toks[3 + b] = bytes[b];
		types[3 + b] = TOKEN_TYPE_BYTE;
	}
	const char *tail[] = {"\xe2\x96\x81", "\xe2\x96\x81x", "x", "<|end|>"};
	const int32_t tail_type[] = {1, 1, 1, 3};
	for (int i = 0; i < 4; i++) {
		toks[259 + i] = tail[i];
		types[259 + i] = tail_type[i];
	}
	for (int i = 0; i < 263; i++)
		scores[i] = -(float)i;
	struct gguf_writer w;
	gguf_writer_init(&w, 3);
	gguf_writer_kv_str(&w, "general.name", name);
	gguf_writer_kv_str(&w, "tokenizer.ggml.model", "llama");
	gguf_writer_kv_arr_str(&w, "tokenizer.ggml.tokens", 263, toks);
	gguf_writer_kv_arr_i32(&w, "tokenizer.ggml.token_type", 263, types);
	gguf_writer_kv_arr_f32(&w, "tokenizer.ggml.scores", 263, scores);
	struct tokenizer *tk;
	ing_err err = {0};
	int rc = open_written(&w, &tk, &err);
	CHECK(rc == ING_OK, "SPM vocab (%s) opens: %s", name, err.msg);
	return tk;
}

static void test_spm_synthetic(void)
{
	struct tokenizer *phi3 = spm_vocab("Phi3"), *other = spm_vocab("other");
	if (!phi3 || !other) {
		tokenizer_close(phi3);
		tokenizer_close(other);
		return;
	}
	struct token_ids ids = {0};
	const int32_t sp = 259, spx = 260, end = 262, a = 3 + 'a';
	/* Phi-3 strips the spaces after its special tokens (RSTRIP) */
	encode(phi3, "a<|end|>  x", TOKENIZER_PARSE_SPECIAL | TOKENIZER_ADD_SPECIAL, &ids);
	CHECK(ids_are(&ids, 5, (int32_t[]){1, sp, a, end, spx}), "phi3: rstrip after <|end|>");
	encode(other, "a<|end|>  x", TOKENIZER_PARSE_SPECIAL, &ids);
	CHECK(ids_are(&ids, 6, (int32_t[]){sp, a, end, sp, sp, spx}), "others keep the spaces");
	encode(other, "x", TOKENIZER_ADD_SPECIAL, &ids);
	CHECK(ids_are(&ids, 2, (int32_t[]){1, spx}), "SPM: BOS and the space prefix");

	char *s;
	size_t n;
	ing_err err = {0};
	CHECK(tokenizer_decode(other, ids.ids, ids.n, TOKENIZER_REMOVE_SPECIAL, &s, &n, &err) == ING_OK &&
		      strcmp(s, " x") == 0,
	      "REMOVE_SPECIAL drops BOS and keeps the space, as llama.cpp");
	ing_free(s);
	CHECK(tokenizer_decode(other, ids.ids + 1, 1, 0, &s, &n, &err) == ING_OK && strcmp(s, "x") == 0,
	      "the first token loses its space prefix");
	ing_free(s);
	token_ids_free(&ids);
	tokenizer_close(phi3);
	tokenizer_close(other);
}

/* Metadata the tokenizer must refuse, with the right status. */
static void test_bad_metadata(void)
{
	static const struct {
		const char *model, *pre;
		int ntok, dup, want;
	} cases[] = {
		{NULL, NULL, 3, 0, ING_ERR_NOTFOUND},      /* no tokenizer.ggml.model */
		{"bert", NULL, 3, 0, ING_ERR_UNSUPPORTED},
		{"gpt2", "no-such-pre", 3, 0, ING_ERR_UNSUPPORTED},
		{"llama", NULL, 0, 0, ING_ERR_NOTFOUND},   /* no tokens */
		{"llama", NULL, 3, 1, ING_ERR_FORMAT},     /* duplicate token */
		{"gpt2", "gpt-2", 3, 0, ING_ERR_FORMAT},   /* no merges */
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const char *toks[] = {"a", "b", cases[i].dup ? "a" : "c"};
		struct gguf_writer w;
		gguf_writer_init(&w, 3);
		if (cases[i].model)
			gguf_writer_kv_str(&w, "tokenizer.ggml.model", cases[i].model);
		if (cases[i].pre)
			gguf_writer_kv_str(&w, "tokenizer.ggml.pre", cases[i].pre);
		if (cases[i].ntok)
			gguf_writer_kv_arr_str(&w, "tokenizer.ggml.tokens", (size_t)cases[i].ntok, toks);
		struct tokenizer *tk;
		ing_err err = {0};
		int rc = open_written(&w, &tk, &err);
		CHECK(rc == cases[i].want && tk == NULL, "bad metadata %zu: status %d (%s), want %d", i, rc,
		      err.msg, cases[i].want);
		CHECK(rc == ING_OK || err.msg[0] != '\0', "bad metadata %zu has a message", i);
		tokenizer_close(tk);
	}
}

int main(void)
{
	test_conformance();
	test_pre_tokenizers();
	test_bpe_synthetic();
	test_spm_synthetic();
	test_bad_metadata();

	char path[1024];
	snprintf(path, sizeof path, "%s/vocab/ggml-vocab-gpt-2.gguf", check_testdata_dir());
	struct tokenizer *gpt2 = open_vocab(path, NULL);
	if (gpt2) {
		test_big(gpt2, "gpt-2");
		test_invalid_utf8(gpt2, "gpt-2");
		tokenizer_close(gpt2);
	}
	test_alloc_failures(path, "gpt-2");
	snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf", check_testdata_dir());
	test_alloc_failures(path, "llama-spm");

	const char *model = check_default_model();
	if (model) {
		double secs = 0;
		struct tokenizer *tk = open_vocab(model, &secs);
		if (tk) {
			printf("default model: %d tokens, tokenizer open %.3f s\n", tokenizer_n_vocab(tk), secs);
			test_special(tk);
			test_stream(tk);
			test_big(tk, "gemma-3");
			test_invalid_utf8(tk, "gemma-3");
			test_threads(tk, "gemma-3");
			tokenizer_close(tk);
		}
	} else {
		CHECK(0, "the default model is needed for the special-token tests");
	}
	return check_summary("test_tokenizer");
}
