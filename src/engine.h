/* engine.h — the serving engine: one thread that owns the model, the KV
 * cache and the scheduler, reached only through this interface.
 *
 * Requests are submitted from any thread (HTTP workers) and answered
 * through a callback that runs ON THE ENGINE THREAD: it must be quick and
 * must not call back into the engine except engine_cancel (typically it
 * pushes the event into the request's own queue and signals a condition
 * variable). Every accepted request gets exactly one final event
 * (ENGINE_EV_FINISHED or ENGINE_EV_ERROR), after which the engine never
 * touches its user data again.
 *
 * Each step the scheduler runs one forward pass over a mixed batch:
 * one decode row for every running sequence first, then prefill chunks of
 * waiting requests within the per-step token budget (continuous batching,
 * chunked prefill). Prompt blocks already in the prefix cache are reused
 * instead of recomputed. With a drafter (cfg.spec), a decoding sequence's
 * row is followed by its draft; the longest prefix of the draft the model
 * confirms is accepted (greedy and seeded outputs are exactly those of
 * plain decoding) and the rest rolled back. When the KV pool runs out the newest running
 * sequence is preempted (its blocks freed) and later recomputed from its
 * prompt plus what it had generated; the client sees no difference. */
#ifndef INGOT_ENGINE_H
#define INGOT_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "quant.h"
#include "runner.h"
#include "sample.h"
#include "spec.h"

struct model;
struct tokenizer;

struct engine_config {
	int max_num_seqs;       /* running sequences at once (batch rows for decode) */
	int64_t max_model_len;  /* prompt + generated tokens per request; lowered to
				 * what a kv_cache_mb pool holds when that is less
				 * (engine_config_of gives the value in force) */
	int64_t kv_cache_mb;    /* KV pool size; 0: enough for max_num_seqs full contexts */
	enum qtype kv_type;     /* KV cache rows: QTYPE_F16 (default), QTYPE_F32 or QTYPE_Q8_0 */
	int64_t step_tokens;    /* token budget per step (decode rows + prefill) */
	int64_t mixed_prefill_tokens; /* prefill tokens in a step that also decodes (0: no
				       * limit beyond step_tokens) */
	int max_waiting;        /* bounded waiting queue; beyond it submit fails */
	int threads;            /* compute threads (0: physical cores) */
	enum runner_kind runner;
	enum spec_method spec;  /* speculative decoding drafter (SPEC_NONE: off) */
	int spec_max;           /* longest draft per sequence per step (1..SPEC_MAX_K) */
	const char *draft_model; /* SPEC_DRAFT: the draft model's path (copied) */
};

/* Defaults: 16 sequences, 4096 tokens, 256 tokens per step (prefill fills
 * what decode rows leave: mixed_prefill_tokens 0), 64 waiting, an F16 KV
 * cache (FWD_KV_DEFAULT), no speculation (spec_max 16 when turned on). */
struct engine_config engine_config_default(void);

#define ENGINE_MAX_LOGPROBS 20
#define ENGINE_MAX_STOP_IDS 64

struct engine_params {
	const int32_t *prompt;   /* copied at submit */
	int64_t n_prompt;        /* >= 1 */
	int64_t max_tokens;      /* >= 1; the engine also stops at max_model_len */
	struct sample_params sample;
	bool ignore_eos;
	int top_logprobs;        /* 0..ENGINE_MAX_LOGPROBS alternatives per token; -1: none */
	const int32_t *bias_ids; /* logit_bias: n_bias (id, value) pairs, copied */
	const float *bias_values;
	int n_bias;
	bool no_spec;            /* never draft for this request */
	/* Optional constraint (response_format): the engine keeps a reference
	 * for the request's life and masks every step's logits so the output
	 * stays in the grammar; it stops (ENGINE_FINISH_STOP) once the output
	 * is complete and nothing may follow, and fails (ENGINE_EV_ERROR,
	 * error_code ING_ERR_UNSUPPORTED) when a step's mask is too costly to
	 * build (grammar_matcher_mask). NULL: unconstrained. */
	struct grammar *grammar;
	/* stop_token_ids: n_stop_ids ids that end generation as an end-of-
	 * generation token does (ENGINE_FINISH_STOP, is_eos: not text), even
	 * with ignore_eos; copied. */
	const int32_t *stop_ids;
	int n_stop_ids;          /* 0..ENGINE_MAX_STOP_IDS */
	/* min_tokens: until this many tokens are out, the end-of-generation
	 * tokens (unless ignore_eos) and the stop ids are masked (0: none) */
	int64_t min_tokens;
	/* Prompt scoring (vLLM's prompt_logprobs; completions' echo with
	 * logprobs): the log-probability of every prompt token after the first,
	 * with prompt_top (0..ENGINE_MAX_LOGPROBS) alternatives each, as
	 * ENGINE_EV_PROMPT_TOKEN events in prompt order, all before the first
	 * generated token. The logits of those positions must be computed, so
	 * the request does not take them from the prefix cache, and it scores
	 * at most ENGINE_SCORE_ROWS positions a step. */
	bool score_prompt;
	int prompt_top;
	/* vLLM's allowed_token_ids (n_allowed 0: any) and bad_words (n_bad_words
	 * token sequences, word i bad_word_len[i] ids from bad_words, back to
	 * back); see logit_mask.h. Copied. */
	const int32_t *allowed_ids;
	int64_t n_allowed;
	const int32_t *bad_words;
	const int32_t *bad_word_len;
	int n_bad_words;
	/* vLLM's cache_salt, as a 64-bit value (0: none): the request shares
	 * prefix-cache rows only with requests of the same value, so one
	 * tenant cannot learn from its time to first token what another's
	 * prompts were. */
	uint64_t cache_salt;
};

#define ENGINE_SCORE_ROWS 32

enum engine_event_kind {
	ENGINE_EV_TOKEN,    /* one generated token */
	ENGINE_EV_PROMPT_TOKEN, /* one scored prompt token (score_prompt) */
	ENGINE_EV_FINISHED, /* final: reason in finish */
	ENGINE_EV_ERROR,    /* final: message in error */
};

enum engine_finish { ENGINE_FINISH_STOP, ENGINE_FINISH_LENGTH, ENGINE_FINISH_CANCELLED };

struct engine_event {
	enum engine_event_kind kind;
	uint64_t id;
	/* ENGINE_EV_TOKEN and ENGINE_EV_PROMPT_TOKEN */
	int32_t token;
	float logprob;                       /* of token, when top_logprobs >= 0 (prompt: always) */
	int64_t pos;                         /* prompt token: its position (1 ..) */
	int32_t rank;                        /* prompt token: 1 + ids more likely than it */
	int n_top;                           /* alternatives filled below */
	int32_t top_ids[ENGINE_MAX_LOGPROBS];
	float top_logprobs[ENGINE_MAX_LOGPROBS];
	bool is_eos;                         /* token ended generation (not emitted as text) */
	/* ENGINE_EV_FINISHED */
	enum engine_finish finish;
	int64_t n_prompt, n_generated, n_cached_prompt;
	double queue_s, ttft_s, total_s;     /* time waiting, to first token, overall */
	/* ENGINE_EV_ERROR */
	const char *error;
	int error_code; /* ING_ERR_UNSUPPORTED: the request asks for what cannot be done
			 * (a grammar too complex to follow); others: the server's failure */
};

typedef void (*engine_event_fn)(void *ud, const struct engine_event *ev);

struct engine;

/* Loads the model and starts the engine thread. */
int engine_create(const char *model_path, const struct engine_config *cfg, struct engine **out,
		  ing_err *err);

/* Finishes every request (in-flight ones get ENGINE_FINISH_CANCELLED unless
 * drain is true, in which case it waits for them), stops the thread and
 * frees everything. Accepts NULL. */
void engine_destroy(struct engine *e, bool drain);

/* Immutable after create; safe from any thread. */
const struct model *engine_model(const struct engine *e);
const struct tokenizer *engine_tokenizer(const struct engine *e);
const struct engine_config *engine_config_of(const struct engine *e);

/* Queues a request. Thread-safe. On success *id identifies it and on_event
 * will be called (on the engine thread) until a final event. Errors (no
 * event is ever sent): ING_ERR_RANGE when prompt + max_tokens exceeds
 * max_model_len or a token id is outside the vocabulary, ING_ERR_INVALID
 * for bad parameters, ING_ERR_UNSUPPORTED for a grammar the engine cannot
 * follow, ING_ERR_BUSY when the waiting queue is full or the engine is
 * stopping (HTTP 429), ING_ERR_NOMEM. */
int engine_submit(struct engine *e, const struct engine_params *p, engine_event_fn on_event,
		  void *ud, uint64_t *id, ing_err *err);

/* Asks the engine to stop request id (client gone, stop string seen). The
 * request still gets its final event (ENGINE_FINISH_CANCELLED, or whatever
 * finished it first). Thread-safe; unknown ids are ignored. */
void engine_cancel(struct engine *e, uint64_t id);

#define ENGINE_STEP_ROWS_BINS 16

struct engine_stats {
	int running, waiting;
	double kv_usage;                 /* used blocks / pool blocks */
	int64_t kv_blocks;               /* pool blocks (of KV_BLOCK positions) */
	const char *kv_dtype;            /* "f16", "f32" or "q8_0" (static); NULL before setup */
	uint64_t prompt_tokens, generation_tokens;
	uint64_t requests_finished[3];   /* by enum engine_finish */
	uint64_t preemptions;
	uint64_t prefix_queries, prefix_hits; /* tokens */
	uint64_t steps;
	double step_seconds;             /* total time in forward steps */
	uint64_t batch_rows;             /* total rows over all steps */
	/* steps by rows: bin k counts steps of (2^(k-1), 2^k] rows (bin 0: 1
	 * row), the last bin also every larger step */
	uint64_t step_rows_bins[ENGINE_STEP_ROWS_BINS];
	/* speculative decoding: verified drafts, their tokens, accepted
	 * tokens, and how often draft position i was accepted */
	uint64_t spec_drafts, spec_draft_tokens, spec_accepted;
	uint64_t spec_accepted_per_pos[SPEC_MAX_K];
	int spec_positions;              /* draft positions in use (spec_max; 0: off) */
};

/* A consistent snapshot. Thread-safe. */
void engine_stats_get(struct engine *e, struct engine_stats *out);

#endif
