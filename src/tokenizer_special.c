/* tokenizer_special.c — special tokens: which ids end generation, which
 * attributes tokens get beyond their stored type, and how text is split
 * around special-token text before tokenization.
 *
 * GGUF files do not say everything: llama.cpp recognises EOT/EOM/FIM and
 * end-of-generation tokens by their text and fixes up attributes per model.
 * The lists below reproduce that, so the same model behaves the same here.
 *
 * Partition. llama.cpp takes special tokens longest text first and, for
 * each, cuts every occurrence out of the still-raw text, left to right. We
 * get the same result without a pass per token: a trie finds, at every
 * position, the special texts starting there; a heap ordered by (length
 * desc, id, position) replays the candidates in llama.cpp's order, each
 * accepted when its bytes are still raw text. A position whose longest
 * candidate is blocked re-enters the heap with its next shorter one. The
 * work is linear in the text times the (short) depth of the trie. */
#include "tokenizer_int.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"

/* ---- text-based fix-ups ------------------------------------------------ */

static const char *const eot_texts[] = {
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
	"<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
	"<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>",
	"<end_of_utterance>", NULL,
};
static const char *const eom_texts[] = {"<|eom_id|>", NULL};
static const char *const fim_pre_texts[] = {
	"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
	"<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>", "\xe2\x96\x81<PRE>",
	"<|code_prefix|>", "<|prefix|>", NULL,
};
static const char *const fim_suf_texts[] = {
	"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
	"<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>", "<SUF>", "\xe2\x96\x81<SUF>",
	"<|code_suffix|>", "<|suffix|>", NULL,
};
static const char *const fim_mid_texts[] = {
	"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
	"<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>", "\xe2\x96\x81<MID>",
	"<|code_middle|>", "<|middle|>", NULL,
};
static const char *const fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
static const char *const fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
static const char *const fim_sep_texts[] = {"<|file_sep|>", NULL};

/* Texts that end generation wherever they appear in a vocabulary. */
static const char *const eog_texts[] = {
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
	"<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
	"_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
	"<turn|>", "<|tool_response>",
	"<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>",
	"[e~[", NULL,
};

static int32_t find_str(const struct tokenizer *tk, const char *s)
{
	return tok_find(tk, s, strlen(s));
}

/* When *id is unset, takes the first text of list present in the
 * vocabulary and marks it control, as llama.cpp does for such tokens. */
static void detect(struct tokenizer *tk, int32_t *id, const char *const *list)
{
	if (*id >= 0)
		return;
	for (; *list; list++) {
		int32_t t = find_str(tk, *list);
		if (t >= 0) {
			*id = t;
			tk->tokens[t].attr |= TOK_ATTR_CONTROL;
			return;
		}
	}
}

static void mark_eog(struct tokenizer *tk, int32_t id)
{
	if (id >= 0 && id < tk->n_vocab)
		tk->eog[id] = 1;
}

/* Whether an EOG token has text s; returns its id or -1. */
static int32_t eog_with_text(const struct tokenizer *tk, const char *s)
{
	int32_t id = find_str(tk, s);
	return id >= 0 && tk->eog[id] ? id : -1;
}

static void setup_eog(struct tokenizer *tk)
{
	mark_eog(tk, tk->fim_pad);
	mark_eog(tk, tk->fim_rep);
	mark_eog(tk, tk->fim_sep);
	for (const char *const *s = eog_texts; *s; s++) {
		int32_t id = find_str(tk, *s);
		/* llama.cpp lists "</s>" for paddleocr, where it is a control
		 * token; elsewhere (Gemma 3's HTML "</s>", Phi-3's user-defined
		 * one) it is text, so we only take it when it is control. The
		 * vocabularies whose EOS is "</s>" get it as EOS below. */
		if (id >= 0 && strcmp(*s, "</s>") == 0 && tk->tokens[id].type != TOKEN_TYPE_CONTROL)
			continue;
		if (id >= 0) {
			mark_eog(tk, id);
			tk->tokens[id].attr |= TOK_ATTR_CONTROL;
		}
	}
	/* gpt-oss: these render as text (llama.cpp forces user-defined). */
	static const char *const shown[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};
	for (const char *const *s = shown; *s; s++) {
		int32_t id = find_str(tk, *s);
		if (id >= 0)
			tk->tokens[id].attr = TOK_ATTR_USER_DEFINED;
	}
	mark_eog(tk, tk->eos);
	mark_eog(tk, tk->eot);
	mark_eog(tk, tk->eom);

	/* o200k_harmony / solar-open: <|end|> separates messages there. */
	int32_t end = eog_with_text(tk, "<|end|>");
	bool ret = eog_with_text(tk, "<|return|>") >= 0;
	bool call = eog_with_text(tk, "<|call|>") >= 0 || eog_with_text(tk, "<|calls|>") >= 0;
	bool flush = eog_with_text(tk, "<|flush|>") >= 0;
	if (end >= 0 && call && (ret || flush)) {
		tk->eog[end] = 0;
		tk->tokens[end].attr = TOK_ATTR_USER_DEFINED;
	}
	/* gemma4 / paddleocr: </s> is ordinary text there. */
	int32_t s_end = eog_with_text(tk, "</s>");
	if (s_end >= 0 && eog_with_text(tk, "<|tool_response>") >= 0) {
		tk->eog[s_end] = 0;
		tk->tokens[s_end].attr = TOK_ATTR_NORMAL;
	}
}

static void mark_unused(struct tokenizer *tk)
{
	for (int32_t i = 0; i < tk->n_vocab; i++)
		if ((tk->tokens[i].attr & TOK_ATTR_CONTROL) && strstr(tok_text(tk, i), "unused"))
			tk->tokens[i].attr |= TOK_ATTR_UNUSED;
}

static void set_attr(struct tokenizer *tk, const char *text, uint16_t attr, bool on)
{
	int32_t id = find_str(tk, text);
	if (id < 0)
		return;
	if (on)
		tk->tokens[id].attr |= attr;
	else
		tk->tokens[id].attr &= (uint16_t)~attr;
}

static bool is_special_attr(uint16_t attr)
{
	return attr & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN);
}

/* Per-model strip flags llama.cpp sets by model and pre-tokenizer name. */
static void model_attrs(struct tokenizer *tk, const char *model_name)
{
	char name[128];
	size_t i = 0;
	for (; model_name[i] && i + 1 < sizeof name; i++)
		name[i] = (char)tolower((unsigned char)model_name[i]);
	name[i] = '\0';

	if (strstr(tk->pre_name, "jina-v2-de") || strstr(tk->pre_name, "jina-v2-es") ||
	    strstr(tk->pre_name, "jina-v2-code")) {
		set_attr(tk, "<mask>", TOK_ATTR_LSTRIP, true);
	} else if (strstr(name, "phi-3") || strstr(name, "phi3")) {
		for (int32_t id = 0; id < tk->n_vocab; id++)
			if (is_special_attr(tk->tokens[id].attr))
				tk->tokens[id].attr |= TOK_ATTR_RSTRIP;
		set_attr(tk, "</s>", TOK_ATTR_RSTRIP, true);
		set_attr(tk, "<unk>", TOK_ATTR_RSTRIP, false);
		set_attr(tk, "<s>", TOK_ATTR_RSTRIP, false);
		set_attr(tk, "<|endoftext|>", TOK_ATTR_RSTRIP, false);
	} else if (strstr(name, "modern-bert")) {
		set_attr(tk, "[MASK]", TOK_ATTR_LSTRIP, true);
	}
}

/* ---- trie of special texts --------------------------------------------- */

static int trie_node_new(struct tok_trie *t, uint8_t byte, int32_t *out)
{
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 256;
		struct tok_trie_node *p = ing_realloc(t->nodes, cap * sizeof *p);
		if (!p)
			return ING_ERR_NOMEM;
		t->nodes = p;
		t->cap = cap;
	}
	t->nodes[t->n] = (struct tok_trie_node){.child = -1, .sibling = -1, .token = -1, .rank = 0, .byte = byte};
	*out = (int32_t)t->n++;
	return ING_OK;
}

/* Child of node (or of the root when node < 0) for byte b; creates it. */
static int trie_child(struct tok_trie *t, int32_t node, uint8_t b, int32_t *out)
{
	int32_t *link = node < 0 ? &t->root[b] : &t->nodes[node].child;
	if (node >= 0) {
		while (*link >= 0 && t->nodes[*link].byte != b)
			link = &t->nodes[*link].sibling;
	}
	if (*link >= 0) {
		*out = *link;
		return ING_OK;
	}
	int32_t n;
	int rc = trie_node_new(t, b, &n);
	if (rc)
		return rc;
	/* re-derive the link: the node array may have moved */
	if (node < 0) {
		t->root[b] = n;
	} else {
		int32_t *l = &t->nodes[node].child;
		while (*l >= 0)
			l = &t->nodes[*l].sibling;
		*l = n;
	}
	*out = n;
	return ING_OK;
}

static int trie_insert(struct tok_trie *t, const char *s, size_t len, int32_t token, uint32_t rank)
{
	int32_t node = -1;
	for (size_t i = 0; i < len; i++) {
		int rc = trie_child(t, node, (uint8_t)s[i], &node);
		if (rc)
			return rc;
	}
	t->nodes[node].token = token;
	t->nodes[node].rank = rank;
	return ING_OK;
}

void tok_trie_free(struct tok_trie *t)
{
	ing_free(t->nodes);
	t->nodes = NULL;
	t->n = t->cap = 0;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* The trie of special texts. Each node's rank is its token's place in
 * llama.cpp's order: longest text first (ties by id, which llama.cpp
 * leaves to its unstable sort). */
static int build_trie(struct tokenizer *tk, ing_err *err)
{
	memset(tk->special.root, 0xff, sizeof tk->special.root);
	size_t n = 0;
	for (int32_t id = 0; id < tk->n_vocab; id++)
		n += is_special_attr(tk->tokens[id].attr);
	uint64_t *order = ing_malloc_array(n ? n : 1, sizeof *order); /* (~len, id) */
	if (!order)
		return ing_err_set(err, ING_ERR_NOMEM, "tokenizer: out of memory for special tokens");
	n = 0;
	for (int32_t id = 0; id < tk->n_vocab; id++)
		if (is_special_attr(tk->tokens[id].attr))
			order[n++] = ((uint64_t)(UINT32_MAX - tk->tokens[id].text_len) << 32) | (uint32_t)id;
	qsort(order, n, sizeof *order, u64_cmp);
	int rc = ING_OK;
	for (size_t k = 0; k < n && !rc; k++) {
		int32_t id = (int32_t)(uint32_t)order[k];
		rc = trie_insert(&tk->special, tok_text(tk, id), tk->tokens[id].text_len, id, (uint32_t)k);
	}
	ing_free(order);
	if (rc)
		return ing_err_set(err, rc, "tokenizer: out of memory for special tokens");
	return ING_OK;
}

int tok_special_setup(struct tokenizer *tk, const char *model_name, ing_err *err)
{
	detect(tk, &tk->eot, eot_texts);
	detect(tk, &tk->eom, eom_texts);
	detect(tk, &tk->fim_pre, fim_pre_texts);
	detect(tk, &tk->fim_suf, fim_suf_texts);
	detect(tk, &tk->fim_mid, fim_mid_texts);
	detect(tk, &tk->fim_pad, fim_pad_texts);
	detect(tk, &tk->fim_rep, fim_rep_texts);
	detect(tk, &tk->fim_sep, fim_sep_texts);
	mark_unused(tk);
	setup_eog(tk);
	int rc = build_trie(tk, err);
	if (rc)
		return rc;
	model_attrs(tk, model_name);
	return ING_OK;
}

/* ---- partition ---------------------------------------------------------- */

enum { RAW = 0, TAKEN = 1, DROPPED = 2 };

static bool eligible(const struct tokenizer *tk, int32_t id, bool parse_special)
{
	return parse_special || !(tk->tokens[id].attr & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN));
}

/* Longest eligible special text at text[p..len) shorter than bound bytes;
 * returns its length (0 none), its trie node in *node_out. */
static uint32_t longest_at(const struct tokenizer *tk, const char *text, size_t len, size_t p,
			   uint32_t bound, bool parse_special, const struct tok_trie_node **node_out)
{
	const struct tok_trie *t = &tk->special;
	uint32_t best = 0;
	int32_t node = t->root[(uint8_t)text[p]];
	for (size_t q = p + 1; node >= 0; q++) {
		uint32_t depth = (uint32_t)(q - p);
		if (depth >= bound)
			break;
		int32_t tok = t->nodes[node].token;
		if (tok >= 0 && eligible(tk, tok, parse_special)) {
			best = depth;
			*node_out = &t->nodes[node];
		}
		if (q >= len)
			break;
		int32_t c = t->nodes[node].child;
		while (c >= 0 && t->nodes[c].byte != (uint8_t)text[q])
			c = t->nodes[c].sibling;
		node = c;
	}
	return best;
}

static int push_candidate(struct tok_heap *h, size_t p, uint32_t n, const struct tok_trie_node *node)
{
	struct tok_heap_item it = {
		.key = ((uint64_t)node->rank << 32) | (uint32_t)p,
		.a = n,
		.b = (uint32_t)node->token,
	};
	return tok_heap_push(h, it);
}

static bool span_raw(const uint8_t *state, size_t p, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (state[p + i] != RAW)
			return false;
	return true;
}

/* Takes the token at [p, p+n) and drops whitespace its flags strip. */
static void take(const struct tokenizer *tk, const char *text, size_t len, uint8_t *state,
		 size_t p, uint32_t n, int32_t id)
{
	memset(state + p, TAKEN, n);
	uint16_t attr = tk->tokens[id].attr;
	if (attr & TOK_ATTR_LSTRIP)
		for (size_t q = p; q > 0 && state[q - 1] == RAW && isspace((unsigned char)text[q - 1]); q--)
			state[q - 1] = DROPPED;
	if (attr & TOK_ATTR_RSTRIP)
		for (size_t q = p + n; q < len && state[q] == RAW && isspace((unsigned char)text[q]); q++)
			state[q] = DROPPED;
}

/* Runs the candidates in llama.cpp's order; marks state and records the
 * taken tokens (position, length, id) in *taken. */
static int run_candidates(const struct tokenizer *tk, const char *text, size_t len, bool parse_special,
			  uint8_t *state, struct tok_heap *taken)
{
	struct tok_heap h = {0};
	int rc = ING_OK;
	const struct tok_trie_node *node;
	for (size_t p = 0; p < len && !rc; p++) {
		uint32_t n = longest_at(tk, text, len, p, UINT32_MAX, parse_special, &node);
		if (n)
			rc = push_candidate(&h, p, n, node);
	}
	struct tok_heap_item it;
	while (!rc && tok_heap_pop(&h, &it)) {
		size_t p = (uint32_t)it.key;
		if (span_raw(state, p, it.a)) {
			take(tk, text, len, state, p, it.a, (int32_t)it.b);
			rc = tok_heap_push(taken, (struct tok_heap_item){.key = p, .a = it.a, .b = it.b});
			continue;
		}
		uint32_t n = longest_at(tk, text, len, p, it.a, parse_special, &node);
		if (n)
			rc = push_candidate(&h, p, n, node);
	}
	tok_heap_free(&h);
	return rc;
}

static int frag_push(struct tok_frag **v, size_t *n, size_t *cap, struct tok_frag f)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		struct tok_frag *p = ing_realloc(*v, c * sizeof *p);
		if (!p)
			return ING_ERR_NOMEM;
		*v = p;
		*cap = c;
	}
	(*v)[(*n)++] = f;
	return ING_OK;
}

/* Appends the maximal raw runs of state[from, to) as text fragments. */
static int push_raw_runs(const uint8_t *state, size_t from, size_t to, struct tok_frag **v,
			 size_t *n, size_t *cap)
{
	size_t p = from;
	while (p < to) {
		while (p < to && state[p] != RAW)
			p++;
		size_t start = p;
		while (p < to && state[p] == RAW)
			p++;
		if (p > start) {
			int rc = frag_push(v, n, cap, (struct tok_frag){-1, (uint32_t)start, (uint32_t)(p - start)});
			if (rc)
				return rc;
		}
	}
	return ING_OK;
}

/* Orders the taken tokens by position (the heap pops them in order). */
static int collect(const uint8_t *state, size_t len, struct tok_heap *taken, struct tok_frag **v,
		   size_t *n)
{
	size_t cap = 0, cursor = 0;
	struct tok_heap_item it;
	int rc = ING_OK;
	while (!rc && tok_heap_pop(taken, &it)) {
		rc = push_raw_runs(state, cursor, it.key, v, n, &cap);
		if (!rc)
			rc = frag_push(v, n, &cap, (struct tok_frag){(int32_t)it.b, (uint32_t)it.key, it.a});
		cursor = it.key + it.a;
	}
	if (!rc)
		rc = push_raw_runs(state, cursor, len, v, n, &cap);
	return rc;
}

int tok_partition(const struct tokenizer *tk, const char *text, size_t len, bool parse_special,
		  struct tok_frag **frags, size_t *n_frags, ing_err *err)
{
	*frags = NULL;
	*n_frags = 0;
	if (len == 0)
		return ING_OK;
	if (len > UINT32_MAX)
		return ing_err_set(err, ING_ERR_RANGE, "tokenizer: text of %zu bytes is too long", len);
	uint8_t *state = ing_calloc(len, 1);
	struct tok_heap taken = {0};
	int rc = state ? ING_OK : ING_ERR_NOMEM;
	if (!rc && tk->special.n > 0)
		rc = run_candidates(tk, text, len, parse_special, state, &taken);
	if (!rc)
		rc = collect(state, len, &taken, frags, n_frags);
	tok_heap_free(&taken);
	ing_free(state);
	if (rc) {
		ing_free(*frags);
		*frags = NULL;
		*n_frags = 0;
		return ing_err_set(err, rc, "tokenizer: out of memory partitioning %zu bytes", len);
	}
	return ING_OK;
}
