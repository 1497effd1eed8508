/* spec_draft.h — a small draft model that proposes tokens for a larger
 * target model sharing its vocabulary (speculative decoding's classic
 * form). The draft keeps its own KV cache of the sequence; each proposal
 * first feeds it the tokens it has not seen (catch-up), then runs it k
 * times at batch 1. Greedy targets take the draft's argmax; sampling
 * targets get the draft sampled at the same temperature/top-k/top-p/min-p
 * and its distributions q (dense, for spec_accept_draft).
 *
 * Memory: everything is allocated in spec_draft_create; proposing does not
 * allocate. Not thread-safe (one sequence, one owner). */
#ifndef INGOT_SPEC_DRAFT_H
#define INGOT_SPEC_DRAFT_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "pool.h"
#include "runner.h"
#include "sample.h"

struct tokenizer;
struct spec_draft;

/* Opens the draft model at path and checks that its vocabulary is the
 * target's token for token (ING_ERR_UNSUPPORTED naming the first
 * difference otherwise). The draft runs on the target's pool (borrowed)
 * with the given runner kind; sequences of at most n_ctx tokens, drafts of
 * at most k_max. sp: the target's sampling parameters (penalties are not
 * applied to the draft: any proposal distribution keeps sampling exact). */
int spec_draft_create(const char *path, const struct tokenizer *target_tk, struct pool *pool,
		      enum runner_kind kind, int64_t n_ctx, int k_max,
		      const struct sample_params *sp, struct spec_draft **out, ing_err *err);
void spec_draft_free(struct spec_draft *d);

/* Starts a new sequence. */
void spec_draft_reset(struct spec_draft *d);

/* Appends tokens of the sequence (prompt, then every accepted token). */
void spec_draft_append(struct spec_draft *d, const int32_t *tokens, int64_t n);

/* Proposes k tokens after the sequence so far into draft[] (*n_out = k,
 * or fewer near the end of the context). */
int spec_draft_propose(struct spec_draft *d, int k, int32_t *draft, int *n_out, ing_err *err);

/* The draft's distribution (dense, V floats) that draft token i was drawn
 * from; valid after spec_draft_propose for a sampling target. */
const float *spec_draft_q(const struct spec_draft *d, int i);

/* Whether the target samples (q and rejection sampling) or is greedy. */
bool spec_draft_sampling(const struct spec_draft *d);

/* Scratch of V floats the caller may use for the target's dense p. */
float *spec_draft_p_scratch(struct spec_draft *d);

#endif
