/* sample.h — turning logits into the next token.
 *
 * The chain follows llama.cpp's default order so that CLI users get the
 * behaviour they know: penalties -> top-k -> top-p -> min-p -> temperature
 * -> draw. Truncations are computed on the untempered distribution; the
 * temperature only reshapes what survives. top-p keeps the shortest
 * prefix of the tokens sorted by logit (ties: lower id first) whose
 * probabilities sum to at least top_p; min-p those with p >= min_p * the
 * largest p. temperature <= 0 is greedy (argmax after penalties; ties go
 * to the lowest id).
 *
 * A sampler owns its memory (allocated once in sampler_create for the
 * vocabulary size; the candidate buffers may be shared, see
 * sampler_create_sharing); sampling never allocates. Not thread-safe: one
 * sampler per sequence. */
#ifndef INGOT_SAMPLE_H
#define INGOT_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"

#define SAMPLE_MAX_WINDOW (1 << 20) /* longest penalty window */

struct sample_params {
	float temperature;       /* <= 0: greedy */
	int32_t top_k;           /* <= 0: off */
	float top_p;             /* >= 1: off */
	float min_p;             /* <= 0: off */
	float repeat_penalty;    /* 1: off; divides positive, multiplies negative logits */
	int32_t penalty_last_n;  /* tokens of history the penalties look at */
	float presence_penalty;  /* subtracted once from every token in the window */
	float frequency_penalty; /* subtracted per occurrence in the window */
	uint64_t seed;
};

/* llama.cpp's CLI defaults: temp 0.8, top-k 40, top-p 0.95, min-p 0.05,
 * no penalties (window 64), seed 0. */
struct sample_params sample_params_default(void);

/* 64 bits no two processes are likely to share, for a seed nobody gave
 * (`ingot run --seed -1`) and the server's per-process salt: the kernel's
 * entropy mixed with the clock and the pid (either alone where the other
 * fails). Never fails. Not for cryptographic use. */
uint64_t sample_seed_random(void);

/* Checks ranges (finite, top_p in (0,1], min_p in [0,1], penalty > 0, ...);
 * ING_ERR_RANGE with the offending field in err. */
int sample_params_check(const struct sample_params *p, ing_err *err);

struct sampler;

int sampler_create(const struct sample_params *p, int64_t n_vocab, struct sampler **out,
		   ing_err *err);
void sampler_free(struct sampler *s);

/* Like sampler_create, for a set of samplers used one at a time (the
 * engine's, one per KV slot): the candidate buffers, 4/5 of a sampler's
 * memory, are borrowed from owner (same vocabulary), which must be freed
 * after every sampler sharing them. sampler_candidates is then valid only
 * until any sampler of the set samples. */
int sampler_create_sharing(const struct sample_params *p, struct sampler *owner,
			   struct sampler **out, ing_err *err);

/* Makes s as sampler_create(p) would, reusing its memory (same vocabulary
 * size): new parameters, reseeded, no history. ING_ERR_RANGE on bad p (s
 * unchanged). */
int sampler_reset(struct sampler *s, const struct sample_params *p, ing_err *err);

/* Records a token of the sequence for the penalties: all three penalties
 * look at the last penalty_last_n accepted tokens (llama.cpp's CLI feeds
 * the prompt through here too). */
void sampler_accept(struct sampler *s, int32_t token);

/* Records a prompt token that only the repetition penalty sees, with no
 * window (vLLM/OpenAI semantics: presence and frequency penalties count
 * generated tokens only). */
void sampler_accept_prompt(struct sampler *s, int32_t token);

/* Picks the next token from logits[n_vocab]; logits is modified (penalties
 * applied in place, NaNs made -INFINITY, all 0 when every one is
 * -INFINITY). Tokens whose logit is -INFINITY (masked by a grammar) are
 * never picked unless every token is: then any is, uniformly; tokens of
 * +INFINITY, if any, are the only ones picked, uniformly. Does not call
 * sampler_accept. */
int32_t sampler_sample(struct sampler *s, float *logits);

/* True when sampling is a plain argmax of the logits as the model gave
 * them (greedy, no penalties): then the argmax the forward pass found
 * (fwd_argmax) can stand in for the row, through sampler_take_argmax. */
bool sampler_is_plain_greedy(const struct sampler *s);

/* sampler_sample for a plain-greedy sampler, given its row's argmax: the
 * same token and candidate state, without reading the logits. */
int32_t sampler_take_argmax(struct sampler *s, int32_t argmax);

/* sampler_sample in two halves, for speculative decoding: sampler_dist
 * computes the final distribution (penalties, truncation, temperature;
 * greedy: the argmax with probability 1) into the candidates without
 * drawing; sampler_draw then picks one with one uniform number (none when
 * greedy). dist + draw consumes exactly what sampler_sample does. */
int64_t sampler_dist(struct sampler *s, float *logits);
int32_t sampler_draw(struct sampler *s);

/* The parameters s samples with. */
const struct sample_params *sampler_params(const struct sampler *s);

/* The next uniform number in [0, 1) of the sampler's own generator. */
double sampler_uniform(struct sampler *s);

/* The generator's state, so that a sequence moving to another sampler (a
 * preempted request resuming in another KV slot) keeps its random stream. */
void sampler_rng_get(const struct sampler *s, uint64_t state[4]);
void sampler_rng_set(struct sampler *s, const uint64_t state[4]);

/* After sampler_sample / sampler_dist: the surviving candidates and their
 * final probabilities (made here, on the first call after a distribution),
 * in decreasing order when top-k applied, else in vocabulary order
 * (sorting the survivors for nothing is too slow). Valid until the
 * sampler (or one sharing its candidate buffers) samples again. */
int64_t sampler_candidates(struct sampler *s, const int32_t **ids, const float **probs);

#endif
