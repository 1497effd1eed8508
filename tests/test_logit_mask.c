/* test_logit_mask.c — allowed token ids and bad words on synthetic logits:
 * what is masked, when a multi-token word's last token is, and the
 * refusals of bad input. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "logit_mask.h"
#include "mem.h"

#define V 12

static void fill(float *l)
{
	for (int i = 0; i < V; i++)
		l[i] = (float)i;
}

/* The ids apply() masked, as a bit set. */
static unsigned masked(const struct logit_mask *m, const int32_t *gen, int64_t n_gen)
{
	float l[V];
	fill(l);
	logit_mask_apply(m, l, V, gen, n_gen);
	unsigned bits = 0;
	for (int i = 0; i < V; i++)
		bits |= (unsigned)(l[i] == -INFINITY) << i;
	return bits;
}

static void test_allowed(void)
{
	struct logit_mask m;
	ing_err err = { 0 };
	const int32_t allowed[] = { 9, 3, 3, 0 };
	CHECK(logit_mask_init(&m, allowed, 4, NULL, NULL, 0, V, &err) == ING_OK, "%s", err.msg);
	CHECK(m.n_allowed == 3 && logit_mask_active(&m), "repeats dropped (%lld)",
	      (long long)m.n_allowed);
	unsigned want = ((1u << V) - 1) & ~(1u << 9 | 1u << 3 | 1u << 0);
	CHECK(masked(&m, NULL, 0) == want, "all but 0, 3, 9 masked (%#x)", masked(&m, NULL, 0));
	float l[V];
	fill(l);
	l[0] = l[3] = l[9] = -INFINITY;
	CHECK(!logit_mask_any_left(&m, l), "nothing left once the allowed ids are masked");
	l[3] = 1;
	CHECK(logit_mask_any_left(&m, l), "one allowed id left");
	logit_mask_free(&m);
	CHECK(logit_mask_init(&m, NULL, 0, NULL, NULL, 0, V, &err) == ING_OK &&
	      !logit_mask_active(&m) && masked(&m, NULL, 0) == 0 && logit_mask_any_left(&m, l),
	      "an empty mask restricts nothing");
	logit_mask_free(&m);
}

static void test_bad_words(void)
{
	struct logit_mask m;
	ing_err err = { 0 };
	/* words: [7], [1 2 5], [2 4] */
	const int32_t words[] = { 7, 1, 2, 5, 2, 4 };
	const int32_t len[] = { 1, 3, 2 };
	CHECK(logit_mask_init(&m, NULL, 0, words, len, 3, V, &err) == ING_OK, "%s", err.msg);
	CHECK(masked(&m, NULL, 0) == 1u << 7, "a one-token word from the start");
	const int32_t g1[] = { 3, 1, 2 };
	CHECK(masked(&m, g1, 3) == (1u << 7 | 1u << 5 | 1u << 4),
	      "after ... 1 2: [1 2 5] ends in 5 and [2 4] in 4 (%#x)", masked(&m, g1, 3));
	CHECK(masked(&m, g1, 2) == 1u << 7, "after ... 1: neither prefix is whole");
	const int32_t g2[] = { 2 };
	CHECK(masked(&m, g2, 1) == (1u << 7 | 1u << 4), "a prefix at the very start counts");
	CHECK(masked(&m, g1 + 1, 1) == 1u << 7, "a prefix longer than the output does not");
	logit_mask_free(&m);
}

static void test_refusals(void)
{
	struct logit_mask m;
	ing_err err = { 0 };
	const int32_t bad_id[] = { V };
	CHECK(logit_mask_init(&m, bad_id, 1, NULL, NULL, 0, V, &err) == ING_ERR_RANGE &&
	      strstr(err.msg, "allowed_token_ids"), "allowed id out of range: %s", err.msg);
	const int32_t word[] = { 1, -1 };
	const int32_t two[] = { 2 }, zero[] = { 0 };
	CHECK(logit_mask_init(&m, NULL, 0, word, two, 1, V, &err) == ING_ERR_RANGE,
	      "bad word id out of range");
	CHECK(logit_mask_init(&m, NULL, 0, word, zero, 1, V, &err) == ING_ERR_INVALID,
	      "an empty bad word");
	int32_t many[LOGIT_MASK_MAX_WORDS + 1];
	for (int i = 0; i <= LOGIT_MASK_MAX_WORDS; i++)
		many[i] = 1;
	CHECK(logit_mask_init(&m, NULL, 0, many, many, LOGIT_MASK_MAX_WORDS + 1, V, &err) ==
	      ING_ERR_INVALID, "too many bad words");
}

int main(void)
{
	size_t live = ing_mem_live();
	test_allowed();
	test_bad_words();
	test_refusals();
	CHECK(ing_mem_live() == live, "leak: %zu bytes", ing_mem_live() - live);
	return check_summary("test_logit_mask");
}
