/* harness_grammar.c — fuzz body for the JSON schema compiler and the
 * matcher.
 *
 * Input: a JSON schema text, optionally followed by a NUL byte and "drive"
 * bytes. The schema is compiled; when that succeeds a matcher over a small
 * built-in vocabulary (byte tokens plus a few dozen JSON-ish pieces,
 * created once per process) generates up to 64 tokens, each drive byte
 * choosing among the allowed ones; the drive bytes are also fed as raw
 * bytes to a second matcher. The same schema is compiled again wrapped
 * in a prefix and suffix with grammar_from_alts, and the same text is
 * also compiled as GBNF and as a regular expression and driven alike.
 *
 * Invariants (a violation aborts):
 *   - compilation either succeeds with a grammar or fails with NULL, a
 *     known error code and a non-empty message;
 *   - every token the mask allows is accepted by accept_token, and a token
 *     it refuses is refused (checked on one refused token per step);
 *   - end-of-generation is allowed exactly when can_end says so, and
 *     when done only end-of-generation is allowed;
 *   - a refused byte leaves the matcher's state as it was (can_end and
 *     done unchanged, and the byte refused again). */
#include "harness_fuzz.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "gguf.h"
#include "gguf_writer.h"
#include "grammar.h"
#include "tokenizer.h"

static const char *pieces[] = {
	"{", "}", "[", "]", "\"", ",", ":", " ", "\n", "\n  ", "{\"", "\":", "\": ", "\",", ", \"",
	"\"}", "true", "false", "null", "1", "12", "0", "-", ".5", "e", "E+", "a", "ab", "name",
	"\\", "\\n", "\\u00", "\xc3\xa9", "\xc3", "x\"}", "1,", "2024-", "01", "-0", ":00", "T",
	"Z", "@", ".com", "<tool_call>", "</tool_call>",
};
#define N_PIECES ((int)(sizeof pieces / sizeof *pieces))
#define HV (3 + 256 + N_PIECES)
#define EOS_ID 2

static struct tokenizer *tk;
static struct grammar_vocab *gv;

static void vocab_open(void)
{
	if (gv)
		return;
	static char bytes[256][7];
	const char *toks[HV];
	int32_t types[HV];
	float scores[HV];
	const char *head[] = { "<unk>", "<s>", "</s>" };
	for (int i = 0; i < 3; i++) {
		toks[i] = head[i];
		types[i] = i == 0 ? TOKEN_TYPE_UNKNOWN : TOKEN_TYPE_CONTROL;
	}
	for (int b = 0; b < 256; b++) {
		snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
		toks[3 + b] = bytes[b];
		types[3 + b] = TOKEN_TYPE_BYTE;
	}
	for (int i = 0; i < N_PIECES; i++) {
		toks[259 + i] = pieces[i];
		types[259 + i] = TOKEN_TYPE_NORMAL;
	}
	for (int i = 0; i < HV; i++)
		scores[i] = -(float)i;
	struct gguf_writer w;
	gguf_writer_init(&w, 3);
	gguf_writer_kv_str(&w, "tokenizer.ggml.model", "llama");
	gguf_writer_kv_bool(&w, "tokenizer.ggml.add_space_prefix", false);
	gguf_writer_kv_arr_str(&w, "tokenizer.ggml.tokens", HV, toks);
	gguf_writer_kv_arr_i32(&w, "tokenizer.ggml.token_type", HV, types);
	gguf_writer_kv_arr_f32(&w, "tokenizer.ggml.scores", HV, scores);
	gguf_writer_kv_u32(&w, "tokenizer.ggml.eos_token_id", EOS_ID);
	uint8_t *buf;
	size_t size;
	gguf_writer_finish(&w, &buf, &size);
	struct gguf *g;
	ing_err err = { 0 };
	if (gguf_open_memory(buf, size, &g, &err))
		harness_fail("grammar vocab: %s", err.msg);
	if (tokenizer_open(g, &tk, &err) || grammar_vocab_create(tk, &gv, &err))
		harness_fail("grammar vocab: %s", err.msg);
	gguf_close(g);
	free(buf);
	gguf_writer_free(&w);
}

void harness_grammar_cleanup(void)
{
	grammar_vocab_free(gv);
	tokenizer_close(tk);
	gv = NULL;
	tk = NULL;
}

static void check_compile(int rc, struct grammar *g, const ing_err *err)
{
	if (rc == 0 && !g)
		harness_fail("compile: success without a grammar");
	if (rc != 0 && (g || !err->msg[0] ||
			(rc != ING_ERR_UNSUPPORTED && rc != ING_ERR_INVALID && rc != ING_ERR_NOMEM)))
		harness_fail("compile: failure %d with grammar %p, message '%s'", rc, (void *)g, err->msg);
}

/* Up to 64 tokens chosen by drive bytes among those the mask allows. */
static void generate(struct grammar *g, const uint8_t *drive, size_t n)
{
	struct grammar_matcher *m;
	ing_err err = { 0 };
	if (grammar_matcher_create(g, gv, &m, &err))
		return;
	float logits[HV];
	int32_t allowed[HV];
	for (size_t stepno = 0; stepno < 64; stepno++) {
		for (int i = 0; i < HV; i++)
			logits[i] = 0;
		int64_t count = grammar_matcher_mask(m, logits, &err);
		if (count < 0) { /* too complex to follow: refused with its reason */
			if (err.code != ING_ERR_UNSUPPORTED || !err.msg[0])
				harness_fail("mask failed: %d %s", err.code, err.msg);
			break;
		}
		int k = 0, refused = -1;
		for (int32_t t = 0; t < HV; t++)
			if (logits[t] == 0)
				allowed[k++] = t;
			else if (logits[t] != -INFINITY)
				harness_fail("mask wrote %g", (double)logits[t]);
			else if (refused < 0 || (n && drive[stepno % n] % 7 == 0))
				refused = t;
		if (count != k)
			harness_fail("mask count %lld, %d allowed", (long long)count, k);
		if ((logits[EOS_ID] == 0) != grammar_matcher_can_end(m))
			harness_fail("EOS allowed %d, can_end %d", logits[EOS_ID] == 0,
				     grammar_matcher_can_end(m));
		if (grammar_matcher_done(m) && k != 1)
			harness_fail("done with %d tokens allowed", k);
		if (refused >= 0 && grammar_matcher_accept_token(m, refused))
			harness_fail("refused token %d accepted", refused);
		if (k == 0)
			break;
		int32_t t = allowed[(n ? drive[stepno % n] : stepno) % (size_t)k];
		if (!grammar_matcher_accept_token(m, t))
			harness_fail("allowed token %d refused", t);
		if (t == EOS_ID)
			break;
	}
	grammar_matcher_free(m);
}

/* Raw bytes: a refused byte changes nothing. */
static void feed(struct grammar *g, const uint8_t *drive, size_t n)
{
	struct grammar_matcher *m;
	ing_err err = { 0 };
	if (grammar_matcher_create(g, NULL, &m, &err))
		return;
	for (size_t i = 0; i < n; i++) {
		bool end = grammar_matcher_can_end(m), done = grammar_matcher_done(m);
		if (grammar_matcher_accept_bytes(m, (const char *)drive + i, 1))
			continue;
		if (end != grammar_matcher_can_end(m) || done != grammar_matcher_done(m) ||
		    grammar_matcher_accept_bytes(m, (const char *)drive + i, 1))
			harness_fail("a refused byte changed the matcher");
	}
	grammar_matcher_free(m);
}

int harness_grammar(const uint8_t *data, size_t size)
{
	vocab_open();
	const uint8_t *nul = memchr(data, 0, size);
	size_t n_schema = nul ? (size_t)(nul - data) : size;
	const uint8_t *drive = nul ? nul + 1 : data + size;
	size_t n_drive = nul ? size - n_schema - 1 : 0;
	struct grammar *g = NULL;
	ing_err err = { 0 };
	int rc = grammar_from_json_schema((const char *)data, n_schema, &g, &err);
	check_compile(rc, g, &err);
	if (g) {
		generate(g, drive, n_drive);
		feed(g, drive, n_drive);
		grammar_free(g);
	}
	for (int k = 0; k < 2; k++) {
		struct grammar *gt = NULL;
		ing_err e3 = { 0 };
		rc = k ? grammar_from_regex((const char *)data, n_schema, &gt, &e3)
		       : grammar_from_gbnf((const char *)data, n_schema, &gt, &e3);
		check_compile(rc, gt, &e3);
		if (gt) {
			generate(gt, drive, n_drive);
			feed(gt, drive, n_drive);
		}
		grammar_free(gt);
	}
	cJSON *s = cJSON_ParseWithLength((const char *)data, n_schema);
	if (s) {
		struct grammar_alt alt = { "<tool_call>", s, "</tool_call>" };
		ing_err err2 = { 0 };
		struct grammar *g2 = NULL;
		rc = grammar_from_alts(&alt, 1, 1, 2, "\n", &g2, &err2);
		check_compile(rc, g2, &err2);
		if (g2)
			generate(g2, drive, n_drive);
		grammar_free(g2);
		cJSON_Delete(s);
	}
	return 0;
}

static const char *const seed_schemas[] = {
	"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":8},"
	"\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150}},\"required\":[\"name\"]}",
	"{\"type\":\"array\",\"items\":{\"enum\":[\"a\",1,null,true]},\"minItems\":1,\"maxItems\":3}",
	"{\"anyOf\":[{\"type\":\"number\",\"minimum\":-5,\"maximum\":5},{\"type\":\"null\"}]}",
	"{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"next\":{\"anyOf\":[{\"$ref\":"
	"\"#/$defs/n\"},{\"type\":\"null\"}]}},\"required\":[\"next\"]}},\"$ref\":\"#/$defs/n\"}",
	"{\"type\":\"string\",\"format\":\"date-time\"}",
	"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"boolean\"}}",
	"{\"type\":\"array\",\"prefixItems\":[{\"const\":\"x\"},{\"type\":\"string\",\"format\":"
	"\"uuid\"}],\"items\":false}",
	"{\"oneOf\":[{}]}",
	"{}",
	"root ::= \"{\" ws (pair (\",\" ws pair)*)? \"}\"\npair ::= [a-z]+ \":\" ws [0-9]{1,3}\nws ::= \" \"?",
	"^[A-Z][a-z]{2,8} (is|was) \\d{1,3}\\.$",
	"{\"type\":\"object\",\"properties\":{\"sku\":{\"type\":\"string\",\"pattern\":"
	"\"^[A-Z]{3}-\\\\d{4}$\"},\"q\":{\"pattern\":\"a\\\"b[^x]*\\\\\\\\\"}}}",
};

void harness_grammar_seeds(harness_seed_fn emit, void *ctx)
{
	static const char drive[] = "\0{\"name\": \"ab\", \"age\": 7}\x01\x02\x03\x05\x08\x0d";
	for (size_t i = 0; i < sizeof seed_schemas / sizeof *seed_schemas; i++) {
		size_t n = strlen(seed_schemas[i]);
		uint8_t buf[1024];
		if (n + sizeof drive > sizeof buf)
			continue;
		memcpy(buf, seed_schemas[i], n);
		memcpy(buf + n, drive, sizeof drive - 1);
		char name[32];
		snprintf(name, sizeof name, "schema-%02zu", i);
		emit(name, buf, n + sizeof drive - 1, ctx);
	}
}
