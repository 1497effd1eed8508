/* harness_seeds.c — seed inputs for the fuzz harnesses, built in memory.
 *
 * GGUF seeds (harness_gguf_seeds): a file with metadata of every value
 * type (nested arrays, an empty array, an alignment) and tensors of several
 * types and ranks, in v2 and v3; a tiny model of each supported
 * architecture (D = 8, two layers, F32 weights) with a small vocabulary;
 * and, when shared/testdata/vocab is readable, a cut-down copy of each
 * shared vocabulary (its first tokens, its special tokens, the merges
 * among them, its scalar metadata with token ids remapped). Each is a few
 * KB, so the fuzzer's max_len stays small.
 *
 * Tokenizer seeds (harness_tokenizer_seeds): every conformance case of
 * the shared .inp files, prefixed with the selector byte of each
 * vocabulary (harness_tokenizer.c's order).
 *
 * fuzz/make_seeds.c writes both to directories for libFuzzer;
 * tests/test_fuzz_regress.c runs the harnesses on them directly. */
#include "harness_fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf.h"
#include "gguf_writer.h"
#include "mem.h"
#include "quant.h"
#include "tokenizer.h"

static void emit_writer(struct gguf_writer *w, const char *name, harness_seed_fn emit, void *ctx)
{
	uint8_t *buf;
	size_t size;
	gguf_writer_finish(w, &buf, &size);
	emit(name, buf, size, ctx);
	free(buf);
	gguf_writer_free(w);
}

/* ---- metadata and tensors of every kind ---------------------------------- */

static void seed_all_types(uint32_t version, harness_seed_fn emit, void *ctx)
{
	struct gguf_writer w;
	gguf_writer_init(&w, version);
	gguf_writer_kv_u32(&w, "general.alignment", 64);
	gguf_writer_kv_u8(&w, "u8", 200);
	gguf_writer_kv_i8(&w, "i8", -100);
	gguf_writer_kv_u16(&w, "u16", 60000);
	gguf_writer_kv_i16(&w, "i16", -30000);
	gguf_writer_kv_i32(&w, "i32", -2000000000);
	gguf_writer_kv_u64(&w, "u64", UINT64_MAX);
	gguf_writer_kv_i64(&w, "i64", INT64_MIN);
	gguf_writer_kv_f32(&w, "f32", -1.5e30f);
	gguf_writer_kv_f64(&w, "f64", 1e300);
	gguf_writer_kv_bool(&w, "bool", true);
	gguf_writer_kv_str(&w, "str", "h\xc3\xa9llo");
	gguf_writer_kv_arr_f32(&w, "arr.f32", 3, (const float[]){1.0f, -2e20f, 3e38f});
	gguf_writer_kv_arr(&w, "arr.f64", GGUF_VT_FLOAT64, 2, (const double[]){-1e300, 0.5});
	gguf_writer_kv_arr(&w, "arr.i16", GGUF_VT_INT16, 2, (const int16_t[]){-1, 7});
	gguf_writer_kv_arr(&w, "arr.u64", GGUF_VT_UINT64, 1, (const uint64_t[]){UINT64_MAX});
	gguf_writer_kv_arr(&w, "arr.bool", GGUF_VT_BOOL, 3, (const uint8_t[]){1, 0, 1});
	gguf_writer_kv_arr_str(&w, "arr.str", 2, (const char *const[]){"a", ""});
	gguf_writer_kv_arr_i32(&w, "arr.empty", 0, NULL);
	/* [[1, 2], ["x"], [[true]]] */
	gguf_writer_kv_begin(&w, "arr.nested", GGUF_VT_ARRAY);
	gguf_writer_put_arr_header(&w, GGUF_VT_ARRAY, 3);
	gguf_writer_put_arr_header(&w, GGUF_VT_INT32, 2);
	gguf_writer_put_u32(&w, 1);
	gguf_writer_put_u32(&w, 2);
	gguf_writer_put_arr_header(&w, GGUF_VT_STRING, 1);
	gguf_writer_put_str(&w, "x");
	gguf_writer_put_arr_header(&w, GGUF_VT_ARRAY, 1);
	gguf_writer_put_arr_header(&w, GGUF_VT_BOOL, 1);
	gguf_writer_put_u8(&w, 1);
	float x[256];
	for (int i = 0; i < 256; i++)
		x[i] = (float)(i % 17) - 8.0f;
	gguf_writer_tensor_f32(&w, "f32.vec", QTYPE_F32, 1, (const uint64_t[]){4}, x);
	gguf_writer_tensor_f32(&w, "f16.mat", QTYPE_F16, 2, (const uint64_t[]){4, 2}, x);
	gguf_writer_tensor_f32(&w, "q8_0.3d", QTYPE_Q8_0, 3, (const uint64_t[]){32, 1, 2}, x);
	gguf_writer_tensor_f32(&w, "q4_k.4d", QTYPE_Q4_K, 4, (const uint64_t[]){256, 1, 1, 1}, x);
	emit_writer(&w, version == 2 ? "kv-all-types-v2" : "kv-all-types-v3", emit, ctx);
}

/* ---- tiny models --------------------------------------------------------- */

#define TINY_D 8
#define TINY_H 2
#define TINY_HKV 1
#define TINY_DH 4
#define TINY_F 16
#define TINY_L 2

/* A SentencePiece vocabulary: <unk> <s> </s>, a few byte tokens, words. */
static int32_t tiny_vocab_spm(struct gguf_writer *w)
{
	static const char *const toks[] = {
		"<unk>", "<s>", "</s>", "<0x0A>", "<0x20>", "<0xC3>", "<0xA9>", "\xe2\x96\x81",
		"\xe2\x96\x81t", "h", "e", "t", "th", "the", "\xe2\x96\x81the", "<start_of_turn>",
		"<end_of_turn>", "x", "\xc3\xa9",
	};
	static const int32_t types[] = {2, 3, 3, 6, 6, 6, 6, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 4, 1};
	enum { N = sizeof toks / sizeof *toks };
	_Static_assert(sizeof types / sizeof *types == N, "one type per token");
	float scores[N];
	for (int i = 0; i < N; i++)
		scores[i] = -(float)i;
	gguf_writer_kv_str(w, "tokenizer.ggml.model", "llama");
	gguf_writer_kv_arr_str(w, "tokenizer.ggml.tokens", N, toks);
	gguf_writer_kv_arr_f32(w, "tokenizer.ggml.scores", N, scores);
	gguf_writer_kv_arr_i32(w, "tokenizer.ggml.token_type", N, types);
	gguf_writer_kv_u32(w, "tokenizer.ggml.bos_token_id", 1);
	gguf_writer_kv_u32(w, "tokenizer.ggml.eos_token_id", 2);
	gguf_writer_kv_bool(w, "tokenizer.ggml.add_bos_token", true);
	return N;
}

/* A byte-level BPE vocabulary: printable ASCII stand-ins, "Ġ", merges. */
static int32_t tiny_vocab_bpe(struct gguf_writer *w, const char *pre)
{
	static char chars[95][2];
	const char *toks[95 + 6];
	int32_t types[95 + 6];
	int32_t n = 0;
	for (int c = 0x21; c < 0x7F; c++) {
		chars[n][0] = (char)c;
		types[n] = 1;
		toks[n] = chars[n];
		n++;
	}
	static const char *const extra[] = {"\xc4\xa0", "\xc4\xa0t", "he", "\xc4\xa0the", "<|endoftext|>",
					    "<|im_end|>"};
	for (int i = 0; i < 6; i++) {
		types[n] = i < 4 ? 1 : 3;
		toks[n++] = extra[i];
	}
	static const char *const merges[] = {"\xc4\xa0 t", "h e", "\xc4\xa0t he"};
	gguf_writer_kv_str(w, "tokenizer.ggml.model", "gpt2");
	gguf_writer_kv_str(w, "tokenizer.ggml.pre", pre);
	gguf_writer_kv_arr_str(w, "tokenizer.ggml.tokens", (size_t)n, toks);
	gguf_writer_kv_arr_i32(w, "tokenizer.ggml.token_type", (size_t)n, types);
	gguf_writer_kv_arr_str(w, "tokenizer.ggml.merges", 3, merges);
	gguf_writer_kv_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)n - 1);
	return n;
}

static void tiny_tensor(struct gguf_writer *w, const char *name, uint64_t ne0, uint64_t ne1)
{
	static float x[TINY_D * 128];
	for (size_t i = 0; i < sizeof x / sizeof *x; i++)
		x[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
	uint64_t ne[2] = {ne0, ne1};
	gguf_writer_tensor_f32(w, name, QTYPE_F32, ne1 ? 2 : 1, ne, x);
}

static void seed_model(const char *arch, harness_seed_fn emit, void *ctx)
{
	bool gemma = strcmp(arch, "gemma3") == 0, qwen2 = strcmp(arch, "qwen2") == 0;
	bool qk_norm = gemma || strcmp(arch, "qwen3") == 0;
	struct gguf_writer w;
	gguf_writer_init(&w, 3);
	gguf_writer_kv_str(&w, "general.architecture", arch);
	gguf_writer_kv_str(&w, "general.name", arch);
	char key[128];
	static const struct { const char *k; uint32_t v; } hp[] = {
		{"embedding_length", TINY_D}, {"block_count", TINY_L}, {"feed_forward_length", TINY_F},
		{"attention.head_count", TINY_H}, {"attention.head_count_kv", TINY_HKV},
		{"attention.key_length", TINY_DH}, {"context_length", 64},
	};
	for (size_t i = 0; i < sizeof hp / sizeof *hp; i++) {
		snprintf(key, sizeof key, "%s.%s", arch, hp[i].k);
		gguf_writer_kv_u32(&w, key, hp[i].v);
	}
	snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
	gguf_writer_kv_f32(&w, key, 1e-6f);
	snprintf(key, sizeof key, "%s.rope.freq_base", arch);
	gguf_writer_kv_f32(&w, key, 10000.0f);
	if (gemma) {
		snprintf(key, sizeof key, "%s.attention.sliding_window", arch);
		gguf_writer_kv_u32(&w, key, 16);
		snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", arch);
		gguf_writer_kv_arr(&w, key, GGUF_VT_BOOL, TINY_L, (const uint8_t[]){1, 0});
		snprintf(key, sizeof key, "%s.final_logit_softcapping", arch);
		gguf_writer_kv_f32(&w, key, 30.0f);
	}
	int32_t V = gemma || strcmp(arch, "llama") == 0 ? tiny_vocab_spm(&w)
							 : tiny_vocab_bpe(&w, qwen2 ? "qwen2" : "llama3");
	tiny_tensor(&w, "token_embd.weight", TINY_D, (uint64_t)V);
	tiny_tensor(&w, "output_norm.weight", TINY_D, 0);
	if (!gemma)
		tiny_tensor(&w, "output.weight", TINY_D, (uint64_t)V);
	for (int il = 0; il < TINY_L; il++) {
		static const struct { const char *name; int ne0, ne1, when; } t[] = {
			{"attn_norm.weight", TINY_D, 0, 0},
			{"attn_q.weight", TINY_D, TINY_H * TINY_DH, 0},
			{"attn_k.weight", TINY_D, TINY_HKV * TINY_DH, 0},
			{"attn_v.weight", TINY_D, TINY_HKV * TINY_DH, 0},
			{"attn_output.weight", TINY_H * TINY_DH, TINY_D, 0},
			{"ffn_norm.weight", TINY_D, 0, 0},
			{"ffn_gate.weight", TINY_D, TINY_F, 0},
			{"ffn_up.weight", TINY_D, TINY_F, 0},
			{"ffn_down.weight", TINY_F, TINY_D, 0},
			{"attn_q_norm.weight", TINY_DH, 0, 1},
			{"attn_k_norm.weight", TINY_DH, 0, 1},
			{"post_attention_norm.weight", TINY_D, 0, 2},
			{"post_ffw_norm.weight", TINY_D, 0, 2},
			{"attn_q.bias", TINY_H * TINY_DH, 0, 3},
			{"attn_k.bias", TINY_HKV * TINY_DH, 0, 3},
			{"attn_v.bias", TINY_HKV * TINY_DH, 0, 3},
		};
		for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
			if ((t[i].when == 1 && !qk_norm) || (t[i].when == 2 && !gemma) ||
			    (t[i].when == 3 && !qwen2))
				continue;
			char name[96];
			snprintf(name, sizeof name, "blk.%d.%s", il, t[i].name);
			tiny_tensor(&w, name, (uint64_t)t[i].ne0, (uint64_t)t[i].ne1);
		}
	}
	char seed[64];
	snprintf(seed, sizeof seed, "model-%s", arch);
	emit_writer(&w, seed, emit, ctx);
}

/* ---- cut-down shared vocabularies ---------------------------------------- */

#define CUT_FIRST 300   /* tokens kept from the start of the vocabulary */
#define CUT_SPECIAL 64  /* special tokens kept beyond them */

struct cut {
	const struct gguf *g;
	const struct tokenizer *tk;
	int32_t *new_id; /* [n_vocab], -1 when dropped */
	int32_t *old_id; /* [n_kept] */
	int32_t n_kept;
};

static void cut_keep(struct cut *c, int32_t id)
{
	if (id >= 0 && id < tokenizer_n_vocab(c->tk) && c->new_id[id] < 0) {
		c->new_id[id] = c->n_kept;
		c->old_id[c->n_kept++] = id;
	}
}

/* Kept id of the token with text s[0..n), or -1. */
static int32_t cut_find(const struct cut *c, const char *s, size_t n, char *tmp)
{
	memcpy(tmp, s, n);
	tmp[n] = '\0';
	int32_t id = tokenizer_find_token(c->tk, tmp);
	return id >= 0 ? c->new_id[id] : -1;
}

static void cut_merges(struct cut *c, struct gguf_writer *w, const struct gguf_arr *a)
{
	size_t cap = 64, n = 0;
	struct gguf_str *keep = malloc(cap * sizeof *keep);
	struct gguf_arr_iter it;
	struct gguf_value v;
	char tmp[1024];
	gguf_arr_iter_init(&it, a);
	while (keep && gguf_arr_iter_next(&it, &v)) {
		const char *s = v.str.ptr, *sp = v.str.len > 1 ? memchr(s + 1, ' ', v.str.len - 1) : NULL;
		if (!sp || v.str.len >= sizeof tmp)
			continue;
		size_t ln = (size_t)(sp - s), rn = v.str.len - ln - 1;
		char both[1024];
		memcpy(both, s, ln);
		memcpy(both + ln, sp + 1, rn);
		if (cut_find(c, s, ln, tmp) < 0 || cut_find(c, sp + 1, rn, tmp) < 0 ||
		    cut_find(c, both, ln + rn, tmp) < 0)
			continue;
		if (n == cap) {
			struct gguf_str *p = realloc(keep, 2 * cap * sizeof *keep);
			if (!p)
				break;
			keep = p;
			cap *= 2;
		}
		keep[n++] = v.str;
	}
	gguf_writer_kv_begin(w, "tokenizer.ggml.merges", GGUF_VT_ARRAY);
	gguf_writer_put_arr_header(w, GGUF_VT_STRING, n);
	for (size_t i = 0; i < n; i++)
		gguf_writer_put_strn(w, keep[i].ptr, (size_t)keep[i].len);
	free(keep);
}

/* Copies the kept elements of a per-token array. */
static void cut_token_array(const struct cut *c, struct gguf_writer *w, const struct gguf_kv *kv)
{
	const struct gguf_arr *a = &kv->val.arr;
	gguf_writer_kv_beginn(w, kv->key.ptr, (size_t)kv->key.len, GGUF_VT_ARRAY);
	gguf_writer_put_arr_header(w, a->elem_type, (uint64_t)c->n_kept);
	if (a->elem_type == GGUF_VT_STRING) {
		struct gguf_str *s = malloc((size_t)a->n * sizeof *s);
		struct gguf_arr_iter it;
		struct gguf_value v;
		uint64_t i = 0;
		gguf_arr_iter_init(&it, a);
		while (s && gguf_arr_iter_next(&it, &v))
			s[i++] = v.str;
		for (int32_t k = 0; s && k < c->n_kept; k++)
			gguf_writer_put_strn(w, s[c->old_id[k]].ptr, (size_t)s[c->old_id[k]].len);
		free(s);
		return;
	}
	uint64_t sz = a->nbytes / (a->n ? a->n : 1);
	for (int32_t k = 0; k < c->n_kept; k++)
		gguf_writer_put_bytes(w, a->data + (uint64_t)c->old_id[k] * sz, (size_t)sz);
}

/* Scalars are copied verbatim, token ids remapped (dropped when cut). */
static void cut_scalar(const struct cut *c, struct gguf_writer *w, const struct gguf_kv *kv)
{
	const struct gguf_value *v = &kv->val;
	size_t kl = (size_t)kv->key.len;
	if (kl > 9 && memcmp(kv->key.ptr + kl - 9, "_token_id", 9) == 0) {
		int32_t id = v->u64 < (uint64_t)tokenizer_n_vocab(c->tk) ? c->new_id[v->u64] : -1;
		if (id >= 0) {
			gguf_writer_kv_beginn(w, kv->key.ptr, kl, GGUF_VT_UINT32);
			gguf_writer_put_u32(w, (uint32_t)id);
		}
		return;
	}
	gguf_writer_kv_beginn(w, kv->key.ptr, kl, v->type);
	if (v->type == GGUF_VT_STRING) {
		gguf_writer_put_strn(w, v->str.ptr, (size_t)v->str.len);
		return;
	}
	static const uint8_t size[GGUF_VT_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
	if (v->type == GGUF_VT_FLOAT32)
		gguf_writer_put_f32(w, (float)v->f64);
	else if (v->type == GGUF_VT_FLOAT64)
		gguf_writer_put_f64(w, v->f64);
	else
		for (unsigned i = 0; i < size[v->type]; i++)
			gguf_writer_put_u8(w, (uint8_t)(v->u64 >> (8 * i)));
}

static void seed_cut_vocab(const char *dir, const char *name, harness_seed_fn emit, void *ctx)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", dir, name);
	struct gguf *g;
	struct tokenizer *tk = NULL;
	if (gguf_open(path, &g, NULL) != ING_OK)
		return;
	if (tokenizer_open(g, &tk, NULL) != ING_OK) {
		gguf_close(g);
		return;
	}
	int32_t nv = tokenizer_n_vocab(tk);
	struct cut c = {.g = g, .tk = tk, .new_id = malloc((size_t)nv * sizeof(int32_t)),
			.old_id = malloc((size_t)nv * sizeof(int32_t))};
	if (c.new_id && c.old_id) {
		memset(c.new_id, 0xff, (size_t)nv * sizeof(int32_t));
		for (int32_t id = 0; id < nv && id < CUT_FIRST; id++)
			cut_keep(&c, id);
		int32_t n_special = 0;
		for (int32_t id = 0; id < nv && n_special < CUT_SPECIAL; id++) {
			enum token_type t = tokenizer_token_type(tk, id);
			if ((t == TOKEN_TYPE_CONTROL || t == TOKEN_TYPE_USER_DEFINED ||
			     t == TOKEN_TYPE_UNKNOWN) && c.new_id[id] < 0) {
				cut_keep(&c, id);
				n_special++;
			}
		}
		int32_t ids[] = {tokenizer_bos(tk), tokenizer_eos(tk), tokenizer_eot(tk),
				 tokenizer_unk(tk), tokenizer_pad(tk)};
		for (size_t i = 0; i < sizeof ids / sizeof *ids; i++)
			cut_keep(&c, ids[i]);

		struct gguf_writer w;
		gguf_writer_init(&w, g->version);
		for (uint64_t i = 0; i < g->n_kv; i++) {
			const struct gguf_kv *kv = &g->kv[i];
			if (kv->val.type != GGUF_VT_ARRAY)
				cut_scalar(&c, &w, kv);
			else if (gguf_str_eq(kv->key, "tokenizer.ggml.merges"))
				cut_merges(&c, &w, &kv->val.arr);
			else if (kv->val.arr.n == (uint64_t)nv)
				cut_token_array(&c, &w, kv);
		}
		char seed[96];
		snprintf(seed, sizeof seed, "vocab-%s-cut", name);
		emit_writer(&w, seed, emit, ctx);
	}
	free(c.new_id);
	free(c.old_id);
	tokenizer_close(tk);
	gguf_close(g);
}

static const char *const shared_vocabs[] = {
	"llama-spm", "gpt-2", "deepseek-llm", "falcon", "starcoder", "phi-3",
};

void harness_gguf_seeds(harness_seed_fn emit, void *ctx)
{
	seed_all_types(2, emit, ctx);
	seed_all_types(3, emit, ctx);
	static const char *const arches[] = {"llama", "qwen2", "qwen3", "gemma3"};
	for (size_t i = 0; i < sizeof arches / sizeof *arches; i++)
		seed_model(arches[i], emit, ctx);
	char dir[2048];
	snprintf(dir, sizeof dir, "%s/vocab", check_testdata_dir());
	for (size_t i = 0; i < sizeof shared_vocabs / sizeof *shared_vocabs; i++)
		seed_cut_vocab(dir, shared_vocabs[i], emit, ctx);
}

/* ---- tokenizer seeds ------------------------------------------------------ */

void harness_tokenizer_seeds(harness_seed_fn emit, void *ctx)
{
	static const char sep[] = "\n__ggml_vocab_test__\n";
	const size_t sep_len = sizeof sep - 1;
	char path[4096];
	snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf.inp", check_testdata_dir());
	size_t len;
	char *inp = check_read_file(path, &len);
	if (!inp)
		return;
	uint8_t *buf = malloc(len + 1);
	size_t k = 0;
	for (const char *p = inp, *end = inp + len; buf && p < end; k++) {
		const char *q = memmem(p, (size_t)(end - p), sep, sep_len);
		size_t n = q ? (size_t)(q - p) : (size_t)(end - p);
		memcpy(buf + 1, p, n);
		for (uint8_t v = 0; v < sizeof shared_vocabs / sizeof *shared_vocabs; v++) {
			char name[64];
			snprintf(name, sizeof name, "case%02zu-%s", k, shared_vocabs[v]);
			buf[0] = v;
			emit(name, buf, n + 1, ctx);
		}
		p = q ? q + sep_len : end;
	}
	free(buf);
	free(inp);
}
