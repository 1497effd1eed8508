/* llama_greedy.c — dev-time oracle: greedy decoding with llama.cpp.
 *
 * Built by make_reference.sh against a llama.cpp build (never part of
 * ingot). For each prompt line on stdin prints one JSON object:
 *   {"prompt": "...", "prompt_ids": [...], "ids": [...],
 *    "top5": [[id, logit], ...]}   (top-5 at the first generated position)
 * Usage: llama_greedy MODEL.gguf N_PREDICT < prompts.txt */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

static int argmax(const float *x, int n)
{
	int b = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

static void top5(const float *x, int n, int *ids)
{
	for (int k = 0; k < 5; k++) {
		int b = -1;
		for (int i = 0; i < n; i++) {
			int used = 0;
			for (int j = 0; j < k; j++)
				used |= ids[j] == i;
			if (!used && (b < 0 || x[i] > x[b]))
				b = i;
		}
		ids[k] = b;
	}
}

static int run_prompt(struct llama_model *model, const char *prompt, int n_predict)
{
	const struct llama_vocab *vocab = llama_model_get_vocab(model);
	struct llama_context_params cp = llama_context_default_params();
	cp.n_ctx = 1024;
	cp.n_batch = 1024;
	cp.n_threads = cp.n_threads_batch = 2;
	if (getenv("LLAMA_KV_F32")) { /* precision experiments: F32 cache, no flash attention */
		cp.type_k = GGML_TYPE_F32;
		cp.type_v = GGML_TYPE_F32;
		cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
	}
	struct llama_context *ctx = llama_init_from_model(model, cp);
	int nv = llama_vocab_n_tokens(vocab);
	llama_token toks[1024];
	int n = llama_tokenize(vocab, prompt, (int)strlen(prompt), toks, 1024, true, false);
	if (n < 0 || !ctx)
		return 1;
	printf("{\"prompt\": ");
	json_str(prompt);
	printf(", \"prompt_ids\": [");
	for (int i = 0; i < n; i++)
		printf(i ? ", %d" : "%d", toks[i]);
	printf("], \"ids\": [");
	struct llama_batch b = llama_batch_get_one(toks, n);
	llama_token cur;
	int t5[5];
	float l5[5];
	for (int i = 0; i < n_predict; i++) {
		if (llama_decode(ctx, b))
			return 1;
		const float *lg = llama_get_logits_ith(ctx, -1);
		if (i == 0) {
			top5(lg, nv, t5);
			for (int k = 0; k < 5; k++)
				l5[k] = lg[t5[k]];
		}
		cur = argmax(lg, nv);
		printf(i ? ", %d" : "%d", cur);
		if (llama_vocab_is_eog(vocab, cur))
			break;
		b = llama_batch_get_one(&cur, 1);
	}
	printf("], \"top5\": [");
	for (int k = 0; k < 5; k++)
		printf(k ? ", [%d, %.6f]" : "[%d, %.6f]", t5[k], l5[k]);
	printf("]}\n");
	llama_free(ctx);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: llama_greedy MODEL N_PREDICT < prompts\n");
		return 2;
	}
	llama_backend_init();
	struct llama_model_params mp = llama_model_default_params();
	struct llama_model *model = llama_model_load_from_file(argv[1], mp);
	if (!model)
		return 1;
	char line[4096];
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (!*line)
			continue;
		if (run_prompt(model, line, atoi(argv[2])))
			return 1;
	}
	llama_model_free(model);
	return 0;
}
