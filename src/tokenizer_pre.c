/* tokenizer_pre.c — regex pre-tokenizers of byte-level BPE vocabularies.
 *
 * tokenizer.ggml.pre names how Hugging Face split text into words before
 * BPE; the table below maps each name to its regexes, in Hugging Face's
 * own form wherever PCRE2 can run it (llama.cpp rewrites several of them
 * for std::regex, which lacks \p{..}; the rewrites and its hand-written
 * matchers for gpt2/llama3 agree with these on real text). A sequence of
 * regexes works like llama.cpp's unicode_regex_split: each regex splits
 * every piece the previous one produced, and both its matches and the text
 * between them become pieces. Each piece is its own subject, so lookarounds
 * and $ never see past it.
 *
 * Compiled with PCRE2_UTF | PCRE2_UCP (Unicode \s, \p{L}, ...) and
 * PCRE2_DOLLAR_ENDONLY ($ as in ECMAScript), JIT-compiled when available.
 * The compiled codes are shared read-only; match data and the JIT stack
 * belong to each call. */
#include "tokenizer_int.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <string.h>

#include "mem.h"

#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

/* GPT-2: the original, with its final \s+. */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

#define RE_LLAMA3 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}" \
	"| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

#define RE_QWEN2 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" \
	"| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* Upper/lower-case aware word pattern of GPT-4o and Tekken. */
#define RE_UPPER "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define RE_LOWER "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define RE_NOT_LN "[^\\r\\n\\p{L}\\p{N}]?"

#define RE_GPT4O RE_NOT_LN RE_UPPER "*" RE_LOWER "+" RE_CONTRACTIONS "?|" \
	RE_NOT_LN RE_UPPER "+" RE_LOWER "*" RE_CONTRACTIONS "?" \
	"|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

#define RE_TEKKEN RE_NOT_LN RE_UPPER "*" RE_LOWER "+|" RE_NOT_LN RE_UPPER "+" RE_LOWER "*" \
	"|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* CJK ranges as the deepseek tokenizers write them. */
#define RE_CJK "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"

/* deepseek-llm's cased-letter class (an older snapshot of \p{L&}). */
#define RE_DS_LETTERS "A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}" \
	"\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}" \
	"\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}" \
	"\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}" \
	"\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}" \
	"\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}" \
	"\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}" \
	"\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}" \
	"\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}" \
	"\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}" \
	"\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}" \
	"\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}" \
	"\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}" \
	"\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}" \
	"\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}" \
	"\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}"

/* Splits on the punctuation of Bloom-style tokenizers. */
#define RE_PORO " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+"

/* name list | regexes | clean_spaces, ignore_merges, add_bos */
static const struct pre_tokenizer pre_table[] = {
	{"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, true, false, false},
	{"gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v2-es|jina-v2-de|a.x-4.0|mellum|modern-bert|"
	 "jina-v1-en|jina-v2-code|roberta-bpe|exaone4|mpt|olmo|jais", {RE_GPT2}, true, false, false},
	{"trillion|granite-docling", {RE_GPT2}, false, false, false},
	{"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|jina-v5-nano",
	 {RE_LLAMA3}, true, true, true},
	{"dbrx|smaug-bpe|glm4|chatglm-bpe", {RE_LLAMA3}, true, false, false},
	{"deepseek-llm",
	 {"[\r\n]", "\\s?[" RE_DS_LETTERS "]+",
	  "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
	  "(?<!\\s)\\s++$", RE_CJK, "\\p{N}+"}, false, false, false},
	{"deepseek-coder", {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK, "\\p{N}"}, false, false, false},
	{"deepseek-v3|hunyuan-dense|joyai-llm|hy_v4",
	 {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
	  "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
	  "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}, false, false, false},
	{"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}, true, false, false},
	{"starcoder|refact|codeshell|exaone|minerva-7b|mellum2", {"\\p{N}", RE_GPT2}, true, false, false},
	{"command-r|smollm", {"\\p{N}", RE_GPT2}, false, false, false},
	{"qwen2|deepseek-r1-qwen|kormo|f2llmv2|hunyuan|solar-open|grok-2", {RE_QWEN2}, false, false, false},
	{"stablelm2|megrez", {RE_QWEN2}, true, false, false},
	{"poro-chat", {RE_PORO}, false, false, false},
	{"bloom|gpt3-finnish", {RE_PORO}, true, false, false},
	{"viking", {RE_PORO, "\\p{N}"}, false, false, false},
	{"tekken", {RE_TEKKEN}, false, true, true},
	{"gpt-4o|llama4|kanana2|talkie|minimax-m2", {RE_GPT4O}, false, false, false},
	{"seed-coder",
	 {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+"
	  "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, false, false, false},
	{"bailingmoe|bailingmoe2|llada-moe",
	 {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}"
	  "| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}, false, false, false},
};

static bool name_in_list(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; *p;) {
		const char *end = strchr(p, '|');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len == n && memcmp(p, name, n) == 0)
			return true;
		if (!end)
			break;
		p = end + 1;
	}
	return false;
}

const struct pre_tokenizer *tok_pre_find(const char *name)
{
	for (size_t i = 0; i < sizeof pre_table / sizeof *pre_table; i++)
		if (name_in_list(pre_table[i].names, name))
			return &pre_table[i];
	return NULL;
}

/* ---- PCRE2 -------------------------------------------------------------- */

#define PRE_MAX 6

struct pre_state {
	pcre2_general_context *gctx;
	pcre2_code *code[PRE_MAX];
	int n;
};

static void *pcre_alloc(PCRE2_SIZE size, void *data)
{
	(void)data;
	return ing_malloc(size);
}

static void pcre_free(void *p, void *data)
{
	(void)data;
	ing_free(p);
}

void tok_pre_free(void *state)
{
	struct pre_state *st = state;
	if (!st)
		return;
	for (int i = 0; i < st->n; i++)
		pcre2_code_free(st->code[i]);
	pcre2_general_context_free(st->gctx);
	ing_free(st);
}

int tok_pre_compile(const struct pre_tokenizer *pre, void **state, ing_err *err)
{
	struct pre_state *st = ing_calloc(1, sizeof *st);
	if (!st || !(st->gctx = pcre2_general_context_create(pcre_alloc, pcre_free, NULL))) {
		ing_free(st);
		return ing_err_set(err, ING_ERR_NOMEM, "tokenizer: out of memory for regexes");
	}
	pcre2_compile_context *cctx = pcre2_compile_context_create(st->gctx);
	int rc = cctx ? ING_OK : ing_err_set(err, ING_ERR_NOMEM, "tokenizer: out of memory for regexes");
	for (int i = 0; !rc && i < PRE_MAX && pre->regex[i]; i++) {
		int code;
		PCRE2_SIZE at;
		st->code[i] = pcre2_compile((PCRE2_SPTR)pre->regex[i], PCRE2_ZERO_TERMINATED,
					    PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &code, &at, cctx);
		if (!st->code[i]) {
			PCRE2_UCHAR msg[256];
			pcre2_get_error_message(code, msg, sizeof msg);
			rc = ing_err_set(err, code == PCRE2_ERROR_HEAP_FAILED ? ING_ERR_NOMEM : ING_ERR_FORMAT,
					 "tokenizer: regex %d of '%s' at %zu: %s", i, pre->names, (size_t)at,
					 (const char *)msg);
			break;
		}
		st->n = i + 1;
		pcre2_jit_compile(st->code[i], PCRE2_JIT_COMPLETE); /* interpreter if no JIT */
	}
	pcre2_compile_context_free(cctx);
	if (rc) {
		tok_pre_free(st);
		return rc;
	}
	*state = st;
	return ING_OK;
}

/* Everything one split call owns. */
struct split_call {
	const struct pre_state *st;
	pcre2_match_data *md[PRE_MAX];
	pcre2_match_context *mctx;
	pcre2_jit_stack *jit;
	tok_word_fn fn;
	void *ctx;
	ing_err *err;
};

static int split_level(struct split_call *sc, int level, const char *s, size_t n);

/* Next match of regex level in s[0..n) from pos; false when none. An empty
 * match is skipped over one character. */
static int next_match(struct split_call *sc, int level, const char *s, size_t n, size_t pos,
		      size_t *ms, size_t *me, bool *found)
{
	for (;;) {
		*found = false;
		if (pos >= n)
			return ING_OK;
		int rc = pcre2_match(sc->st->code[level], (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK,
				     sc->md[level], sc->mctx);
		if (rc == PCRE2_ERROR_NOMATCH)
			return ING_OK;
		if (rc < 0) {
			PCRE2_UCHAR msg[256];
			pcre2_get_error_message(rc, msg, sizeof msg);
			return ing_err_set(sc->err, rc == PCRE2_ERROR_NOMEMORY ? ING_ERR_NOMEM : ING_ERR_RANGE,
					   "tokenizer: pre-tokenizer regex failed: %s", (const char *)msg);
		}
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(sc->md[level]);
		if (ov[1] > ov[0]) {
			*ms = ov[0];
			*me = ov[1];
			*found = true;
			return ING_OK;
		}
		pos = ov[0] + tok_utf8_len((uint8_t)s[ov[0]]);
	}
}

static int split_level(struct split_call *sc, int level, const char *s, size_t n)
{
	if (level == sc->st->n)
		return sc->fn(sc->ctx, s, n, sc->err);
	size_t last = 0, ms, me;
	bool found;
	int rc;
	while (!(rc = next_match(sc, level, s, n, last, &ms, &me, &found)) && found) {
		if (ms > last && (rc = split_level(sc, level + 1, s + last, ms - last)))
			return rc;
		if ((rc = split_level(sc, level + 1, s + ms, me - ms)))
			return rc;
		last = me;
	}
	if (!rc && last < n)
		rc = split_level(sc, level + 1, s + last, n - last);
	return rc;
}

int tok_pre_split(const void *state, const char *text, size_t len, tok_word_fn fn, void *ctx,
		  ing_err *err)
{
	const struct pre_state *st = state;
	struct split_call sc = {.st = st, .fn = fn, .ctx = ctx, .err = err};
	int rc = ING_OK;
	sc.mctx = pcre2_match_context_create(st->gctx);
	sc.jit = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, st->gctx);
	if (!sc.mctx || !sc.jit)
		rc = ING_ERR_NOMEM;
	else
		pcre2_jit_stack_assign(sc.mctx, NULL, sc.jit);
	for (int i = 0; !rc && i < st->n; i++)
		if (!(sc.md[i] = pcre2_match_data_create_from_pattern(st->code[i], st->gctx)))
			rc = ING_ERR_NOMEM;
	if (rc)
		ing_err_set(err, rc, "tokenizer: out of memory for regex matching");
	else if (len > 0)
		rc = split_level(&sc, 0, text, len);
	for (int i = 0; i < st->n; i++)
		pcre2_match_data_free(sc.md[i]);
	pcre2_jit_stack_free(sc.jit);
	pcre2_match_context_free(sc.mctx);
	return rc;
}
