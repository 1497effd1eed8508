/* test_request_faults.c — allocation failures over request handling.
 *
 * Walks ing_mem_fail_at(N) over the path a generation request takes
 * before the engine (api_body_parse, api_gen_request_read: fields, the
 * chat template, prompt tokens), for chat and completion bodies on an
 * engine-less api (tests/harness_api.c), then over engine submission
 * (test_engine covers the engine's own allocations). Every N must end in
 * success or a clean error answer (a status and a message) with nothing
 * left allocated. cJSON allocates with plain malloc and is not covered. */
#include <stdio.h>
#include <string.h>

#include "api_int.h"
#include "check.h"
#include "harness_fuzz.h"
#include "mem.h"

static const struct { unsigned sel; const char *body; } cases[] = {
	{ 0x18, "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
		"{\"role\":\"user\",\"content\":\"hi <s> there\"}],\"n\":2,\"stop\":[\"a\",\"b\"],"
		"\"logit_bias\":{\"5\":1},\"logprobs\":true,\"top_logprobs\":2}" },
	{ 0x08, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"x\"}]},"
		"{\"role\":\"assistant\",\"content\":\"y\"},{\"role\":\"user\",\"content\":\"z\"}],"
		"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}" },
	{ 0x39, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]}" },
	{ 0x00, "{\"prompt\":[\"Once upon a time\",\"b <s>\"],\"stop\":\"x\",\"seed\":3}" },
	{ 0x02, "{\"prompt\":[[1,2,3],[4]],\"logit_bias\":{\"1\":2,\"3\":-1}}" },
	/* output constraints: a choice list and a schema compiled, then refused together */
	{ 0x00, "{\"prompt\":\"x\",\"guided_choice\":[\"a.b\",\"\\\"q\\\"\",\"\\u65e5\"]}" },
	{ 0x18, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"response_format\":"
		"{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"schema\":{\"type\":"
		"\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"minimum\":0}}}}}}" },
};

static int run(struct api *a, const char *body, bool chat, struct api_error *e)
{
	cJSON *b = api_body_parse(a, body, strlen(body), e);
	if (!b)
		return -1;
	struct gen_request r;
	int rc = api_gen_request_read(a, b, chat, NULL, &r, e);
	if (!rc)
		gen_request_free(&r);
	cJSON_Delete(b);
	api_gcache_free(a); /* compiled afresh each run, so every allocation is walked */
	return rc;
}

int main(void)
{
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		struct api a;
		harness_api_init(&a, cases[i].sel);
		bool chat = cases[i].sel & 8;
		struct api_error e = { 0 };
		size_t live = ing_mem_live();
		ing_mem_fail_at(0, 0);
		int rc = run(&a, cases[i].body, chat, &e);
		long total = ing_mem_count();
		CHECK(rc == 0, "case %zu: fails without injection: %s", i, e.message);
		CHECK(total > 0, "case %zu: no allocation to fail", i);
		long failed = 0;
		for (long n = 1; n <= total + 1; n++) {
			for (int sticky = 0; sticky < 2; sticky++) {
				memset(&e, 0, sizeof e);
				ing_mem_fail_at(n, sticky);
				rc = run(&a, cases[i].body, chat, &e);
				ing_mem_fail_at(0, 0);
				if (rc) {
					failed++;
					CHECK(e.status >= 400 && e.status <= 599 && e.message[0],
					      "case %zu, fail at %ld: unclean error (%d '%s')", i, n,
					      e.status, e.message);
				}
				CHECK(ing_mem_live() == live, "case %zu, fail at %ld%s: leaked %zu bytes",
				      i, n, sticky ? " (sticky)" : "", ing_mem_live() - live);
			}
		}
		printf("case %zu: %ld allocations walked, %ld runs failed cleanly\n", i, total, failed);
	}
	harness_api_cleanup();
	harness_tokenizer_cleanup();
	CHECK(ing_mem_live() == 0, "%zu bytes still allocated", ing_mem_live());
	return check_summary("test_request_faults");
}
