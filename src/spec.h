/* spec.h — model-free drafters for speculative decoding.
 *
 * A drafter looks at a sequence's tokens so far (prompt and output) and
 * proposes up to k tokens that probably come next. The runner then feeds
 * the last real token plus the draft in one step and keeps the longest
 * prefix of the draft that the model itself would have produced
 * (spec_verify.c / the callers), so drafts change speed, never output.
 *
 *   SPEC_NGRAM   prompt lookup: find the latest earlier occurrence of the
 *                last n tokens (n = 4 down to 2) and propose what followed.
 *   SPEC_SUFFIX  suffix tries of bounded depth over the sequence and over a
 *                global cache of recently finished sequences. Each node
 *                counts how often its string occurred and which token
 *                followed most often; a draft follows the most frequent
 *                continuation of the longest matching suffix while the
 *                running product of continuation frequencies stays above a
 *                threshold, and never further than twice the match length.
 *
 * Draft length adapts per sequence: after a fully accepted draft the cap
 * doubles (up to k_max), after a rejection it drops to accepted + 1.
 *
 * Memory: everything is allocated in spec_seq_create / spec_cache_create
 * for a maximum sequence length; appending and drafting never allocate.
 * When a trie fills up it stops growing (sequence) or starts over
 * (global cache). Not thread-safe: one owner (the engine thread or the
 * CLI loop). */
#ifndef INGOT_SPEC_H
#define INGOT_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"

#define SPEC_MAX_K 32 /* longest draft any configuration may ask for */

enum spec_method { SPEC_NONE, SPEC_NGRAM, SPEC_SUFFIX, SPEC_DRAFT };

/* "none" / "ngram" / "suffix" / "draft" -> method; -1 when unknown. */
int spec_method_parse(const char *name);
const char *spec_method_name(enum spec_method m);

struct spec_cache; /* global suffix trie of recent sequences */
struct spec_seq;   /* one sequence's drafter state */

/* A cache of at most max_nodes trie nodes (0: a default of 1M). */
int spec_cache_create(int64_t max_nodes, struct spec_cache **out, ing_err *err);
void spec_cache_free(struct spec_cache *c);

/* Adds a finished sequence's tokens (typically its output, or the whole
 * prompt + output) to the cache; starts the cache over when full. */
void spec_cache_add(struct spec_cache *c, const int32_t *tokens, int64_t n);

/* Drafter state for sequences of at most max_len tokens. cache may be NULL
 * (and is borrowed: it must outlive the sequence). */
int spec_seq_create(enum spec_method m, int k_max, int64_t max_len, struct spec_cache *cache,
		    struct spec_seq **out, ing_err *err);
void spec_seq_free(struct spec_seq *s);

/* Forgets everything about the previous sequence (O(1)), isolation
 * included. */
void spec_seq_reset(struct spec_seq *s);

/* Until the next reset, drafts come from this sequence's own tokens only,
 * never from the global cache: for a sequence that must not read other
 * sequences' data (a request with a cache salt; the caller also keeps its
 * tokens out of the cache). */
void spec_seq_isolate(struct spec_seq *s);

/* Appends tokens to the sequence the drafter knows (prompt first, then
 * every accepted token, in order). Tokens past max_len are ignored. */
void spec_seq_append(struct spec_seq *s, const int32_t *tokens, int64_t n);

/* Proposes up to min(k, the adaptive cap) tokens into draft[]; returns how
 * many (0: no confident draft). */
int spec_seq_draft(struct spec_seq *s, int k, int32_t *draft);

/* Reports how a draft of n_draft tokens fared (accepted: its longest
 * prefix the model confirmed) to adapt the draft length. */
void spec_seq_feedback(struct spec_seq *s, int n_draft, int accepted);

/* The adaptive draft cap every drafter follows: spec_cap_first(k_max) to
 * begin with; after a draft of n_draft tokens of which `accepted` were
 * confirmed, doubled (up to k_max) when all were, else accepted + 1. */
int spec_cap_first(int k_max);
int spec_cap_next(int cap, int k_max, int n_draft, int accepted);

/* Tokens appended so far (bounded by max_len). */
int64_t spec_seq_len(const struct spec_seq *s);

/* Speculative sampling (spec_accept.c): x was drafted from q; p is the
 * target's final distribution at the same position (both dense over V
 * tokens, summing to 1). Returns true when x is accepted (*out = x), else
 * false with *out drawn from norm(max(0, p - q)). u_accept and u_resample
 * are uniform in [0, 1). */
bool spec_accept_draft(const float *p, const float *q, int64_t V, int32_t x, double u_accept,
		       double u_resample, int32_t *out);

/* spec_accept_draft with p = the sampler's final distribution of logits
 * (penalties, truncation, temperature: sampler_dist) and both uniforms from
 * its own generator. p_scratch holds V floats. */
struct sampler;
bool spec_accept_sampled(struct sampler *s, float *logits, const float *q, int64_t V, int32_t x,
			 float *p_scratch, int32_t *out);

#endif
