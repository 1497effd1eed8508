/* logit_mask.h — a request's token restrictions: vLLM's allowed_token_ids
 * (only these ids may come next) and bad_words (token sequences that must
 * never be generated).
 *
 * A bad word of one token is masked at every step; a longer one has its
 * last token masked whenever the generated tokens end with the rest of it
 * (vLLM's rule: the prompt does not count, so a word the prompt ends with
 * half-way is not completed). Masking sets logits to -inf; it allocates
 * nothing. */
#ifndef INGOT_LOGIT_MASK_H
#define INGOT_LOGIT_MASK_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"

#define LOGIT_MASK_MAX_WORDS 64
#define LOGIT_MASK_MAX_WORD_LEN 64

struct logit_mask {
	int32_t *allowed;    /* [n_allowed] sorted, distinct; n_allowed 0: any id */
	int64_t n_allowed;
	int32_t *words;      /* the bad words' ids, one after another */
	int32_t word_len[LOGIT_MASK_MAX_WORDS];
	int n_words;
};

/* Copies allowed[0, n_allowed) and the n_words bad words (word i is
 * word_len[i] >= 1 ids from words, back to back) into *m. Ids must lie in
 * [0, n_vocab): ING_ERR_RANGE otherwise, ING_ERR_INVALID for too many or
 * too long words, ING_ERR_NOMEM. On failure *m holds nothing to free. */
int logit_mask_init(struct logit_mask *m, const int32_t *allowed, int64_t n_allowed,
		    const int32_t *words, const int32_t *word_len, int n_words, int64_t n_vocab,
		    ing_err *err);
void logit_mask_free(struct logit_mask *m);

/* Whether m restricts anything. */
bool logit_mask_active(const struct logit_mask *m);

/* Masks logits[0, n_vocab) for the step after generated[0, n_generated). */
void logit_mask_apply(const struct logit_mask *m, float *logits, int64_t n_vocab,
		      const int32_t *generated, int64_t n_generated);

/* Whether an allowed id keeps a finite logit (false: nothing may come
 * next). True when m allows any id. */
bool logit_mask_any_left(const struct logit_mask *m, const float *logits);

#endif
