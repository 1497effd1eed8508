/* bench_serve.h — the requests `ingot bench serve` sends (private to
 * cmd_bench_serve.c and bench_serve_workload.c).
 *
 * A workload is a fixed list of request bodies built from a seed, so two
 * runs with the same flags send the same bytes. A request may wait for
 * another one (an agent's next turn waits for its previous turn). */
#ifndef INGOT_BENCH_SERVE_H
#define INGOT_BENCH_SERVE_H

#include <stdint.h>

enum bs_kind { BS_CHAT, BS_SHARED_PREFIX, BS_AGENTIC };

struct bs_req {
	char *body;     /* JSON body, owned (ing_free) */
	int chat_api;   /* 1: /v1/chat/completions, 0: /v1/completions */
	int dep;        /* index of the request this one waits for, or -1 */
	int turn;       /* agentic: 1-based turn of its session; 0: not a session turn */
};

/* Workload kind by name (chat, shared-prefix, agentic); -1 if unknown. */
int bs_kind_parse(const char *name);

/* What every request body carries besides its prompt or messages. */
struct bs_body {
	const char *model;   /* NULL: no "model" field */
	int max_tokens;      /* each streamed with at most this many tokens */
	double temperature;  /* 0: greedy */
	double top_p;        /* 1: no "top_p" field */
	uint64_t seed;       /* sampled requests (temperature > 0): request i's
			      * "seed" is seed + i (mod 2^31), so two runs draw
			      * the same texts */
};

/* Builds n requests of the given kind. Returns an array of n the caller
 * frees with bs_reqs_free, or NULL when out of memory. */
struct bs_req *bs_workload_build(int kind, const struct bs_body *body, int n, uint64_t seed);
void bs_reqs_free(struct bs_req *r, int n);

#endif
