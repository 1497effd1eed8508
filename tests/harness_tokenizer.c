/* harness_tokenizer.c — fuzz body for encode, decode and the stream decoder.
 *
 * Input: byte 0 picks a vocabulary from shared/testdata/vocab (modulo the
 * six below; each is opened once per process and cached), bytes 1.. are
 * the text. The text is encoded with every flag combination; the ids go
 * through decode with every flag combination and through the stream
 * decoder one id at a time. The text is also read as a sequence of
 * arbitrary ids (3 bytes each, modulo the vocabulary size), which reach
 * byte tokens and pieces that split characters in ways encoding never
 * produces, and those are decoded and streamed too.
 *
 * Invariants (a violation aborts):
 *   - encode succeeds and every id is in range; ADD_SPECIAL only adds
 *     BOS/EOS around what the same text gives without it;
 *   - decode succeeds on in-range ids and refuses out-of-range ones;
 *   - every chunk the stream decoder returns is valid UTF-8, and without
 *     the vocabulary's space clean-up the chunks together equal decode's
 *     text with each invalid sequence replaced by U+FFFD (the maximal-
 *     subpart rule, computed here independently);
 *   - SentencePiece vocabularies give valid UTF-8 text back from
 *     decode(encode(text)), modulo one leading space, when the text holds
 *     no special-token text and no "<0x" (byte-token text, which the
 *     merges may legitimately turn into the byte it names); U+2581 comes
 *     back as a space. */
#include "harness_fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf.h"
#include "mem.h"
#include "tokenizer.h"
#include "tokenizer_int.h" /* clean_spaces and token attributes */

#define N_VOCABS 6

static const char *const vocab_names[N_VOCABS] = {
	"llama-spm", "gpt-2", "deepseek-llm", "falcon", "starcoder", "phi-3",
};

struct special_text {
	const char *s;
	size_t n;
};

static struct vocab_cache {
	struct tokenizer *tk;
	struct special_text *special; /* malloc'd [n_special], texts owned by tk */
	size_t n_special;
} cache[N_VOCABS];

/* ---- UTF-8, as the stream decoder promises it ---------------------------- */

/* Length a lead byte announces (well-formed UTF-8), 0 when it cannot lead. */
static size_t lead_length(uint8_t b)
{
	if (b < 0x80)
		return 1;
	if (b >= 0xC2 && b <= 0xDF)
		return 2;
	if (b >= 0xE0 && b <= 0xEF)
		return 3;
	if (b >= 0xF0 && b <= 0xF4)
		return 4;
	return 0;
}

/* Whether c may be byte k (1..) of a character led by lead. */
static bool continuation_ok(uint8_t lead, size_t k, uint8_t c)
{
	if ((c & 0xC0) != 0x80)
		return false;
	if (k != 1)
		return true;
	switch (lead) {
	case 0xE0: return c >= 0xA0;
	case 0xED: return c <= 0x9F;
	case 0xF0: return c >= 0x90;
	case 0xF4: return c <= 0x8F;
	default: return true;
	}
}

/* Length of the well-formed character at s[0..n), 0 when there is none;
 * *sub gets the length of the maximal subpart to replace otherwise. */
static size_t char_at(const uint8_t *s, size_t n, size_t *sub)
{
	size_t need = lead_length(s[0]), k = 1;
	while (need > 1 && k < need && k < n && continuation_ok(s[0], k, s[k]))
		k++;
	*sub = k;
	return need && k == need ? need : 0;
}

static bool utf8_valid(const uint8_t *s, size_t n)
{
	for (size_t i = 0, sub, c; i < n; i += c)
		if (!(c = char_at(s + i, n - i, &sub)))
			return false;
	return true;
}

/* s with each maximal ill-formed subpart replaced by U+FFFD, into out
 * (3 * n bytes); returns the length. */
static size_t utf8_replace(const uint8_t *s, size_t n, uint8_t *out)
{
	size_t o = 0;
	for (size_t i = 0, sub, c; i < n;) {
		if ((c = char_at(s + i, n - i, &sub))) {
			memcpy(out + o, s + i, c);
			o += c;
			i += c;
		} else {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i += sub;
		}
	}
	return o;
}

/* ---- checks ---------------------------------------------------------------- */

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		harness_fail("out of memory (%zu bytes)", n);
	return p;
}

static void check_ids(const struct tokenizer *tk, const struct token_ids *ids, const char *what)
{
	int32_t nv = tokenizer_n_vocab(tk);
	for (size_t i = 0; i < ids->n; i++)
		if (ids->ids[i] < 0 || ids->ids[i] >= nv)
			harness_fail("%s: id %d at %zu is not in 0..%d", what, ids->ids[i], i, nv - 1);
}

/* decode(ids, flags); the caller frees *out with ing_free. */
static void decode_ok(const struct tokenizer *tk, const int32_t *ids, size_t n, unsigned flags,
		      char **out, size_t *len)
{
	ing_err err = {0};
	int rc = tokenizer_decode(tk, ids, n, flags, out, len, &err);
	if (rc != ING_OK)
		harness_fail("decode of %zu in-range ids (flags %u) failed: %s", n, flags, err.msg);
	if ((*out)[*len] != '\0')
		harness_fail("decode output is not NUL-terminated");
}

/* Streams ids with flags; checks each chunk and compares the whole with
 * decode when the vocabulary applies no clean-up. */
static void check_stream(const struct tokenizer *tk, const int32_t *ids, size_t n, unsigned flags)
{
	struct tokenizer_stream s;
	ing_err err = {0};
	if (tokenizer_stream_init(&s, tk, flags, &err) != ING_OK)
		harness_fail("stream init: %s", err.msg);
	size_t cap = 3 * (n + 1) * (tokenizer_piece_max(tk) + 4), total = 0;
	uint8_t *got = xmalloc(cap);
	const char *chunk;
	size_t len;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && tokenizer_stream_feed(&s, ids[i], &chunk, &len, &err) != ING_OK)
			harness_fail("stream feed of id %d failed: %s", ids[i], err.msg);
		if (i == n)
			tokenizer_stream_flush(&s, &chunk, &len);
		if (len > s.cap || !utf8_valid((const uint8_t *)chunk, len))
			harness_fail("stream chunk %zu (%zu bytes) is not valid UTF-8 or overflows", i, len);
		if (total + len > cap)
			harness_fail("stream gave more than %zu bytes", cap);
		memcpy(got + total, chunk, len);
		total += len;
	}
	/* an out-of-range id is refused and leaves the stream as it was */
	if (tokenizer_stream_feed(&s, -1, &chunk, &len, &err) != ING_ERR_RANGE || len != 0 ||
	    tokenizer_stream_feed(&s, tokenizer_n_vocab(tk), &chunk, &len, &err) != ING_ERR_RANGE)
		harness_fail("stream accepted an out-of-range id");
	tokenizer_stream_free(&s);

	if (!tk->clean_spaces) {
		char *dec;
		size_t dn;
		decode_ok(tk, ids, n, flags, &dec, &dn);
		uint8_t *want = xmalloc(3 * dn);
		size_t wn = utf8_replace((const uint8_t *)dec, dn, want);
		if (wn != total || memcmp(want, got, wn) != 0)
			harness_fail("stream (%zu bytes) and decode (%zu bytes after replacement) "
				     "disagree, flags %u", total, wn, flags);
		free(want);
		ing_free(dec);
	}
	free(got);
}

static void check_decode(const struct tokenizer *tk, const int32_t *ids, size_t n)
{
	static const unsigned flag_sets[] = {
		0, TOKENIZER_RENDER_SPECIAL, TOKENIZER_REMOVE_SPECIAL,
		TOKENIZER_RENDER_SPECIAL | TOKENIZER_REMOVE_SPECIAL,
	};
	for (size_t f = 0; f < 4; f++) {
		char *dec;
		size_t dn;
		decode_ok(tk, ids, n, flag_sets[f], &dec, &dn);
		ing_free(dec);
	}
	check_stream(tk, ids, n, 0);
	check_stream(tk, ids, n, TOKENIZER_RENDER_SPECIAL);
}

/* encode(text, flags) into *ids (reset first). */
static void encode_ok(const struct tokenizer *tk, const uint8_t *text, size_t len, unsigned flags,
		      struct token_ids *ids)
{
	ing_err err = {0};
	ids->n = 0;
	int rc = tokenizer_encode(tk, (const char *)text, len, flags, ids, &err);
	if (rc != ING_OK)
		harness_fail("encode of %zu bytes (flags %u) failed: %s", len, flags, err.msg);
	check_ids(tk, ids, "encode");
}

/* with == [bos] + without + [eos] as the vocabulary adds them. */
static void check_add_special(const struct tokenizer *tk, const struct token_ids *with,
			      const struct token_ids *without)
{
	size_t head = tokenizer_adds_bos(tk), tail = tokenizer_adds_eos(tk);
	if (with->n != head + without->n + tail ||
	    (head && with->ids[0] != tokenizer_bos(tk)) ||
	    (tail && with->ids[with->n - 1] != tokenizer_eos(tk)) ||
	    (without->n && memcmp(with->ids + head, without->ids, without->n * sizeof *without->ids)))
		harness_fail("ADD_SPECIAL changed more than BOS/EOS");
}

/* Text holds something the round trip cannot give back by design. */
static bool roundtrip_excluded(const struct vocab_cache *v, const uint8_t *text, size_t len)
{
	if (!utf8_valid(text, len) || memmem(text, len, "<0x", 3))
		return true;
	for (size_t i = 0; v && i < v->n_special; i++)
		if (memmem(text, len, v->special[i].s, v->special[i].n))
			return true;
	return false;
}

static void check_roundtrip(const struct tokenizer *tk, const uint8_t *text, size_t len,
			    const struct token_ids *ids)
{
	/* U+2581 is SentencePiece's space: it decodes as ' ' */
	char *want = xmalloc(len), *dec;
	size_t wn = 0, dn;
	for (size_t i = 0; i < len;) {
		if (i + 3 <= len && memcmp(text + i, "\xe2\x96\x81", 3) == 0) {
			want[wn++] = ' ';
			i += 3;
		} else {
			want[wn++] = (char)text[i++];
		}
	}
	decode_ok(tk, ids->ids, ids->n, 0, &dec, &dn);
	bool same = (dn == wn && memcmp(dec, want, wn) == 0) ||
		    (dn == wn + 1 && dec[0] == ' ' && memcmp(dec + 1, want, wn) == 0);
	if (!same)
		harness_fail("SentencePiece round trip: %zu bytes of text came back as %zu bytes", wn, dn);
	ing_free(dec);
	free(want);
}

void harness_tokenizer_exercise(const struct tokenizer *tk, const uint8_t *text, size_t len,
				bool roundtrip)
{
	static const unsigned enc_flags[] = {
		0, TOKENIZER_ADD_SPECIAL, TOKENIZER_PARSE_SPECIAL,
		TOKENIZER_ADD_SPECIAL | TOKENIZER_PARSE_SPECIAL,
	};
	struct token_ids ids[4] = {{0}};
	for (size_t f = 0; f < 4; f++) {
		encode_ok(tk, text, len, enc_flags[f], &ids[f]);
		check_decode(tk, ids[f].ids, ids[f].n);
	}
	check_add_special(tk, &ids[1], &ids[0]);
	check_add_special(tk, &ids[3], &ids[2]);

	const struct vocab_cache *v = NULL;
	for (size_t i = 0; i < N_VOCABS; i++)
		if (cache[i].tk == tk)
			v = &cache[i];
	if (roundtrip && tokenizer_kind(tk) == TOKENIZER_SPM && !roundtrip_excluded(v, text, len)) {
		check_roundtrip(tk, text, len, &ids[0]);
		check_roundtrip(tk, text, len, &ids[1]);
	}
	for (size_t f = 0; f < 4; f++)
		token_ids_free(&ids[f]);

	/* the text as arbitrary ids */
	int32_t nv = tokenizer_n_vocab(tk);
	size_t n = len / 3;
	int32_t *raw = xmalloc((n + 1) * sizeof *raw);
	for (size_t i = 0; i < n; i++) {
		uint32_t x = text[3 * i] | (uint32_t)text[3 * i + 1] << 8 | (uint32_t)text[3 * i + 2] << 16;
		raw[i] = (int32_t)(x % (uint32_t)nv);
	}
	check_decode(tk, raw, n);
	raw[n] = nv; /* one id out of range at the end */
	char *dec;
	size_t dn;
	ing_err err = {0};
	if (tokenizer_decode(tk, raw, n + 1, 0, &dec, &dn, &err) != ING_ERR_RANGE || dec)
		harness_fail("decode accepted id %d of a %d-token vocabulary", nv, nv);
	free(raw);
}

/* ---- the vocabulary cache ----------------------------------------------- */

static struct vocab_cache *vocab_get(size_t i)
{
	struct vocab_cache *v = &cache[i];
	if (v->tk)
		return v;
	char path[4096];
	snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", check_testdata_dir(), vocab_names[i]);
	ing_err err = {0};
	struct gguf *g;
	if (gguf_open(path, &g, &err) != ING_OK)
		harness_fail("cannot open %s (set INGOT_TESTDATA): %s", path, err.msg);
	int rc = tokenizer_open(g, &v->tk, &err);
	gguf_close(g);
	if (rc != ING_OK)
		harness_fail("tokenizer_open %s: %s", path, err.msg);
	int32_t nv = tokenizer_n_vocab(v->tk);
	v->special = xmalloc((size_t)nv * sizeof *v->special);
	for (int32_t id = 0; id < nv; id++) {
		if (!(v->tk->tokens[id].attr & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)))
			continue;
		struct special_text *s = &v->special[v->n_special++];
		s->s = tokenizer_token_text(v->tk, id, &s->n);
	}
	return v;
}

const struct tokenizer *harness_vocab(size_t i)
{
	return vocab_get(i % N_VOCABS)->tk;
}

int harness_tokenizer(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	const struct vocab_cache *v = vocab_get(data[0] % N_VOCABS);
	harness_tokenizer_exercise(v->tk, data + 1, size - 1, true);
	return 0;
}

void harness_tokenizer_cleanup(void)
{
	for (size_t i = 0; i < N_VOCABS; i++) {
		tokenizer_close(cache[i].tk);
		free(cache[i].special);
		memset(&cache[i], 0, sizeof cache[i]);
	}
}
