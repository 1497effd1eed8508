/* api_params.c — request fields of the generation endpoints, checked.
 *
 * Every field is optional unless said otherwise; JSON null means "not
 * given"; unknown fields are ignored. Anything present but of the wrong
 * type, non-finite or out of range is refused with 400 naming the field,
 * following OpenAI's documented ranges. Defaults are OpenAI's (temperature
 * 1, top_p 1, no top-k/min-p, no penalties, a fresh seed per request). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_int.h"
#include "spec.h"
#include "engine.h"
#include "grammar.h"
#include "hash.h"
#include "mem.h"

const cJSON *api_get(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return v && !cJSON_IsNull(v) ? v : NULL;
}

int api_get_bool(const cJSON *o, const char *key, bool *out, struct api_error *e)
{
	const cJSON *v = api_get(o, key);
	if (!v)
		return 0;
	if (!cJSON_IsBool(v))
		return api_fail(e, 400, key, "invalid_type", "'%s' must be a boolean", key);
	*out = cJSON_IsTrue(v);
	return 0;
}

int api_get_num(const cJSON *o, const char *key, double lo, double hi, double *out,
		struct api_error *e)
{
	const cJSON *v = api_get(o, key);
	if (!v)
		return 0;
	if (!cJSON_IsNumber(v))
		return api_fail(e, 400, key, "invalid_type", "'%s' must be a number", key);
	double d = v->valuedouble;
	if (!isfinite(d) || d < lo || d > hi)
		return api_fail(e, 400, key, "invalid_value", "'%s' must be between %g and %g",
				key, lo, hi);
	*out = d;
	return 0;
}

int api_get_int(const cJSON *o, const char *key, int64_t lo, int64_t hi, int64_t *out,
		struct api_error *e)
{
	const cJSON *v = api_get(o, key);
	if (!v)
		return 0;
	double d = v->valuedouble;
	if (!cJSON_IsNumber(v) || !isfinite(d) || d != floor(d))
		return api_fail(e, 400, key, "invalid_type", "'%s' must be an integer", key);
	/* (double)INT64_MAX rounds up to 2^63, which does not convert back */
	if (d < (double)lo || d > (double)hi || d >= 0x1p63)
		return api_fail(e, 400, key, "invalid_value", "'%s' must be between %lld and %lld",
				key, (long long)lo, (long long)hi);
	*out = (int64_t)d;
	return 0;
}

int api_token_id(const struct api *a, const cJSON *v, const char *key, int32_t *out,
		 struct api_error *e)
{
	double d = v->valuedouble;
	/* floor, not an int64_t round trip: casting 1e19 is undefined */
	if (!cJSON_IsNumber(v) || d != floor(d))
		return api_fail(e, 400, key, "invalid_type", "'%s' token ids must be integers", key);
	if (d < 0 || d >= a->n_vocab)
		return api_fail(e, 400, key, "invalid_value",
				"token id %.0f is outside the vocabulary (0..%d)", d, a->n_vocab - 1);
	*out = (int32_t)d;
	return 0;
}

/* ---- sampling ---- */

static int parse_sampling(struct api *a, const cJSON *b, struct gen_request *r,
			  struct api_error *e)
{
	double temp = 1, top_p = 1, min_p = 0, pres = 0, freq = 0, rep = 1;
	int64_t top_k = -1;
	if (api_get_num(b, "temperature", 0, 2, &temp, e) ||
	    api_get_num(b, "top_p", 0, 1, &top_p, e) ||
	    api_get_num(b, "min_p", 0, 1, &min_p, e) ||
	    api_get_num(b, "presence_penalty", -2, 2, &pres, e) ||
	    api_get_num(b, "frequency_penalty", -2, 2, &freq, e) ||
	    api_get_num(b, "repetition_penalty", 1e-6, 10, &rep, e) ||
	    api_get_int(b, "top_k", -1, a->n_vocab, &top_k, e))
		return -1;
	if (top_p <= 0)
		return api_fail(e, 400, "top_p", "invalid_value", "'top_p' must be in (0, 1]");
	r->sp = (struct sample_params){ .temperature = (float)temp, .top_k = (int32_t)top_k,
					.top_p = (float)top_p, .min_p = (float)min_p,
					.repeat_penalty = (float)rep,
					.penalty_last_n = (int32_t)a->max_model_len,
					.presence_penalty = (float)pres,
					.frequency_penalty = (float)freq };
	const cJSON *seed = api_get(b, "seed");
	int64_t s = 0;
	if (seed && api_get_int(b, "seed", INT64_MIN, INT64_MAX, &s, e))
		return -1;
	r->sp.seed = seed ? (uint64_t)s : api_unique(a);
	return 0;
}

/* ---- stop strings ---- */

static int stop_add(struct gen_request *r, const cJSON *v, struct api_error *e)
{
	if (!cJSON_IsString(v))
		return api_fail(e, 400, "stop", "invalid_type",
				"'stop' must be a string or an array of strings");
	size_t n = strlen(v->valuestring);
	if (n == 0)
		return 0;
	if (n > API_MAX_STOP_LEN)
		return api_fail(e, 400, "stop", "invalid_value", "stop strings are limited to %d bytes",
				API_MAX_STOP_LEN);
	if (r->n_stop == API_MAX_STOP)
		return api_fail(e, 400, "stop", "invalid_value", "at most %d stop strings",
				API_MAX_STOP);
	if (!(r->stop[r->n_stop] = ing_strndup(v->valuestring, n)))
		return api_fail(e, 500, NULL, NULL, "out of memory");
	r->n_stop++;
	return 0;
}

static int parse_stop(const cJSON *b, struct gen_request *r, struct api_error *e)
{
	const cJSON *s = api_get(b, "stop");
	if (!s)
		return 0;
	if (!cJSON_IsArray(s))
		return stop_add(r, s, e);
	const cJSON *it;
	cJSON_ArrayForEach(it, s)
		if (stop_add(r, it, e))
			return -1;
	return 0;
}

/* ---- logit_bias: {"token id": bias} ---- */

static int bias_add(struct api *a, struct gen_request *r, const cJSON *it, struct api_error *e)
{
	char *end;
	long long id = strtoll(it->string, &end, 10);
	if (end == it->string || *end || id < 0 || id >= a->n_vocab)
		return api_fail(e, 400, "logit_bias", "invalid_value",
				"logit_bias: '%.32s' is not a token id of this model", it->string);
	if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || fabs(it->valuedouble) > 100)
		return api_fail(e, 400, "logit_bias", "invalid_value",
				"logit_bias values must be numbers between -100 and 100");
	r->bias_ids[r->n_bias] = (int32_t)id;
	r->bias_vals[r->n_bias] = (float)it->valuedouble;
	r->n_bias++;
	return 0;
}

static int parse_bias(struct api *a, const cJSON *b, struct gen_request *r, struct api_error *e)
{
	const cJSON *lb = api_get(b, "logit_bias");
	if (!lb)
		return 0;
	if (!cJSON_IsObject(lb))
		return api_fail(e, 400, "logit_bias", "invalid_type", "'logit_bias' must be an object");
	int n = cJSON_GetArraySize(lb);
	if (n > API_MAX_BIAS)
		return api_fail(e, 400, "logit_bias", "invalid_value", "at most %d logit_bias entries",
				API_MAX_BIAS);
	r->bias_ids = ing_malloc_array((size_t)n + 1, sizeof *r->bias_ids);
	r->bias_vals = ing_malloc_array((size_t)n + 1, sizeof *r->bias_vals);
	if (!r->bias_ids || !r->bias_vals)
		return api_fail(e, 500, NULL, NULL, "out of memory");
	const cJSON *it;
	cJSON_ArrayForEach(it, lb)
		if (bias_add(a, r, it, e))
			return -1;
	return 0;
}

/* ---- vLLM's allowed_token_ids and bad_words (logit_mask.h) ---- */

static int parse_allowed(struct api *a, const cJSON *b, struct gen_request *r,
			 struct api_error *e)
{
	const cJSON *ids = api_get(b, "allowed_token_ids"), *it;
	if (!ids)
		return 0;
	int n = cJSON_IsArray(ids) ? cJSON_GetArraySize(ids) : 0;
	if (n == 0)
		return api_fail(e, 400, "allowed_token_ids", cJSON_IsArray(ids) ? "invalid_value"
									 : "invalid_type",
				"'allowed_token_ids' must be a non-empty array of token ids");
	if (!(r->allowed_ids = ing_malloc_array((size_t)n, sizeof *r->allowed_ids)))
		return api_fail(e, 500, NULL, NULL, "out of memory");
	cJSON_ArrayForEach(it, ids)
		if (api_token_id(a, it, "allowed_token_ids", &r->allowed_ids[r->n_allowed++], e))
			return -1;
	return 0;
}

/* Appends word's tokens (no special-token parsing) as a bad word, unless
 * it is the same as the previous one. */
static int bad_word_add(struct api *a, struct gen_request *r, const char *word,
			struct token_ids *all, struct api_error *e)
{
	struct token_ids t = { 0 };
	ing_err err;
	int rc = 0;
	if (tokenizer_encode(a->tk, word, strlen(word), 0, &t, &err))
		rc = api_fail(e, 400, "bad_words", "invalid_value", "cannot tokenize a bad word: %s",
			      err.msg);
	int prev = r->n_bad_words - 1;
	size_t at = all->n;
	if (!rc && prev >= 0 && (size_t)r->bad_word_len[prev] == t.n &&
	    !memcmp(all->ids + at - t.n, t.ids, t.n * sizeof *t.ids))
		t.n = 0; /* the spaced form tokenizes as the bare one */
	if (!rc && t.n > LOGIT_MASK_MAX_WORD_LEN)
		rc = api_fail(e, 400, "bad_words", "invalid_value",
			      "a bad word may be at most %d tokens", LOGIT_MASK_MAX_WORD_LEN);
	else if (!rc && t.n > 0 && r->n_bad_words == LOGIT_MASK_MAX_WORDS)
		rc = api_fail(e, 400, "bad_words", "invalid_value", "at most %d bad words (each "
			      "counts once alone and once after a space)", LOGIT_MASK_MAX_WORDS / 2);
	for (size_t i = 0; !rc && i < t.n; i++)
		if (token_ids_push(all, t.ids[i]))
			rc = api_fail(e, 500, NULL, NULL, "out of memory");
	if (!rc && t.n > 0)
		r->bad_word_len[r->n_bad_words++] = (int32_t)t.n;
	token_ids_free(&t);
	return rc;
}

/* Each word is banned as it tokenizes alone and after a space (vLLM:
 * leading whitespace stripped first); empty words are skipped. */
static int parse_bad_words(struct api *a, const cJSON *b, struct gen_request *r,
			   struct api_error *e)
{
	const cJSON *words = api_get(b, "bad_words"), *it;
	if (!words)
		return 0;
	if (!cJSON_IsArray(words))
		return api_fail(e, 400, "bad_words", "invalid_type",
				"'bad_words' must be an array of strings");
	struct token_ids all = { 0 };
	char buf[1 + API_MAX_STOP_LEN + 1];
	int rc = 0;
	cJSON_ArrayForEach(it, words) {
		if (!cJSON_IsString(it) || strlen(it->valuestring) > API_MAX_STOP_LEN) {
			rc = api_fail(e, 400, "bad_words", "invalid_value",
				      "'bad_words' must hold strings of at most %d bytes",
				      API_MAX_STOP_LEN);
			break;
		}
		const char *w = it->valuestring;
		while (isspace((unsigned char)*w))
			w++;
		if (!*w)
			continue;
		snprintf(buf, sizeof buf, " %s", w);
		if ((rc = bad_word_add(a, r, w, &all, e)) || (rc = bad_word_add(a, r, buf, &all, e)))
			break;
	}
	r->bad_words = all.ids; /* owned by r from here (freed with it) */
	return rc;
}

/* vLLM's stop_token_ids (ids in the vocabulary that end the output, as
 * EOS does) and min_tokens (no end before that many tokens, <= max_tokens). */
static int parse_stop_ids(struct api *a, const cJSON *b, struct gen_request *r,
			  struct api_error *e)
{
	const cJSON *ids = api_get(b, "stop_token_ids");
	if (ids && !cJSON_IsArray(ids))
		return api_fail(e, 400, "stop_token_ids", "invalid_type",
				"'stop_token_ids' must be an array of token ids");
	if (ids && cJSON_GetArraySize(ids) > API_MAX_STOP_IDS)
		return api_fail(e, 400, "stop_token_ids", "invalid_value", "at most %d stop_token_ids",
				API_MAX_STOP_IDS);
	const cJSON *it;
	cJSON_ArrayForEach(it, ids)
		if (api_token_id(a, it, "stop_token_ids", &r->stop_ids[r->n_stop_ids++], e))
			return -1;
	if (api_get_int(b, "min_tokens", 0, INT32_MAX, &r->min_tokens, e))
		return -1;
	if (r->max_tokens > 0 && r->min_tokens > r->max_tokens)
		return api_fail(e, 400, "min_tokens", "invalid_value",
				"'min_tokens' (%lld) must not exceed max_tokens (%lld)",
				(long long)r->min_tokens, (long long)r->max_tokens);
	return 0;
}

/* ---- logprobs: chat {logprobs: bool, top_logprobs: int}, completions {logprobs: int} ---- */

static int parse_logprobs(const cJSON *b, bool chat, struct gen_request *r, struct api_error *e)
{
	r->logprobs = -1;
	if (!chat) {
		int64_t k = -1;
		if (api_get_int(b, "logprobs", 0, ENGINE_MAX_LOGPROBS, &k, e))
			return -1;
		r->logprobs = (int)k;
		return 0;
	}
	bool on = false;
	int64_t k = -1;
	if (api_get_bool(b, "logprobs", &on, e) ||
	    api_get_int(b, "top_logprobs", 0, ENGINE_MAX_LOGPROBS, &k, e))
		return -1;
	if (k >= 0 && !on)
		return api_fail(e, 400, "top_logprobs", "invalid_value",
				"'top_logprobs' needs 'logprobs' set to true");
	if (on)
		r->logprobs = k > 0 ? (int)k : 0;
	return 0;
}

static int parse_stream(const cJSON *b, struct gen_request *r, struct api_error *e)
{
	if (api_get_bool(b, "stream", &r->stream, e))
		return -1;
	const cJSON *so = api_get(b, "stream_options");
	if (!so)
		return 0;
	if (!cJSON_IsObject(so))
		return api_fail(e, 400, "stream_options", "invalid_type",
				"'stream_options' must be an object");
	if (!r->stream)
		return api_fail(e, 400, "stream_options", "invalid_value",
				"'stream_options' is only allowed when 'stream' is true");
	bool each = false;
	if (api_get_bool(so, "include_usage", &r->include_usage, e) ||
	    api_get_bool(so, "continuous_usage_stats", &each, e))
		return -1;
	r->usage_each = each && r->include_usage;
	return 0;
}

/* "speculative": {"method": "none"} opts a request out of the server's
 * drafter; any drafter's name (or "auto") keeps the server's choice. */
static int parse_speculative(const cJSON *b, struct gen_request *r, struct api_error *e)
{
	const cJSON *sp = api_get(b, "speculative");
	if (!sp || cJSON_IsNull(sp))
		return 0;
	if (!cJSON_IsObject(sp))
		return api_fail(e, 400, "speculative", "invalid_type",
				"'speculative' must be an object");
	const cJSON *m = api_get(sp, "method");
	if (!m)
		return 0;
	if (!cJSON_IsString(m))
		return api_fail(e, 400, "speculative.method", "invalid_type",
				"'speculative.method' must be a string");
	int method = spec_method_parse(m->valuestring);
	if (method < 0 && strcmp(m->valuestring, "auto") != 0)
		return api_fail(e, 400, "speculative.method", "invalid_value",
				"'speculative.method' must be one of none, auto, ngram, suffix");
	r->no_spec = method == SPEC_NONE;
	return 0;
}

/* n, max_tokens (0 only with completions' echo: the prompt alone, as
 * OpenAI's legacy API and vLLM allow; absent on completions: 16) and
 * echo. */
static int parse_lengths(const cJSON *b, bool chat, struct gen_request *r, struct api_error *e)
{
	int64_t n = 1, mt = -1;
	if (api_get_int(b, "n", 1, API_MAX_N, &n, e) ||
	    api_get_int(b, "max_tokens", chat ? 1 : 0, INT32_MAX, &mt, e) ||
	    (chat && api_get_int(b, "max_completion_tokens", 1, INT32_MAX, &mt, e)) ||
	    (!chat && api_get_bool(b, "echo", &r->echo, e)))
		return -1;
	if (mt == 0 && !r->echo)
		return api_fail(e, 400, "max_tokens", "invalid_value",
				"'max_tokens' must be at least 1 (0 only with 'echo')");
	/* completions without the field: OpenAI's legacy default (and
	 * vLLM's), 16 tokens; null asks for no limit, as chat's default */
	if (!chat && !cJSON_GetObjectItemCaseSensitive(b, "max_tokens"))
		mt = 16;
	r->n = (int)n;
	r->echo_only = mt == 0;
	r->max_tokens = mt == 0 ? 1 : mt < 0 ? 0 : mt;
	return 0;
}

/* vLLM's prompt_logprobs: each prompt token's logprob, rank and that many
 * alternatives. Not with a stream (vLLM refuses it there too, but for 0,
 * which it ignores). After parse_stream. */
static int parse_prompt_logprobs(const cJSON *b, struct gen_request *r, struct api_error *e)
{
	int64_t k = -1;
	if (api_get_int(b, "prompt_logprobs", 0, ENGINE_MAX_LOGPROBS, &k, e))
		return -1;
	if (r->stream && k > 0)
		return api_fail(e, 400, "prompt_logprobs", "invalid_value",
				"'prompt_logprobs' is not available when 'stream' is true");
	r->prompt_logprobs = r->stream ? -1 : (int)k;
	return 0;
}

/* Fields ingot does not implement, refused with a 400 where ignoring them
 * would change what the client gets back: vLLM's use_beam_search,
 * logits_processors (vLLM too refuses them unless started to accept
 * them), priority other than 0 (vLLM: only with priority scheduling) and
 * a chat_template in the request (vLLM: only with
 * --trust-request-chat-template), and on completions a non-empty suffix
 * (insertion) and best_of other than n (candidates ranked by likelihood).
 * After parse_lengths (r->n). */
static int parse_unsupported(const cJSON *b, bool chat, const struct gen_request *r,
			     struct api_error *e)
{
	bool beam = false;
	int64_t prio = 0;
	if (api_get_bool(b, "use_beam_search", &beam, e) ||
	    api_get_int(b, "priority", INT32_MIN, INT32_MAX, &prio, e))
		return -1;
	if (beam)
		return api_fail(e, 400, "use_beam_search", "invalid_value",
				"'use_beam_search' is not supported");
	if (prio != 0)
		return api_fail(e, 400, "priority", "invalid_value", "'priority' other than 0 needs "
				"priority scheduling, which this server does not do");
	const cJSON *lp = api_get(b, "logits_processors");
	if (lp && !(cJSON_IsArray(lp) && cJSON_GetArraySize(lp) == 0))
		return api_fail(e, 400, "logits_processors", "invalid_value",
				"'logits_processors' are not accepted by this server");
	if (chat && api_get(b, "chat_template"))
		return api_fail(e, 400, "chat_template", "invalid_value",
				"a 'chat_template' in the request is not accepted; the server "
				"renders the model's own");
	if (chat)
		return 0;
	int64_t best_of = r->n;
	if (api_get_int(b, "best_of", 1, API_MAX_N, &best_of, e))
		return -1;
	const cJSON *suffix = api_get(b, "suffix");
	if (suffix && !cJSON_IsString(suffix))
		return api_fail(e, 400, "suffix", "invalid_type", "'suffix' must be a string");
	if (suffix && suffix->valuestring[0])
		return api_fail(e, 400, "suffix", "invalid_value", "'suffix' is not supported");
	if (best_of != r->n)
		return api_fail(e, 400, "best_of", "invalid_value",
				"'best_of' other than n (%d) is not supported", r->n);
	return 0;
}

/* Fields taken and not used, checked for the types OpenAI documents:
 * user a string, metadata an object of strings. */
static int parse_ignored(const cJSON *b, struct api_error *e)
{
	const cJSON *u = api_get(b, "user"), *m = api_get(b, "metadata"), *it;
	if (u && !cJSON_IsString(u))
		return api_fail(e, 400, "user", "invalid_type", "'user' must be a string");
	if (m && !cJSON_IsObject(m))
		return api_fail(e, 400, "metadata", "invalid_type",
				"'metadata' must be an object of strings");
	cJSON_ArrayForEach(it, m)
		if (!cJSON_IsString(it))
			return api_fail(e, 400, "metadata", "invalid_type",
					"'metadata' values must be strings ('%.64s' is not)",
					it->string);
	return 0;
}

/* vLLM's cache_salt: a non-empty string, hashed under the process's random
 * key into the root of the request's prefix-cache chain (kv.h), so only
 * requests with the same salt share cached rows, and no root can be aimed
 * at from outside. */
static int parse_cache_salt(const struct api *a, const cJSON *b, struct gen_request *r,
			    struct api_error *e)
{
	const cJSON *v = api_get(b, "cache_salt");
	if (!v)
		return 0;
	if (!cJSON_IsString(v))
		return api_fail(e, 400, "cache_salt", "invalid_type", "'cache_salt' must be a string");
	if (!v->valuestring[0])
		return api_fail(e, 400, "cache_salt", "invalid_value",
				"'cache_salt' must be non-empty if provided");
	uint64_t h = hash_mix64(a->salt ^ 0x5a17ull), n = 0;
	for (const unsigned char *c = (const unsigned char *)v->valuestring; *c; c++, n++)
		h = hash_mix64(h ^ *c);
	h = hash_mix64(h ^ n);
	r->cache_salt = h ? h : 1; /* 0 is the unsalted root */
	return 0;
}

int gen_request_parse(struct api *a, const cJSON *body, bool chat, struct gen_request *r,
		      struct api_error *e)
{
	*r = (struct gen_request){ .chat = chat, .logprobs = -1, .prompt_logprobs = -1,
				   .skip_special = true };
	if (parse_lengths(body, chat, r, e) || parse_unsupported(body, chat, r, e) ||
	    parse_ignored(body, e) ||
	    parse_sampling(a, body, r, e) ||
	    parse_stop(body, r, e) || parse_stop_ids(a, body, r, e) || parse_bias(a, body, r, e) ||
	    parse_allowed(a, body, r, e) || parse_bad_words(a, body, r, e) ||
	    parse_logprobs(body, chat, r, e) || parse_stream(body, r, e) ||
	    parse_prompt_logprobs(body, r, e) ||
	    api_get_bool(body, "ignore_eos", &r->ignore_eos, e) ||
	    api_get_bool(body, "include_stop_str_in_output", &r->include_stop, e) ||
	    api_get_bool(body, "skip_special_tokens", &r->skip_special, e) ||
	    api_get_bool(body, "return_token_ids", &r->return_token_ids, e) ||
	    api_get_bool(body, "return_tokens_as_token_ids", &r->tokens_as_ids, e) ||
	    parse_cache_salt(a, body, r, e) ||
	    parse_speculative(body, r, e) ||
	    api_parse_response_format(a, body, &r->grammar, e))
		return -1;
	return 0;
}

void gen_request_free(struct gen_request *r)
{
	for (int i = 0; i < r->n_prompts; i++)
		token_ids_free(&r->prompts[i]);
	ing_free(r->prompts);
	for (int i = 0; i < r->n_stop; i++)
		ing_free(r->stop[i]);
	ing_free(r->bias_ids);
	ing_free(r->bias_vals);
	ing_free(r->allowed_ids);
	ing_free(r->echo_text);
	ing_free(r->bad_words);
	grammar_free(r->grammar);
	ing_free(r->tool_prefix);
	ing_free(r->tool_name);
	ing_free(r->tool_close);
	cJSON_Delete(r->responses);
	*r = (struct gen_request){ 0 };
}
