/* pool_bench.c — what one pool dispatch costs: the graph runner's price
 * per op beyond the op's own work (its barrier), which bounds what the
 * megakernel can gain over it by removing dispatches.
 *
 *   pool_bench [--threads N] [--pin] [--rounds R]
 *
 * Times back-to-back pool_run calls of a job that does nothing, N threads
 * (default 2), R rounds (default 5) of 200000 dispatches each, and prints
 * each round's mean in ns a dispatch. A decode step of the default model
 * is 183 dispatches on the graph runner (an embedding, ten ops for each
 * of 18 layers, the final norm and the LM head). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "pool.h"

enum { DISPATCHES = 200000 };

static void nothing(void *ctx, int ith, int nth)
{
	(void)ctx, (void)ith, (void)nth;
}

int main(int argc, char **argv)
{
	int threads = 2, pin = 0, rounds = 5;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0) {
			threads = atoi(argv[++i]);
		} else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0) {
			rounds = atoi(argv[++i]);
		} else if (strcmp(argv[i], "--pin") == 0) {
			pin = 1;
		} else {
			fprintf(stderr, "usage: pool_bench [--threads N] [--pin] [--rounds R]\n");
			return 2;
		}
	}
	struct pool *p;
	ing_err err = { 0 };
	if (pool_create(threads, pin, &p, &err) != ING_OK) {
		fprintf(stderr, "pool_bench: %s\n", err.msg);
		return 1;
	}
	if (err.msg[0])
		fprintf(stderr, "pool_bench: %s\n", err.msg); /* pinning failed: not fatal */
	printf("%d threads%s, %d empty dispatches a round\n", threads, pin ? ", pinned" : "",
	       DISPATCHES);
	for (int r = 0; r < rounds; r++) {
		const double t0 = clock_now_s();
		for (int i = 0; i < DISPATCHES; i++)
			pool_run(p, nothing, NULL);
		printf("round %d: %.0f ns a dispatch\n", r + 1, (clock_now_s() - t0) / DISPATCHES * 1e9);
	}
	pool_destroy(p);
	return 0;
}
