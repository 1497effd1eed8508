/* logit_mask.c — allowed token ids and bad words (see logit_mask.h).
 *
 * The allowed ids are kept sorted so that one pass over the vocabulary
 * masks the rest; bad words are checked against the tail of the generated
 * tokens each step (at most LOGIT_MASK_MAX_WORDS of them, each short). */
#include "logit_mask.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"

static int id_cmp(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

static int ids_check(const int32_t *ids, int64_t n, int64_t n_vocab, const char *what,
		     ing_err *err)
{
	for (int64_t i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= n_vocab)
			return ing_err_set(err, ING_ERR_RANGE, "%s: token id %d is outside the "
					   "vocabulary (0..%lld)", what, ids[i], (long long)n_vocab - 1);
	return ING_OK;
}

int logit_mask_init(struct logit_mask *m, const int32_t *allowed, int64_t n_allowed,
		    const int32_t *words, const int32_t *word_len, int n_words, int64_t n_vocab,
		    ing_err *err)
{
	*m = (struct logit_mask){ 0 };
	if (n_words < 0 || n_words > LOGIT_MASK_MAX_WORDS)
		return ing_err_set(err, ING_ERR_INVALID, "at most %d bad words", LOGIT_MASK_MAX_WORDS);
	int64_t n_ids = 0;
	for (int i = 0; i < n_words; i++) {
		if (word_len[i] < 1 || word_len[i] > LOGIT_MASK_MAX_WORD_LEN)
			return ing_err_set(err, ING_ERR_INVALID, "a bad word must be 1 to %d tokens",
					   LOGIT_MASK_MAX_WORD_LEN);
		n_ids += word_len[i];
	}
	int rc = ids_check(allowed, n_allowed, n_vocab, "allowed_token_ids", err);
	if (!rc)
		rc = ids_check(words, n_ids, n_vocab, "bad_words", err);
	if (rc)
		return rc;
	m->allowed = ing_malloc_array((size_t)n_allowed + 1, sizeof *m->allowed);
	m->words = ing_malloc_array((size_t)n_ids + 1, sizeof *m->words);
	if (!m->allowed || !m->words) {
		logit_mask_free(m);
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	}
	if (n_allowed > 0)
		memcpy(m->allowed, allowed, (size_t)n_allowed * sizeof *allowed);
	qsort(m->allowed, (size_t)n_allowed, sizeof *m->allowed, id_cmp);
	for (int64_t i = 0; i < n_allowed; i++) /* drop repeats */
		if (m->n_allowed == 0 || m->allowed[m->n_allowed - 1] != m->allowed[i])
			m->allowed[m->n_allowed++] = m->allowed[i];
	if (n_ids > 0)
		memcpy(m->words, words, (size_t)n_ids * sizeof *words);
	if (n_words > 0)
		memcpy(m->word_len, word_len, (size_t)n_words * sizeof *word_len);
	m->n_words = n_words;
	return ING_OK;
}

void logit_mask_free(struct logit_mask *m)
{
	ing_free(m->allowed);
	ing_free(m->words);
	*m = (struct logit_mask){ 0 };
}

bool logit_mask_active(const struct logit_mask *m)
{
	return m->n_allowed > 0 || m->n_words > 0;
}

void logit_mask_apply(const struct logit_mask *m, float *logits, int64_t n_vocab,
		      const int32_t *generated, int64_t n_generated)
{
	if (m->n_allowed > 0) {
		int64_t a = 0;
		for (int64_t v = 0; v < n_vocab; v++) {
			if (a < m->n_allowed && m->allowed[a] == v)
				a++;
			else
				logits[v] = -INFINITY;
		}
	}
	const int32_t *w = m->words;
	for (int i = 0; i < m->n_words; w += m->word_len[i++]) {
		int64_t pre = m->word_len[i] - 1; /* the word's ids before its last */
		if (pre <= n_generated && (pre == 0 || /* generated may be NULL then */
					   !memcmp(generated + n_generated - pre, w,
						   (size_t)pre * sizeof *w)))
			logits[w[pre]] = -INFINITY;
	}
}

bool logit_mask_any_left(const struct logit_mask *m, const float *logits)
{
	for (int64_t i = 0; i < m->n_allowed; i++)
		if (logits[m->allowed[i]] != -INFINITY)
			return true;
	return m->n_allowed == 0;
}
