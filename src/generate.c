/* generate.c — see generate.h. */
#include "generate.h"

#include <time.h>

#include "kv.h"

double gen_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

const char *gen_stop_name(enum gen_stop s)
{
	switch (s) {
	case GEN_STOP_EOS: return "eos";
	case GEN_STOP_LENGTH: return "length";
	case GEN_STOP_CONTEXT: return "context full";
	case GEN_STOP_CALLER: return "stopped";
	}
	return "?";
}

static int prefill(struct runner *r, struct fwd *f, const int32_t *prompt, int64_t n,
		   int64_t chunk, ing_err *err)
{
	int32_t pos[512], seq[512] = { 0 };
	if (chunk > 512)
		chunk = 512;
	for (int64_t i0 = 0; i0 < n; i0 += chunk) {
		int64_t cnt = n - i0 < chunk ? n - i0 : chunk;
		for (int64_t i = 0; i < cnt; i++)
			pos[i] = (int32_t)(i0 + i);
		struct fwd_batch b = { .n = cnt, .tokens = prompt + i0, .pos = pos, .seq = seq };
		int rc = runner_step(r, &b, err);
		if (rc)
			return rc;
	}
	return ING_OK;
}

int generate(struct runner *r, struct fwd *f, struct sampler *s, const struct tokenizer *tk,
	     const int32_t *prompt, int64_t n_prompt, const struct gen_config *cfg,
	     gen_token_fn on_token, void *ud, struct gen_stats *st, ing_err *err)
{
	struct kv_cache *kv = fwd_kv(f);
	const int64_t n_ctx = kv->n_ctx;
	*st = (struct gen_stats){ .n_prompt = n_prompt };
	if (n_prompt < 1)
		return ing_err_set(err, ING_ERR_INVALID, "empty prompt");
	if (n_prompt >= n_ctx)
		return ing_err_set(err, ING_ERR_RANGE,
				   "the prompt has %lld tokens but the context holds %lld "
				   "(use a larger --ctx or a shorter prompt)",
				   (long long)n_prompt, (long long)n_ctx);
	kv_seq_truncate(kv, 0, 0);
	for (int64_t i = 0; i < n_prompt; i++)
		sampler_accept(s, prompt[i]);
	double t0 = gen_now();
	int rc = prefill(r, f, prompt, n_prompt, cfg->prefill_chunk, err);
	if (rc)
		return rc;
	double t1 = gen_now();
	st->t_prompt_s = t1 - t0;
	int64_t pos = n_prompt;
	for (;;) {
		if (cfg->n_predict >= 0 && st->n_gen >= cfg->n_predict) {
			st->stop = GEN_STOP_LENGTH;
			break;
		}
		int64_t n_out;
		int32_t tok = sampler_sample(s, fwd_logits(f, &n_out));
		sampler_accept(s, tok);
		st->n_gen++;
		bool eos = !cfg->ignore_eos && tokenizer_is_eog(tk, tok);
		if (on_token && on_token(ud, tok)) {
			st->stop = GEN_STOP_CALLER;
			break;
		}
		if (eos) {
			st->stop = GEN_STOP_EOS;
			break;
		}
		if (pos >= n_ctx) {
			st->stop = GEN_STOP_CONTEXT;
			break;
		}
		if (cfg->n_predict >= 0 && st->n_gen >= cfg->n_predict) {
			st->stop = GEN_STOP_LENGTH;
			break;
		}
		int32_t p = (int32_t)pos, sq = 0;
		struct fwd_batch b = { .n = 1, .tokens = &tok, .pos = &p, .seq = &sq };
		if ((rc = runner_step(r, &b, err)))
			return rc;
		pos++;
	}
	st->t_gen_s = gen_now() - t1;
	return ING_OK;
}
