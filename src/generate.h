/* generate.h — single-sequence text generation (the CLI's loop).
 *
 * Prefills the prompt in chunks of cfg.prefill_chunk tokens (one
 * matrix-matrix step per chunk, logits only for the last row), then decodes
 * one token per step (or, with a drafter, verifies a draft of several in
 * one step and keeps the longest prefix the model agrees with) until
 * EOS/EOG (unless ignore_eos), n_predict tokens, the end of the context, a
 * grammar's end (cfg.matcher), or the callback asks to stop. Uses sequence
 * slot 0 of the forward context and starts from an empty cache. The
 * server's engine batches many sequences instead; this is the simple path. */
#ifndef INGOT_GENERATE_H
#define INGOT_GENERATE_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "forward.h"
#include "grammar.h"
#include "runner.h"
#include "sample.h"
#include "spec.h"
#include "spec_draft.h"
#include "tokenizer.h"

enum gen_stop {
	GEN_STOP_EOS,
	GEN_STOP_LENGTH,
	GEN_STOP_CONTEXT,
	GEN_STOP_CALLER,
	GEN_STOP_GRAMMAR, /* the grammar is complete, or allows no token */
};

struct gen_config {
	int64_t n_predict;     /* < 0: until EOS or the context is full */
	int64_t prefill_chunk; /* <= the forward context's max_batch */
	bool ignore_eos;
	/* Speculative decoding (optional): spec drafts up to spec_k tokens per
	 * step (spec_k + 1 <= the forward context's max_batch and max_logits);
	 * the output is exactly what plain decoding gives (a draft model with
	 * temperature > 0: distributed exactly as plain decoding's output). */
	struct spec_seq *spec;
	struct spec_draft *draft; /* or a draft model (spec_draft.h); one of the two */
	int spec_k;
	/* Constrained output (optional, not with speculation): every step's
	 * logits are masked to the tokens the matcher allows, and generation
	 * stops (GEN_STOP_GRAMMAR) once the text is complete and nothing may
	 * follow, or no token is allowed. The caller owns the matcher. */
	struct grammar_matcher *matcher;
};

struct gen_stats {
	int64_t n_prompt, n_gen;
	double t_prompt_s, t_gen_s; /* wall time of prefill / of decoding */
	enum gen_stop stop;
	/* speculation: steps with a draft, drafted and accepted tokens, how
	 * often draft position i was accepted, time spent drafting */
	int64_t n_steps, n_drafts, n_draft_tokens, n_accepted;
	int64_t accepted_per_pos[SPEC_MAX_K];
	double t_draft_s;
};

/* Called for every generated token (including an EOS that stops the run);
 * a nonzero return stops generation with GEN_STOP_CALLER. */
typedef int (*gen_token_fn)(void *ud, int32_t token);

/* Runs generation. The prompt must be non-empty and fit the context with
 * room for one more token (ING_ERR_RANGE otherwise, with sizes in err). */
int generate(struct runner *r, struct fwd *f, struct sampler *s, const struct tokenizer *tk,
	     const int32_t *prompt, int64_t n_prompt, const struct gen_config *cfg,
	     gen_token_fn on_token, void *ud, struct gen_stats *st, ing_err *err);

const char *gen_stop_name(enum gen_stop s);

#endif
