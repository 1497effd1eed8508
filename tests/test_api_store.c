/* test_api_store.c — the stored responses of the Responses API
 * (api_store.c): get, delete, a conversation rebuilt from its chain of
 * previous_response_id links in order, least-recently-used eviction under
 * the byte bound (and what a continued conversation says when an earlier
 * turn is gone), an id stored again replacing the old entry, a cycle of
 * reused ids stopped, a response too large for the store not kept, every
 * allocation failure of put and history ending cleanly, and no leak. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api_store.h"
#include "check.h"
#include "mem.h"

/* A response object: id, and one assistant message item with text. */
static cJSON *response_make(const char *id, const char *text)
{
	cJSON *r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "id", id);
	cJSON_AddStringToObject(r, "object", "response");
	cJSON *out = cJSON_AddArrayToObject(r, "output"), *m = cJSON_CreateObject();
	cJSON_AddItemToArray(out, m);
	cJSON_AddStringToObject(m, "type", "message");
	cJSON_AddStringToObject(m, "role", "assistant");
	cJSON_AddStringToObject(m, "content", text);
	return r;
}

/* A request: input (a string) and previous_response_id (or NULL). */
static cJSON *request_make(const char *input, const char *prev)
{
	cJSON *q = cJSON_CreateObject();
	cJSON_AddStringToObject(q, "input", input);
	if (prev)
		cJSON_AddStringToObject(q, "previous_response_id", prev);
	return q;
}

static int put(struct resp_store *s, const char *id, const char *prev, const char *in,
	       const char *out)
{
	cJSON *r = response_make(id, out), *q = request_make(in, prev);
	int rc = resp_store_put(s, r, q);
	cJSON_Delete(r);
	cJSON_Delete(q);
	return rc;
}

/* A message item's text: its string content or its first part's. */
static const char *item_text(const cJSON *it)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "content");
	if (cJSON_IsArray(c))
		c = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(c, 0), "text");
	return cJSON_IsString(c) ? c->valuestring : "?";
}

/* The conversation ending at id as "role:text|role:text|...", or the
 * error code as text. */
static void history_text_any(struct resp_store *s, const char *id, bool last_output, char *buf,
			     size_t cap, char *missing)
{
	cJSON *items;
	char miss[64];
	int rc = resp_store_history(s, id, last_output, &items, miss, sizeof miss);
	if (missing)
		strcpy(missing, miss);
	if (rc) {
		snprintf(buf, cap, "error %d", rc);
		return;
	}
	size_t n = 0;
	buf[0] = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, items) {
		const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
		n += (size_t)snprintf(buf + n, cap - n, "%s%s:%s", n ? "|" : "",
				      cJSON_IsString(role) ? role->valuestring : "?", item_text(it));
	}
	cJSON_Delete(items);
}

static void history_text(struct resp_store *s, const char *id, char *buf, size_t cap,
			 char *missing)
{
	history_text_any(s, id, true, buf, cap, missing);
}

static void test_chain(void)
{
	struct resp_store *s;
	CHECK(resp_store_create(1 << 20, &s) == 0, "create");
	CHECK(put(s, "r1", NULL, "hi", "hello") == 0, "put r1");
	CHECK(put(s, "r2", "r1", "name?", "Ada") == 0, "put r2");
	CHECK(put(s, "r3", "r2", "again?", "Ada!") == 0, "put r3");
	char buf[512];
	history_text(s, "r3", buf, sizeof buf, NULL);
	CHECK(!strcmp(buf, "user:hi|assistant:hello|user:name?|assistant:Ada|user:again?|"
			   "assistant:Ada!"), "chain in order: %s", buf);
	history_text(s, "r1", buf, sizeof buf, NULL);
	CHECK(!strcmp(buf, "user:hi|assistant:hello"), "one turn: %s", buf);
	history_text_any(s, "r3", false, buf, sizeof buf, NULL);
	CHECK(!strcmp(buf, "user:hi|assistant:hello|user:name?|assistant:Ada|user:again?"),
	      "what r3 was generated from: %s", buf);
	/* input items are listed as OpenAI lists them: typed, with ids that
	 * stay the same, text as parts */
	cJSON *items;
	char miss0[8];
	CHECK(resp_store_history(s, "r2", false, &items, miss0, sizeof miss0) == 0, "r2 items");
	const cJSON *first = cJSON_GetArrayItem(items, 0), *second = cJSON_GetArrayItem(items, 2);
	const cJSON *fid = cJSON_GetObjectItemCaseSensitive(first, "id");
	const cJSON *sid = cJSON_GetObjectItemCaseSensitive(second, "id");
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(first, "type");
	const cJSON *part = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(first, "content"), 0);
	const cJSON *ptype = cJSON_GetObjectItemCaseSensitive(part, "type");
	CHECK(cJSON_IsString(fid) && !strcmp(fid->valuestring, "msg_r1_0") && cJSON_IsString(sid) &&
	      !strcmp(sid->valuestring, "msg_r2_0"), "ids");
	CHECK(cJSON_IsString(type) && !strcmp(type->valuestring, "message") &&
	      cJSON_IsString(ptype) && !strcmp(ptype->valuestring, "input_text"), "typed items");
	cJSON_Delete(items);
	cJSON *g = resp_store_get(s, "r2");
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(g, "id");
	CHECK(cJSON_IsString(id) && !strcmp(id->valuestring, "r2"), "get r2");
	cJSON_Delete(g);
	CHECK(!resp_store_get(s, "nope"), "get of an unknown id");
	char miss[64];
	history_text(s, "nope", buf, sizeof buf, miss);
	CHECK(!strcmp(buf, "error -2") && !strcmp(miss, "nope"), "unknown: %s %s", buf, miss);
	/* an earlier turn deleted: hidden, but still a turn of the responses
	 * that continued it (OpenAI keeps each response's whole context) */
	char before[512];
	history_text(s, "r3", before, sizeof before, NULL);
	size_t bytes_before = 0, bytes_after = 0;
	resp_store_usage(s, &bytes_before);
	CHECK(resp_store_delete(s, "r1") && !resp_store_delete(s, "r1"), "delete once");
	CHECK(!resp_store_get(s, "r1"), "a deleted response is not found");
	history_text(s, "r1", buf, sizeof buf, miss);
	CHECK(!strcmp(buf, "error -2") && !strcmp(miss, "r1"), "nor continued: %s %s", buf, miss);
	history_text(s, "r3", buf, sizeof buf, miss);
	CHECK(!strcmp(buf, before) && strstr(buf, "user:"), "later turns keep it: %s", buf);
	CHECK(resp_store_usage(s, &bytes_after) == 2 && bytes_after == bytes_before,
	      "count %zu (bytes kept)", resp_store_usage(s, NULL));
	/* given again, the id is a new response */
	cJSON *again = response_make("r1", "z"), *rq = cJSON_Parse("{\"input\":\"w\"}");
	CHECK(resp_store_put(s, again, rq) == 0 && resp_store_usage(s, NULL) == 3, "r1 again");
	history_text(s, "r1", buf, sizeof buf, NULL);
	CHECK(!strcmp(buf, "user:w|assistant:z"), "r1 again: %s", buf);
	cJSON_Delete(again);
	cJSON_Delete(rq);
	CHECK(resp_store_delete(s, "r1"), "delete r1 again");
	/* an input given as items is kept as items */
	cJSON *q = cJSON_Parse("{\"input\":[{\"type\":\"message\",\"role\":\"developer\","
			       "\"content\":\"be terse\"},{\"role\":\"user\",\"content\":\"x\"}]}");
	cJSON *r = response_make("r9", "y");
	CHECK(resp_store_put(s, r, q) == 0, "put items");
	history_text(s, "r9", buf, sizeof buf, NULL);
	CHECK(!strcmp(buf, "developer:be terse|user:x|assistant:y"), "items: %s", buf);
	cJSON_Delete(q);
	cJSON_Delete(r);
	resp_store_free(s);
}

static void test_eviction(void)
{
	/* room for a few entries of ~600 bytes */
	struct resp_store *s;
	CHECK(resp_store_create(2000, &s) == 0, "create");
	char pad[400];
	memset(pad, 'x', sizeof pad - 1);
	pad[sizeof pad - 1] = 0;
	CHECK(put(s, "a", NULL, "1", pad) == 0 && put(s, "b", NULL, "2", pad) == 0, "put a b");
	cJSON_Delete(resp_store_get(s, "a")); /* a is now the most recently used */
	CHECK(put(s, "c", NULL, "3", pad) == 0 && put(s, "d", NULL, "4", pad) == 0, "put c d");
	cJSON *a = resp_store_get(s, "a"), *b = resp_store_get(s, "b");
	cJSON *d = resp_store_get(s, "d");
	CHECK(!b, "the least recently used (b) went first");
	CHECK(d, "the newest stays");
	CHECK(resp_store_usage(s, NULL) <= 3, "bounded: %zu entries", resp_store_usage(s, NULL));
	cJSON_Delete(a);
	cJSON_Delete(b);
	cJSON_Delete(d);
	/* one response larger than the whole store is not kept, and the
	 * others stay */
	char big[3000];
	memset(big, 'y', sizeof big - 1);
	big[sizeof big - 1] = 0;
	size_t n = resp_store_usage(s, NULL);
	CHECK(put(s, "huge", NULL, "5", big) == 0, "put huge");
	cJSON *h = resp_store_get(s, "huge");
	CHECK(!h && resp_store_usage(s, NULL) == n, "too large: not kept (%zu vs %zu)",
	      resp_store_usage(s, NULL), n);
	cJSON_Delete(h);
	resp_store_free(s);
}

static void test_replace_and_cycle(void)
{
	struct resp_store *s;
	CHECK(resp_store_create(1 << 20, &s) == 0, "create");
	CHECK(put(s, "x", NULL, "q1", "a1") == 0, "put x");
	CHECK(put(s, "x", NULL, "q2", "a2") == 0, "put x again");
	char buf[256];
	history_text(s, "x", buf, sizeof buf, NULL);
	CHECK(!strcmp(buf, "user:q2|assistant:a2") && resp_store_usage(s, NULL) == 1,
	      "an id stored again replaces: %s", buf);
	/* ids chosen by clients can make a cycle: y -> x -> y */
	CHECK(put(s, "y", "x", "q3", "a3") == 0 && put(s, "x", "y", "q4", "a4") == 0, "cycle");
	history_text(s, "x", buf, sizeof buf, NULL);
	CHECK(!strcmp(buf, "error -3"), "a cycle ends as too long: %s", buf);
	resp_store_free(s);
}

/* Every allocation of a put and of a history walk failing in turn: a
 * clean error, the store still consistent, nothing leaked. */
static void test_alloc_failures(void)
{
	size_t live0 = ing_mem_live();
	struct resp_store *s;
	CHECK(resp_store_create(1 << 20, &s) == 0, "create");
	CHECK(put(s, "p", NULL, "q", "a") == 0, "put p");
	cJSON *r = response_make("z", "out"), *q = request_make("in", "p");
	int fails = 0;
	for (long nth = 1; nth < 64; nth++) {
		ing_mem_fail_at(nth, 0);
		int rc = resp_store_put(s, r, q);
		ing_mem_fail_at(0, 0);
		fails += rc != 0;
		if (rc == 0)
			break;
	}
	CHECK(fails > 0, "put saw failures");
	char buf[256];
	history_text(s, "z", buf, sizeof buf, NULL);
	CHECK(!strcmp(buf, "user:q|assistant:a|user:in|assistant:out"), "after: %s", buf);
	for (long nth = 1; nth < 64; nth++) {
		cJSON *items = NULL;
		char miss[32];
		ing_mem_fail_at(nth, 0);
		int rc = resp_store_history(s, "z", true, &items, miss, sizeof miss);
		ing_mem_fail_at(0, 0);
		CHECK(rc == 0 || rc == -1, "history rc %d", rc);
		CHECK((rc == 0) == (items != NULL), "items set only on success");
		cJSON_Delete(items);
		if (rc == 0)
			break;
	}
	cJSON_Delete(r);
	cJSON_Delete(q);
	resp_store_free(s);
	CHECK(ing_mem_live() == live0, "no leak: %zu bytes", ing_mem_live() - live0);
}

int main(void)
{
	test_chain();
	test_eviction();
	test_replace_and_cycle();
	test_alloc_failures();
	return check_summary("test_api_store");
}
