/* grammar_vocab.c — the token trie the mask walk runs over.
 *
 * Every token that decodes to at least one byte and is not a control,
 * unused or end-of-generation token is sorted by its bytes; the trie is
 * laid out in preorder (a node's subtree follows it, `end` points past
 * it), so the walk is a forward scan that jumps over rejected subtrees.
 * Tokens sharing the same bytes are consecutive in the sorted order, so a
 * node needs only a range. For Gemma 3's 262k vocabulary this is about a
 * million nodes (16 MB), built in a fraction of a second. A second, small
 * trie holds the tokens that are not plain text (grammar_int.h). */
#include <stdlib.h>
#include <string.h>

#include "grammar_int.h"
#include "mem.h"
#include "tokenizer.h"

struct piece {
	const unsigned char *p;
	uint32_t n;
	int32_t id;
};

static int piece_cmp(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;
	uint32_t n = x->n < y->n ? x->n : y->n;
	int c = memcmp(x->p, y->p, n);
	if (c)
		return c;
	if (x->n != y->n)
		return x->n < y->n ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static bool in_trie(const struct tokenizer *tk, int32_t id)
{
	enum token_type t = tokenizer_token_type(tk, id);
	return !tokenizer_is_eog(tk, id) && !tokenizer_is_control(tk, id) &&
	       t != TOKEN_TYPE_UNUSED;
}

/* Collects the pieces of the trie's tokens and the end-of-generation ids. */
static int collect(struct grammar_vocab *v, struct piece **out, int32_t *n_out)
{
	const int32_t V = v->n_vocab;
	struct piece *ps = ing_malloc_array((size_t)V + 1, sizeof *ps);
	v->eog = ing_malloc_array((size_t)V + 1, sizeof *v->eog);
	if (!ps || !v->eog) {
		ing_free(ps);
		return ING_ERR_NOMEM;
	}
	int32_t n = 0;
	for (int32_t id = 0; id < V; id++) {
		if (tokenizer_is_eog(v->tk, id)) {
			v->eog[v->n_eog++] = id;
			continue;
		}
		size_t len;
		const char *p = tokenizer_piece(v->tk, id, 0, &len);
		if (!in_trie(v->tk, id) || len == 0 || len > 65535)
			continue;
		ps[n++] = (struct piece){ (const unsigned char *)p, (uint32_t)len, id };
	}
	qsort(ps, (size_t)n, sizeof *ps, piece_cmp);
	*out = ps;
	*n_out = n;
	return ING_OK;
}

/* Number of trie nodes: the sum of piece lengths minus shared prefixes. */
static int64_t count_nodes(const struct piece *ps, int32_t n, int *max_depth)
{
	int64_t total = 0;
	*max_depth = 0;
	for (int32_t i = 0; i < n; i++) {
		uint32_t l = 0;
		if (i > 0)
			while (l < ps[i].n && l < ps[i - 1].n && ps[i].p[l] == ps[i - 1].p[l])
				l++;
		total += ps[i].n - l;
		if ((int)ps[i].n > *max_depth)
			*max_depth = (int)ps[i].n;
	}
	return total;
}

/* path: [max_depth + 1] scratch, the node at each depth of the current
 * token. */
static void build(struct gtrie *v, const struct piece *ps, int32_t n, int32_t *path)
{
	int32_t depth = 0, nn = 0;
	for (int32_t i = 0; i < n; i++) {
		uint32_t l = 0;
		if (i > 0)
			while (l < ps[i].n && l < ps[i - 1].n && ps[i].p[l] == ps[i - 1].p[l])
				l++;
		for (; depth > (int32_t)l; depth--) /* close nodes off the shared prefix */
			v->nodes[path[depth]].end = nn;
		for (uint32_t d = l; d < ps[i].n; d++) {
			v->nodes[nn] = (struct gnode){ .tok_lo = -1, .depth = (uint16_t)(d + 1),
						       .byte = ps[i].p[d] };
			path[++depth] = nn++;
		}
		struct gnode *nd = &v->nodes[path[depth]];
		if (nd->tok_n == 0)
			nd->tok_lo = i;
		nd->tok_n++;
		v->sorted[i] = ps[i].id;
	}
	for (; depth > 0; depth--)
		v->nodes[path[depth]].end = nn;
	v->n_nodes = nn;
}

/* Whole UTF-8 characters of JSON string content only (see grammar_int.h);
 * the byte ranges are those of the string grammar in grammar_schema.c. */
static bool plain_text(const unsigned char *p, uint32_t n)
{
	for (uint32_t i = 0; i < n;) {
		unsigned c = p[i], lo = 0x80, hi = 0xbf, len;
		if (c < 0x80) {
			if (c < 0x20 || c == '"' || c == '\\')
				return false;
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			len = 2;
		else if (c >= 0xe0 && c <= 0xef)
			len = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
		else if (c >= 0xf0 && c <= 0xf4)
			len = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
		else
			return false;
		if (i + len > n || p[i + 1] < lo || p[i + 1] > hi)
			return false;
		for (uint32_t k = 2; k < len; k++)
			if (p[i + k] < 0x80 || p[i + k] > 0xbf)
				return false;
		i += len;
	}
	return true;
}

/* Builds trie t over the n sorted pieces ps. */
static int trie_build(struct gtrie *t, const struct piece *ps, int32_t n)
{
	int64_t nodes = count_nodes(ps, n, &t->max_depth);
	t->nodes = ing_malloc_array((size_t)nodes + 1, sizeof *t->nodes);
	t->sorted = ing_malloc_array((size_t)n + 1, sizeof *t->sorted);
	int32_t *path = ing_malloc_array((size_t)t->max_depth + 1, sizeof *path);
	int rc = ING_OK;
	if (!t->nodes || !t->sorted || !path || nodes > INT32_MAX - 1)
		rc = ING_ERR_NOMEM;
	else
		build(t, ps, n, path);
	ing_free(path);
	return rc;
}

static void trie_free(struct gtrie *t)
{
	ing_free(t->nodes);
	ing_free(t->sorted);
}

static int chars_of(const struct piece *p)
{
	int c = 0;
	for (uint32_t i = 0; i < p->n; i++)
		c += (p->p[i] & 0xc0) != 0x80;
	return c > GRAMMAR_PLAIN_MAXLEN ? GRAMMAR_PLAIN_MAXLEN + 1 : c;
}

/* Moves the plain-text pieces out of ps (keeping order) into plain_bits and
 * plain_sorted (a counting sort by characters); returns how many are left,
 * or -1 on allocation failure. */
static int32_t split_plain(struct grammar_vocab *v, struct piece *ps, int32_t n)
{
	int64_t count[GRAMMAR_PLAIN_MAXLEN + 2] = { 0 };
	for (int32_t i = 0; i < n; i++) {
		if (plain_text(ps[i].p, ps[i].n)) {
			v->plain_bits[ps[i].id >> 5] |= 1u << (ps[i].id & 31);
			v->n_plain++;
			count[chars_of(&ps[i])]++;
		}
	}
	v->plain_sorted = ing_malloc_array((size_t)v->n_plain + 1, sizeof *v->plain_sorted);
	if (!v->plain_sorted)
		return -1;
	int64_t at[GRAMMAR_PLAIN_MAXLEN + 2], sum = 0;
	for (int c = 0; c <= GRAMMAR_PLAIN_MAXLEN + 1; c++) {
		at[c] = sum;
		sum += count[c];
		if (c <= GRAMMAR_PLAIN_MAXLEN)
			v->plain_upto[c] = sum;
	}
	int32_t k = 0;
	for (int32_t i = 0; i < n; i++) {
		if (plain_text(ps[i].p, ps[i].n))
			v->plain_sorted[at[chars_of(&ps[i])]++] = ps[i].id;
		else
			ps[k++] = ps[i];
	}
	return k;
}

int grammar_vocab_create(const struct tokenizer *tk, struct grammar_vocab **out, ing_err *err)
{
	*out = NULL;
	struct grammar_vocab *v = ing_calloc(1, sizeof *v);
	if (!v)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	v->tk = tk;
	v->n_vocab = tokenizer_n_vocab(tk);
	struct piece *ps = NULL;
	int32_t n = 0;
	int rc = collect(v, &ps, &n);
	if (rc == ING_OK)
		rc = trie_build(&v->all, ps, n);
	if (rc == ING_OK) {
		v->plain_bits = ing_calloc(((size_t)v->n_vocab + 31) / 32, sizeof *v->plain_bits);
		int32_t rest = v->plain_bits ? split_plain(v, ps, n) : -1;
		rc = rest >= 0 ? trie_build(&v->other, ps, rest) : ING_ERR_NOMEM;
	}
	ing_free(ps);
	if (rc) {
		grammar_vocab_free(v);
		return ing_err_set(err, rc, "out of memory (token trie)");
	}
	*out = v;
	return ING_OK;
}

void grammar_vocab_free(struct grammar_vocab *v)
{
	if (!v)
		return;
	trie_free(&v->all);
	trie_free(&v->other);
	ing_free(v->plain_bits);
	ing_free(v->plain_sorted);
	ing_free(v->eog);
	ing_free(v);
}
