/* runner_mega.c — the megakernel: one persistent dispatch per step.
 *
 * The plan (fwd_plan) is run by every pool thread from start to end in one
 * pool_run, with no return to a scheduler between ops. Ops come in two
 * flavours:
 *   parallel  units split over all threads (matrix products, attention);
 *   epilogue  small row-wise ops (norms, quantization, rope, residuals when
 *             a step has few rows) run whole by the *last* thread to finish
 *             the preceding parallel op, while the others move on.
 * Instead of a barrier each thread, before its share of parallel op i, waits
 * on op i-1's `done` counter (release/acquire). Waiting threads prefetch the
 * weight rows of their next share, so the memory bus keeps streaming while
 * a straggler finishes; weights never depend on activations, so this is
 * always safe.
 *
 * Counters are monotonic across steps (targets grow with each step), one
 * per cache line; nothing is allocated per step. Each unit is computed by
 * the same code as in runner_graph, so logits are bit-identical. */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "forward.h"
#include "mem.h"
#include "runner_int.h"

#define EPILOGUE_MAX_UNITS 4   /* ops this small run as an epilogue */
#define PREFETCH_MAX_BYTES (64 * 1024)

struct op_sync {
	_Alignas(64) atomic_uint_fast64_t arrived; /* threads done with their share */
	_Alignas(64) atomic_uint_fast64_t done;    /* steps completed incl. epilogue */
	uint64_t step;                             /* target for this step */
	char pad[64 - sizeof(uint64_t)];
};

struct mega {
	struct op_sync *sync; /* [max ops] */
	int max_ops;
	const struct fwd_op *ops;
	int n_ops;
	unsigned char *epilogue; /* [max ops] op runs as an epilogue */
	int prefetch;
};

static bool is_epilogue(const struct fwd_op *op)
{
	switch (op->kind) {
	case OP_EMBED:
	case OP_ATTN_IN:
	case OP_ROPE_STORE:
	case OP_ATTN_QUANT:
	case OP_FFN_IN:
	case OP_FFN_QUANT:
	case OP_OUT_IN:
		return op->n_units <= EPILOGUE_MAX_UNITS;
	default:
		return false;
	}
}

int runner_mega_init(struct runner *r, ing_err *err)
{
	struct mega *mg = ing_calloc(1, sizeof *mg);
	if (!mg)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	mg->max_ops = FWD_MAX_OPS(fwd_model(r->f)->hp.n_layer);
	mg->sync = ing_calloc((size_t)mg->max_ops, sizeof *mg->sync);
	mg->epilogue = ing_calloc((size_t)mg->max_ops, 1);
	if (!mg->sync || !mg->epilogue) {
		ing_free(mg->sync);
		ing_free(mg->epilogue);
		ing_free(mg);
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	}
	mg->prefetch = 1;
	r->mega = mg;
	return ING_OK;
}

void runner_mega_free(struct runner *r)
{
	struct mega *mg = r->mega;
	if (!mg)
		return;
	ing_free(mg->sync);
	ing_free(mg->epilogue);
	ing_free(mg);
	r->mega = NULL;
}

void runner_mega_set_prefetch(struct runner *r, int on)
{
	if (r->mega)
		r->mega->prefetch = on;
}

/* ~50-100 us of pause instructions: far longer than any op's imbalance on
 * an idle machine, short against a scheduler time slice */
#define MEGA_SPINS_BEFORE_YIELD 20000

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* While op i's counter is not there yet, prefetches the weight rows this
 * thread will read in op `next` (at most PREFETCH_MAX_BYTES, one cache line
 * per spin), then just spins. */
static void wait_done(struct mega *mg, struct fwd *f, int i, int next, int ith, int nth)
{
	struct op_sync *s = &mg->sync[i];
	const char *base = NULL;
	size_t bytes = 0, cursor = 0;
	if (atomic_load_explicit(&s->done, memory_order_acquire) >= s->step)
		return;
	if (mg->prefetch && next < mg->n_ops) {
		const void *b;
		if (fwd_op_weight_span(f, &mg->ops[next], ith, nth, &b, &bytes))
			base = b;
		if (bytes > PREFETCH_MAX_BYTES)
			bytes = PREFETCH_MAX_BYTES;
	}
	for (unsigned spins = 0; atomic_load_explicit(&s->done, memory_order_acquire) < s->step;
	     spins++) {
		if (base && cursor < bytes) {
			__builtin_prefetch(base + cursor, 0, 3);
			cursor += 64;
		}
		/* a long wait means the thread we wait for is not running (the
		 * machine is busier than our thread count): give it the core
		 * instead of spinning through its time slice */
		if (spins >= MEGA_SPINS_BEFORE_YIELD)
			sched_yield();
		else
			cpu_relax();
	}
}

/* Runs the epilogue ops following parallel op i, then publishes done. */
static void run_epilogue(struct mega *mg, struct fwd *f, int i)
{
	for (int j = i + 1; j < mg->n_ops && mg->epilogue[j]; j++)
		fwd_op_exec(f, &mg->ops[j], 0, mg->ops[j].n_units, 0);
	atomic_store_explicit(&mg->sync[i].done, mg->sync[i].step, memory_order_release);
}

static void mega_thread(void *ctx, int ith, int nth)
{
	struct runner *r = ctx;
	struct mega *mg = r->mega;
	int prev = -1; /* last parallel op, whose completion gates the next */
	for (int i = 0; i < mg->n_ops; i++) {
		if (mg->epilogue[i])
			continue;
		if (prev >= 0)
			wait_done(mg, r->f, prev, i, ith, nth);
		const struct fwd_op *op = &mg->ops[i];
		long u0, u1;
		pool_split((long)op->n_units, ith, nth, &u0, &u1);
		if (u0 < u1)
			fwd_op_exec(r->f, op, u0, u1, ith);
		uint64_t target = mg->sync[i].step * (uint64_t)nth;
		if (atomic_fetch_add_explicit(&mg->sync[i].arrived, 1, memory_order_acq_rel) + 1 == target)
			run_epilogue(mg, r->f, i);
		prev = i;
	}
}

int runner_mega_step(struct runner *r, ing_err *err)
{
	struct mega *mg = r->mega;
	mg->ops = fwd_ops(r->f, &mg->n_ops);
	if (mg->n_ops > mg->max_ops)
		return ing_err_set(err, ING_ERR_RANGE, "plan longer than the megakernel's table");
	/* Leading epilogue ops (the embedding of a small batch) have no
	 * parallel op before them: run them here, before the dispatch. */
	int i = 0;
	for (; i < mg->n_ops && is_epilogue(&mg->ops[i]); i++)
		fwd_op_exec(r->f, &mg->ops[i], 0, mg->ops[i].n_units, 0);
	for (int j = 0; j < mg->n_ops; j++) {
		mg->epilogue[j] = j < i || is_epilogue(&mg->ops[j]);
		if (!mg->epilogue[j])
			mg->sync[j].step++;
	}
	pool_run(r->pool, mega_thread, r);
	return ING_OK;
}
