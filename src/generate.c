/* generate.c — see generate.h. */
#include "generate.h"

#include "clock.h"
#include "kv.h"
#include "quant.h"

const char *gen_stop_name(enum gen_stop s)
{
	switch (s) {
	case GEN_STOP_EOS: return "eos";
	case GEN_STOP_LENGTH: return "length";
	case GEN_STOP_CONTEXT: return "context full";
	case GEN_STOP_CALLER: return "stopped";
	case GEN_STOP_GRAMMAR: return "grammar complete";
	}
	return "?";
}

static int prefill(struct runner *r, struct fwd *f, const int32_t *prompt, int64_t n,
		   int64_t chunk, bool argmax, ing_err *err)
{
	int32_t pos[512], seq[512] = { 0 };
	static const bool no_logits[512]; /* a chunk before the last: its LM head is waste */
	if (chunk > 512)
		chunk = 512;
	for (int64_t i0 = 0; i0 < n; i0 += chunk) {
		int64_t cnt = n - i0 < chunk ? n - i0 : chunk;
		for (int64_t i = 0; i < cnt; i++)
			pos[i] = (int32_t)(i0 + i);
		struct fwd_batch b = { .n = cnt, .tokens = prompt + i0, .pos = pos, .seq = seq,
				       .want_logits = i0 + cnt < n ? no_logits : NULL,
				       .argmax = argmax, .argmax_only = argmax };
		int rc = runner_step(r, &b, err);
		if (rc)
			return rc;
	}
	return ING_OK;
}

/* Emits one chosen token: counts it, tells the sampler, the caller and the
 * drafter. Returns true when generation must stop (reason in st->stop). */
static bool emit(struct sampler *s, const struct tokenizer *tk, const struct gen_config *cfg,
		 int32_t tok, gen_token_fn on_token, void *ud, struct gen_stats *st)
{
	sampler_accept(s, tok);
	st->n_gen++;
	if (cfg->spec)
		spec_seq_append(cfg->spec, &tok, 1);
	if (cfg->draft)
		spec_draft_append(cfg->draft, 0, &tok, 1);
	bool eos = !cfg->ignore_eos && tokenizer_is_eog(tk, tok);
	if (on_token && on_token(ud, tok)) {
		st->stop = GEN_STOP_CALLER;
		return true;
	}
	if (eos) {
		st->stop = GEN_STOP_EOS;
		return true;
	}
	if (cfg->n_predict >= 0 && st->n_gen >= cfg->n_predict) {
		st->stop = GEN_STOP_LENGTH;
		return true;
	}
	return false;
}

/* Masks one logits row to what the grammar allows. Returns ING_OK, -1
 * when no token is allowed (generation stops: st->stop set), or the
 * matcher's error (a grammar too complex to follow). */
static int constrain(struct grammar_matcher *m, float *logits, struct gen_stats *st,
		     ing_err *err)
{
	int64_t n = grammar_matcher_mask(m, logits, err);
	if (n < 0)
		return err->code;
	if (n == 0) {
		st->stop = GEN_STOP_GRAMMAR;
		return -1;
	}
	return ING_OK;
}

/* Draft length allowed at position pos: room in the context and in
 * n_predict (a step emits at most n_draft + 1 tokens). */
static int draft_room(const struct gen_config *cfg, const struct gen_stats *st, int64_t pos,
		      int64_t n_ctx)
{
	int64_t k = cfg->spec || cfg->draft ? cfg->spec_k : 0;
	if (k > n_ctx - 1 - pos)
		k = n_ctx - 1 - pos;
	if (cfg->n_predict >= 0 && k > cfg->n_predict - st->n_gen - 1)
		k = cfg->n_predict - st->n_gen - 1;
	return k > 0 ? (int)k : 0;
}

int generate(struct runner *r, struct fwd *f, struct sampler *s, const struct tokenizer *tk,
	     const int32_t *prompt, int64_t n_prompt, const struct gen_config *cfg,
	     gen_token_fn on_token, void *ud, struct gen_stats *st, ing_err *err)
{
	struct kv_cache *kv = fwd_kv(f);
	const int64_t n_ctx = kv->n_ctx;
	const int64_t V = fwd_model(f)->hp.n_vocab;
	*st = (struct gen_stats){ .n_prompt = n_prompt };
	if (n_prompt < 1)
		return ing_err_set(err, ING_ERR_INVALID, "empty prompt");
	if (n_prompt >= n_ctx)
		return ing_err_set(err, ING_ERR_RANGE,
				   "the prompt has %lld tokens but the context holds %lld "
				   "(use a larger --ctx or a shorter prompt)",
				   (long long)n_prompt, (long long)n_ctx);
	if (cfg->matcher && (cfg->spec || cfg->draft))
		return ing_err_set(err, ING_ERR_INVALID, "constrained output is not drafted: "
				   "no speculation with a grammar");
	if ((cfg->spec || cfg->draft) && (cfg->spec_k < 0 || cfg->spec_k > SPEC_MAX_K))
		return ing_err_set(err, ING_ERR_RANGE, "draft length %d outside 0..%d", cfg->spec_k,
				   SPEC_MAX_K);
	kv_seq_truncate(kv, 0, 0);
	for (int64_t i = 0; i < n_prompt; i++)
		sampler_accept(s, prompt[i]);
	if (cfg->spec) {
		spec_seq_reset(cfg->spec);
		spec_seq_append(cfg->spec, prompt, n_prompt);
	}
	int rc;
	if (cfg->draft) {
		if ((rc = spec_draft_start(cfg->draft, 0, sampler_params(s), err)))
			return rc;
		spec_draft_append(cfg->draft, 0, prompt, n_prompt);
	}
	/* a sampling target with a draft model accepts by rejection sampling */
	const bool rejection = cfg->draft && spec_draft_sampling(cfg->draft, 0);
	/* a plain greedy sampler takes the argmax the LM head finds (unless a
	 * grammar masks the logits first) */
	const bool argmax = sampler_is_plain_greedy(s) && !cfg->matcher;
	double t0 = clock_now_s();
	rc = prefill(r, f, prompt, n_prompt, cfg->prefill_chunk, argmax, err);
	if (rc)
		return rc;
	double t1 = clock_now_s();
	st->t_prompt_s = t1 - t0;
	/* Each step fed row 0 = the last sampled token at position pos and rows
	 * 1..n_draft = the draft; row i's logits pick the token after row i.
	 * The draft's token i+1 stands as long as it equals what row i's
	 * logits produce, exactly as plain decoding would have chosen. */
	int32_t rows[1 + SPEC_MAX_K], rpos[1 + SPEC_MAX_K], rseq[1 + SPEC_MAX_K] = { 0 };
	bool want[1 + SPEC_MAX_K];
	int64_t pos = n_prompt;
	int n_draft = 0;
	if (cfg->n_predict == 0) {
		st->stop = GEN_STOP_LENGTH;
		goto done;
	}
	for (;;) {
		int64_t n_out;
		float *logits = fwd_logits(f, &n_out);
		int32_t tok = 0;
		int acc = 0;
		bool stop = false;
		for (int i = 0; i <= n_draft && !stop; i++) {
			bool same;
			if (rejection && i < n_draft) {
				same = spec_accept_sampled(s, logits + (size_t)i * V,
							   spec_draft_q(cfg->draft, 0, i), V, rows[i + 1],
							   spec_draft_p_scratch(cfg->draft), &tok);
			} else {
				float *row = logits + (size_t)i * V;
				if (cfg->matcher && (rc = constrain(cfg->matcher, row, st, err))) {
					if (rc > 0)
						return rc;
					stop = true; /* nothing allowed */
					break;
				}
				tok = argmax ? sampler_take_argmax(s, (int32_t)fwd_argmax(f, i)) :
					       sampler_sample(s, row);
				same = i < n_draft && tok == rows[i + 1];
			}
			if (cfg->matcher && !grammar_matcher_accept_token(cfg->matcher, tok))
				return ing_err_set(err, ING_ERR_NOMEM, "out of memory (grammar)");
			stop = emit(s, tk, cfg, tok, on_token, ud, st);
			if (!stop && cfg->matcher && grammar_matcher_done(cfg->matcher)) {
				st->stop = GEN_STOP_GRAMMAR;
				stop = true;
			}
			if (!same)
				break;
			st->accepted_per_pos[acc++]++;
		}
		if (n_draft > 0) {
			st->n_accepted += acc;
			if (cfg->spec)
				spec_seq_feedback(cfg->spec, n_draft, acc);
			else
				spec_draft_feedback(cfg->draft, 0, n_draft, acc);
		}
		/* rows 0..acc hold real tokens; the rejected draft leaves the cache */
		pos += acc;
		kv_seq_truncate(kv, 0, pos);
		if (stop)
			break;
		if (pos >= n_ctx) {
			st->stop = GEN_STOP_CONTEXT;
			break;
		}
		rows[0] = tok;
		n_draft = 0;
		int room = draft_room(cfg, st, pos, n_ctx);
		if (room > 0) {
			double td = clock_now_s();
			if (cfg->spec)
				n_draft = (int)quant_gemm_rows_trim(
						  1 + spec_seq_draft(cfg->spec, room, rows + 1)) - 1;
			else if ((rc = spec_draft_propose(cfg->draft, 0, room, rows + 1, &n_draft, err)))
				return rc;
			st->t_draft_s += clock_now_s() - td;
			if (n_draft > 0) {
				st->n_drafts++;
				st->n_draft_tokens += n_draft;
			}
		}
		for (int i = 0; i <= n_draft; i++) {
			rpos[i] = (int32_t)(pos + i);
			want[i] = true;
		}
		struct fwd_batch b = { .n = 1 + n_draft, .tokens = rows, .pos = rpos, .seq = rseq,
				       .want_logits = want, .argmax = argmax,
				       .argmax_only = argmax && !rejection };
		if ((rc = runner_step(r, &b, err)))
			return rc;
		st->n_steps++;
		pos++;
	}
done:
	st->t_gen_s = clock_now_s() - t1;
	return ING_OK;
}
