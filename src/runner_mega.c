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
 * always safe. A share is a range of units its thread takes chunk by chunk
 * from the front; a thread done early takes chunks from the back of a
 * slower thread's range (steal.h), so a core slowed by another process
 * costs the step its share of the work, not the whole wait. A unit's
 * result does not depend on which thread computes it or how the units are
 * cut (the kernels' contract in quant.h), so the logits stay the same.
 *
 * Counters are monotonic across steps (targets grow with each step), one
 * per cache line; nothing is allocated per step. Each unit is computed by
 * the same code as in runner_graph, so logits are bit-identical. */
#include <stdatomic.h>
#include <string.h>

#include "clock.h"
#include "forward.h"
#include "mem.h"
#include "pool.h"
#include "quant.h"
#include "runner_int.h"
#include "steal.h"

/* Row-wise ops of this many rows or fewer run as an epilogue: one thread
 * takes all of them while the other starts prefetching its next share,
 * rather than each thread its share of the rows behind one more wait.
 * Measured on the Sapphire Rapids-class host, `ingot bench --batch B
 * --runner mega --runs 3 --gen 32 --prompt 16`, processes alternating A
 * B B A, tok/s ratio against 4: 8 at batch 8 1.010 (eight cycles, seven
 * above 1); 16 at batch 16 0.948 (three cycles, each below 0.97). */
#define EPILOGUE_MAX_UNITS 8
#define PREFETCH_MAX_BYTES (64 * 1024)

/* A parallel op's units are split among the threads in chunks of about
 * 1/MEGA_CHUNKS of a thread's share: the owner takes them front to back
 * while a thread out of work takes them from the back (steal.h). Measured
 * on the Emerald Rapids host with a busy loop on the second core (`taskset
 * -c 1`), `ingot bench --batch 1,8,32 --runner mega --prompt 16`, two
 * rounds, tok/s: a static split 43 / 245-248 / 366-410; the owner's first
 * 3/4 in one piece, the rest in chunks 51-60 / 248-280 / 382-423; half in
 * one piece 50-53 / 262-298 / 448-486; all in chunks 58 / 305-309 /
 * 428-540. Without the busy loop, four alternating rounds, medians: static
 * 88 / 455 / 712, all in chunks 88 / 510 / 834. */
#define MEGA_CHUNKS 16

/* ... but the owner of a matrix op on more than MEGA_WIDE_TOKENS rows (a
 * prefill, a batch past a lone group of 8) takes 1/MEGA_WIDE_PART of what
 * is left of its range at a time (steal_take_front_part: a half, a
 * quarter, ..., then chunks), about 5 calls a thread: each call of
 * the AMX kernels (from 9 tokens on) gathers its tokens' activations and
 * unpacks each tile once per chunk of tokens, so a call of a few tiles
 * paid that again and again, where the graph runner makes one call a
 * thread. Measured on the Sapphire Rapids-class host, `ingot bench
 * --batch 1 --runner mega --runs 1 --gen 4 --prompt 512`, processes
 * alternating A B B A, three cycles, prefill tok/s: 16 chunks 1742-1858,
 * 4 chunks 1940-2014; then against the graph runner in the same runs,
 * 0.95-1.02 of its figure with 4 chunks, 0.99-1.01 with 2 or 1 (16 chunks
 * had been 0.90). Past 8 tokens rather than 64 (`ingot bench --batch
 * 16,32 --runner mega,graph --runs 5 --gen 32 --prompt 16`, two rounds,
 * mega / graph): AMX table batch 16 0.96-0.98 -> 0.99, batch 32 0.97 ->
 * 0.98-1.00, 16-token prefill 0.92-0.94 -> 0.94-1.01; AVX-512 table
 * (INGOT_ISA=avx512) prefill 0.89-0.98 -> 1.00-1.07, batches even either
 * way; AVX2 table even either way; with a busy loop on the other core,
 * batch 32 mega the same (732-761 against 742-758 tok/s); batches of 9
 * and 10, processes alternating A B B A, mega 1.006 and 1.007. That was 4
 * equal pieces a thread (MEGA_WIDE_CHUNKS 4), whose last piece (at batch
 * 32, an eighth of the LM head, 1.7 ms of a thread) was what a thread
 * done early could take: when the other core was slowed the step ended
 * up to that much apart. Halving pieces end in a chunk of 1/16 of a
 * share. Measured on the Emerald Rapids host (a noisy neighbour most of
 * the time), `ingot bench --batch 32 --runner mega --runs 5 --gen 32
 * --prompt 16 --profile`, five alternating rounds, the threads' idle
 * time, ms a step: 4 pieces 0.41 in the quiet round, 1.08-1.38 in the
 * others; halving 0.42, 0.59-0.85. `bench/ab.py` (the same arguments
 * without --profile), batch 32 decode: --cycles 4 1.021, per cycle
 * 0.907-1.160; --runs 3 --cycles 8 in a quieter hour 1.006, 0.988-1.025;
 * batch 16, --cycles 4, 0.970, 0.902-1.016 (noise both ways: a cycle
 * with halving's runs at 826-1009 tok/s); `--cycles 3 -- --batch 1 --runs
 * 1 --gen 4 --prompt 512`, prefill 1.051, per cycle 0.989-1.093. Not
 * measured on an AMX host, where a thread's calls go from 4 to 5. */
#define MEGA_WIDE_PART 2
#define MEGA_WIDE_TOKENS 8

/* The row-wise ops (norms, quantizations, rope) in chunks of at least 4
 * rows: the norm's sums of squares run 4 rows to a chain
 * (ops_norm_avx2.c), and a chunk of 1 row left one chain where 4 rows'
 * fit in the same time. Seven alternating rounds of `ingot bench --batch
 * 8,32 --runner mega --prompt 16 --runs 3`, medians, tok/s: chunks of 1
 * row 575 / 1015, 4 rows 607 / 1052, 16 rows 631 / 1038 (the widest
 * spread: 467-671 at batch 8; batch 8's row-wise ops are epilogues now,
 * EPILOGUE_MAX_UNITS). */
#define MEGA_ROW_CHUNK 4

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
	struct steal_range *ranges; /* [max ops][nth] each thread's units of each op */
	int nth;
	long spins; /* of its waits before they yield (pool_spins) */
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
	mg->nth = pool_threads(r->pool);
	mg->spins = pool_spins(r->pool);
	mg->sync = ing_calloc((size_t)mg->max_ops, sizeof *mg->sync);
	mg->epilogue = ing_calloc((size_t)mg->max_ops, 1);
	mg->ranges = ing_calloc((size_t)mg->max_ops * (size_t)mg->nth, sizeof *mg->ranges);
	if (!mg->sync || !mg->epilogue || !mg->ranges) {
		ing_free(mg->sync);
		ing_free(mg->epilogue);
		ing_free(mg->ranges);
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
	ing_free(mg->ranges);
	ing_free(mg);
	r->mega = NULL;
}

void runner_mega_set_prefetch(struct runner *r, int on)
{
	if (r->mega)
		r->mega->prefetch = on;
}

static struct steal_range *op_range(struct mega *mg, int op, int ith)
{
	return &mg->ranges[(size_t)op * (size_t)mg->nth + (size_t)ith];
}

/* Whether op is a matrix product (its units rows of repacked weights). */
static bool op_matrix(const struct fwd_op *op)
{
	switch (op->kind) {
	case OP_QKV:
	case OP_WO:
	case OP_GATE_UP:
	case OP_DOWN:
	case OP_LM_HEAD: return true;
	default: return false;
	}
}

/* Whether op is a matrix product on more than MEGA_WIDE_TOKENS rows. */
static bool op_wide(const struct fwd *f, const struct fwd_op *op)
{
	return op_matrix(op) && fwd_op_tokens(f, op) > MEGA_WIDE_TOKENS;
}

/* Units per chunk of op (the grid of its ranges): matrix rows in whole
 * tiles of the repacked weights (a piece that splits a tile computes all
 * of it). */
static uint32_t op_chunk(const struct fwd_op *op, int nth)
{
	uint32_t align = op_matrix(op) ? QUANT_R16_ROWS : 1;
	switch (op->kind) {
	case OP_ATTN_IN:
	case OP_ROPE_STORE:
	case OP_ATTN_QUANT:
	case OP_FFN_IN:
	case OP_FFN_QUANT:
	case OP_OUT_IN: align = MEGA_ROW_CHUNK; break;
	default: break;
	}
	const uint64_t c = (uint64_t)op->n_units / ((uint64_t)nth * MEGA_CHUNKS);
	return c <= align ? align : (uint32_t)((c + align - 1) / align * align);
}

/* Each thread's range of parallel op j, all untaken: set before the
 * dispatch, so no thread takes from a range before it is set. */
static void op_ranges_set(struct mega *mg, int j)
{
	const uint32_t n = (uint32_t)mg->ops[j].n_units, chunk = op_chunk(&mg->ops[j], mg->nth);
	for (int i = 0; i < mg->nth; i++) {
		uint32_t lo, hi;
		steal_split(n, chunk, i, mg->nth, &lo, &hi);
		steal_range_init(op_range(mg, j, i), lo, hi, chunk);
	}
}

/* Thread ith's share of parallel op i: its own range front to back (in
 * chunks, or in shrinking parts for a wide op: MEGA_WIDE_PART), then
 * chunks from the back of the others' ranges until every unit of the op
 * is taken. A chunk from the front names the rest of the range as what
 * follows it, so the matrix kernels' prefetch runs on into the next chunk
 * instead of stopping at each chunk's end (the row-major kernels prefetch
 * 128 rows ahead, and at batch 1 a chunk is about that many rows). On the
 * Zen 3 host, `ingot bench --batch 1 --runner mega,graph --prompt 16`,
 * mega / graph: chunks stopping the prefetch 0.91-1.01 (three and four
 * alternating rounds), one chunk a thread 0.99-1.02, chunks naming what
 * follows 0.98-1.03. */
static void run_share(struct mega *mg, struct fwd *f, int i, int ith)
{
	const struct fwd_op *op = &mg->ops[i];
	struct steal_range *own = op_range(mg, i, ith);
	const bool wide = op_wide(f, op);
	uint32_t u0, u1;
	while (wide ? steal_take_front_part(own, MEGA_WIDE_PART, &u0, &u1)
		    : steal_take_front(own, own->chunk, &u0, &u1))
		fwd_op_exec(f, op, u0, u1, own->hi, ith);
	for (int k = 1; k < mg->nth; k++) {
		struct steal_range *other = op_range(mg, i, (ith + k) % mg->nth);
		while (steal_take_back(other, &u0, &u1))
			fwd_op_exec(f, op, u0, u1, u1, ith);
	}
}

/* While op i's counter is not there yet, prefetches the weight rows this
 * thread will read in op `next` (at most PREFETCH_MAX_BYTES, one cache line
 * per spin), then just spins. */
static void wait_done(struct mega *mg, struct fwd *f, int i, int next, int ith)
{
	struct op_sync *s = &mg->sync[i];
	const char *base = NULL;
	size_t bytes = 0, cursor = 0;
	if (atomic_load_explicit(&s->done, memory_order_acquire) >= s->step)
		return;
	if (mg->prefetch && next < mg->n_ops) {
		const void *b;
		const struct steal_range *own = op_range(mg, next, ith);
		if (fwd_op_weight_span(f, &mg->ops[next], own->lo, own->hi, &b, &bytes))
			base = b;
		if (bytes > PREFETCH_MAX_BYTES)
			bytes = PREFETCH_MAX_BYTES;
	}
	for (unsigned poll = 0; atomic_load_explicit(&s->done, memory_order_acquire) < s->step;
	     poll++) {
		if (base && cursor < bytes) {
			__builtin_prefetch(base + cursor, 0, 3);
			cursor += 64;
		}
		/* a long wait gives the core to the thread we wait for */
		pool_wait_poll(poll, mg->spins);
	}
}

/* Runs the epilogue ops following parallel op i (on thread ith, timed into
 * its work when profiling), then publishes done. */
static void run_epilogue(struct runner *r, int i, int ith)
{
	struct mega *mg = r->mega;
	for (int j = i + 1; j < mg->n_ops && mg->epilogue[j]; j++)
		runner_op_exec(r, &mg->ops[j], 0, mg->ops[j].n_units, 0, ith);
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
		double t = r->profile ? clock_now_s() : 0;
		if (prev >= 0)
			wait_done(mg, r->f, prev, i, ith);
		if (r->profile)
			t = runner_time_add(r, ith, OP_KIND_COUNT, t); /* its wait */
		run_share(mg, r->f, i, ith);
		if (r->profile)
			runner_time_add(r, ith, mg->ops[i].kind, t);
		uint64_t target = mg->sync[i].step * (uint64_t)nth;
		if (atomic_fetch_add_explicit(&mg->sync[i].arrived, 1, memory_order_acq_rel) + 1 == target)
			run_epilogue(r, i, ith);
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
	const double t_step = r->profile ? clock_now_s() : 0;
	int i = 0;
	for (; i < mg->n_ops && is_epilogue(&mg->ops[i]); i++)
		runner_op_exec(r, &mg->ops[i], 0, mg->ops[i].n_units, 0, 0);
	for (int j = 0; j < mg->n_ops; j++) {
		mg->epilogue[j] = j < i || is_epilogue(&mg->ops[j]);
		if (!mg->epilogue[j]) {
			mg->sync[j].step++;
			op_ranges_set(mg, j);
		}
	}
	pool_run(r->pool, mega_thread, r);
	if (r->profile)
		runner_profile_fold(r, clock_now_s() - t_step);
	return ING_OK;
}
