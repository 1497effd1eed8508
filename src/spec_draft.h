/* spec_draft.h — a small draft model that proposes tokens for a larger
 * target model sharing its vocabulary (speculative decoding's classic
 * form), for n_seq sequences at once (slots, like the target's KV slots).
 *
 * Each slot knows its sequence's tokens and keeps them in the draft's own
 * KV cache. A proposal first feeds the draft what it has not seen
 * (catch-up; rows of an earlier draft that the sequence confirmed are
 * kept), then runs it k times at batch 1. Greedy targets take the draft's
 * argmax; sampling targets get the draft sampled at the request's
 * temperature/top-k/top-p/min-p and its distributions q (dense, for
 * spec_accept_draft), which keeps the output distributed exactly as the
 * target's.
 *
 * Memory: everything is allocated in spec_draft_create (q pages are
 * touched only by sampling slots); proposing does not allocate. Not
 * thread-safe (one owner: the CLI loop or the engine thread). */
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
 * with the given runner kind: n_seq slots of sequences of at most n_ctx
 * tokens, drafts of at most k_max. */
int spec_draft_create(const char *path, const struct tokenizer *target_tk, struct pool *pool,
		      enum runner_kind kind, int64_t n_ctx, int n_seq, int k_max,
		      struct spec_draft **out, ing_err *err);
void spec_draft_free(struct spec_draft *d);

/* Starts a new sequence in slot with the target's sampling parameters
 * (penalties are not applied to the draft: any proposal distribution
 * keeps sampling exact). */
int spec_draft_start(struct spec_draft *d, int slot, const struct sample_params *sp,
		     ing_err *err);

/* Appends tokens of slot's sequence (prompt, then every accepted token). */
void spec_draft_append(struct spec_draft *d, int slot, const int32_t *tokens, int64_t n);

/* Proposes up to min(k, the slot's adaptive cap) tokens after slot's
 * sequence into draft[] (*n_out). */
int spec_draft_propose(struct spec_draft *d, int slot, int k, int32_t *draft, int *n_out,
		       ing_err *err);

/* Reports how slot's draft of n_draft tokens fared (accepted: the prefix
 * the target confirmed) to adapt its cap (spec_cap_next). */
void spec_draft_feedback(struct spec_draft *d, int slot, int n_draft, int accepted);

/* Whether slot's target samples (then accept by spec_accept_draft with
 * spec_draft_q) or is greedy (accept while the draft equals the argmax). */
bool spec_draft_sampling(const struct spec_draft *d, int slot);

/* The draft's distribution (dense, V floats) that slot's draft token i
 * was drawn from; valid after spec_draft_propose for a sampling slot. */
const float *spec_draft_q(const struct spec_draft *d, int slot, int i);

/* Scratch of V floats the caller may use for the target's dense p. */
float *spec_draft_p_scratch(struct spec_draft *d);

#endif
