/* api_store.c — stored responses of the Responses API: what `store`,
 * previous_response_id and GET/DELETE /v1/responses/{id} read and write.
 *
 * An entry is one response: its id, the response object as JSON text, the
 * request's own input as an array of items (a string input becomes one
 * user message item) and the previous_response_id it continued. A
 * conversation is a chain of entries linked by those ids, and is rebuilt
 * by walking the chain back (resp_store_history): each entry stores only
 * its own turn, so a long conversation costs memory linear in its length,
 * not quadratic.
 *
 * Memory is bounded: entries are kept in least-recently-used order (a get,
 * a history walk and a put touch them) and the oldest are dropped once the
 * texts pass max_bytes. A conversation whose older turns were dropped can
 * no longer be continued (resp_store_history says which id is missing).
 * A deleted response is hidden (get, delete and continuing from it answer
 * "not found") but stays as a turn of the later responses that continued
 * it, as OpenAI keeps each response's whole context, until the LRU order
 * drops it like any other.
 * Lookups go through a fixed table of hash buckets. One mutex guards
 * everything: callers are HTTP threads, each holding it for a lookup or a
 * copy. */
#include "api_store.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "hash.h"
#include "mem.h"

#define STORE_BUCKETS 4096
#define STORE_MAX_CHAIN 100000 /* turns walked at most (guards a cycle of reused ids) */

struct store_entry {
	char *id, *prev_id;        /* prev_id: NULL when the conversation starts here */
	char *response;            /* the response object, JSON */
	char *input;               /* the request's input items, a JSON array */
	size_t bytes;
	bool deleted;              /* hidden; kept as a turn of later responses */
	struct store_entry *hnext; /* bucket chain */
	struct store_entry *newer, *older; /* LRU list */
};

struct resp_store {
	pthread_mutex_t mu;
	size_t max_bytes, bytes;
	size_t count;              /* entries not deleted */
	struct store_entry *newest, *oldest;
	struct store_entry *buckets[STORE_BUCKETS];
};

int resp_store_create(size_t max_bytes, struct resp_store **out)
{
	struct resp_store *s = ing_calloc(1, sizeof *s);
	*out = s;
	if (!s)
		return -1;
	s->max_bytes = max_bytes;
	pthread_mutex_init(&s->mu, NULL);
	return 0;
}

static void entry_free(struct store_entry *e)
{
	ing_free(e->id);
	ing_free(e->prev_id);
	ing_free(e->response);
	ing_free(e->input);
	ing_free(e);
}

void resp_store_free(struct resp_store *s)
{
	if (!s)
		return;
	for (struct store_entry *e = s->newest, *next; e; e = next) {
		next = e->older;
		entry_free(e);
	}
	pthread_mutex_destroy(&s->mu);
	ing_free(s);
}

static struct store_entry **bucket_of(struct resp_store *s, const char *id)
{
	return &s->buckets[hash_fnv1a32(id, strlen(id)) % STORE_BUCKETS];
}

static struct store_entry *find(struct resp_store *s, const char *id)
{
	for (struct store_entry *e = *bucket_of(s, id); e; e = e->hnext)
		if (!strcmp(e->id, id))
			return e;
	return NULL;
}

static void lru_unlink(struct resp_store *s, struct store_entry *e)
{
	if (e->newer)
		e->newer->older = e->older;
	else
		s->newest = e->older;
	if (e->older)
		e->older->newer = e->newer;
	else
		s->oldest = e->newer;
	e->newer = e->older = NULL;
}

static void lru_push(struct resp_store *s, struct store_entry *e)
{
	e->older = s->newest;
	e->newer = NULL;
	if (s->newest)
		s->newest->newer = e;
	s->newest = e;
	if (!s->oldest)
		s->oldest = e;
}

static void touch(struct resp_store *s, struct store_entry *e)
{
	lru_unlink(s, e);
	lru_push(s, e);
}

/* Takes e out of the table and the list and frees it. */
static void drop(struct resp_store *s, struct store_entry *e)
{
	struct store_entry **p = bucket_of(s, e->id);
	while (*p != e)
		p = &(*p)->hnext;
	*p = e->hnext;
	lru_unlink(s, e);
	s->bytes -= e->bytes;
	s->count -= !e->deleted;
	entry_free(e);
}

/* An input item as a listing shows it (what OpenAI's input_items
 * returns): a type ("message" when left out), a message's status
 * ("completed" when left out), an id (given, else
 * "msg_<response id's tail>_<i>" or "item_..._<i>": stable, unique), and a
 * message's string content as one text part. */
static void item_normalize(cJSON *it, const char *resp_id, int i)
{
	if (!cJSON_IsObject(it))
		return;
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(it, "type");
	if (!type)
		type = cJSON_AddStringToObject(it, "type", "message");
	bool msg = cJSON_IsString(type) && !strcmp(type->valuestring, "message");
	if (!cJSON_HasObjectItem(it, "id")) {
		const char *dash = strchr(resp_id, '_');
		char id[160];
		snprintf(id, sizeof id, "%s_%s_%d", msg ? "msg" : "item", dash ? dash + 1 : resp_id, i);
		cJSON_AddStringToObject(it, "id", id);
	}
	if (msg && !cJSON_HasObjectItem(it, "status")) /* as OpenAI lists stored input */
		cJSON_AddStringToObject(it, "status", "completed");
	cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
	if (msg && cJSON_IsString(content)) {
		const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
		bool out = cJSON_IsString(role) && !strcmp(role->valuestring, "assistant");
		cJSON *parts = cJSON_CreateArray(), *p = cJSON_CreateObject();
		cJSON_AddItemToArray(parts, p);
		cJSON_AddStringToObject(p, "type", out ? "output_text" : "input_text");
		cJSON_AddStringToObject(p, "text", content->valuestring);
		cJSON_ReplaceItemInObjectCaseSensitive(it, "content", parts);
	}
}

/* The request's input as items (a string becomes one user message),
 * normalized (item_normalize). */
static cJSON *input_items(const cJSON *req, const char *resp_id)
{
	const cJSON *in = cJSON_GetObjectItemCaseSensitive(req, "input");
	cJSON *arr;
	if (cJSON_IsArray(in)) {
		arr = cJSON_Duplicate(in, true);
	} else {
		cJSON *m = cJSON_CreateObject();
		arr = cJSON_CreateArray();
		cJSON_AddItemToArray(arr, m);
		cJSON_AddStringToObject(m, "role", "user");
		cJSON_AddStringToObject(m, "content", cJSON_IsString(in) ? in->valuestring : "");
	}
	int i = 0;
	for (cJSON *it = arr ? arr->child : NULL; it; it = it->next)
		item_normalize(it, resp_id, i++);
	return arr;
}

static char *print_or_null(const cJSON *o)
{
	char *p = o ? cJSON_PrintUnformatted(o) : NULL;
	if (!p)
		return NULL;
	char *q = ing_strndup(p, strlen(p)); /* ours to free with ing_free */
	cJSON_free(p);
	return q;
}

int resp_store_put(struct resp_store *s, const cJSON *response, const cJSON *req)
{
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(response, "id");
	const cJSON *prev = cJSON_GetObjectItemCaseSensitive(req, "previous_response_id");
	if (!cJSON_IsString(id))
		return -1;
	struct store_entry *e = ing_calloc(1, sizeof *e);
	cJSON *items = input_items(req, id->valuestring);
	if (!e) {
		cJSON_Delete(items);
		return -1;
	}
	e->id = ing_strndup(id->valuestring, strlen(id->valuestring));
	e->prev_id = cJSON_IsString(prev) ? ing_strndup(prev->valuestring, strlen(prev->valuestring))
					  : NULL;
	e->response = print_or_null(response);
	e->input = print_or_null(items);
	cJSON_Delete(items);
	if (!e->id || (cJSON_IsString(prev) && !e->prev_id) || !e->response || !e->input) {
		entry_free(e);
		return -1;
	}
	e->bytes = sizeof *e + strlen(e->id) + strlen(e->response) + strlen(e->input) +
		   (e->prev_id ? strlen(e->prev_id) : 0);
	pthread_mutex_lock(&s->mu);
	struct store_entry *old = find(s, e->id); /* an id given again replaces its entry */
	if (old)
		drop(s, old);
	if (e->bytes > s->max_bytes) { /* too large to keep at all: evicts nothing */
		pthread_mutex_unlock(&s->mu);
		entry_free(e);
		return 0;
	}
	struct store_entry **b = bucket_of(s, e->id);
	e->hnext = *b;
	*b = e;
	lru_push(s, e);
	s->bytes += e->bytes;
	s->count++;
	while (s->bytes > s->max_bytes)
		drop(s, s->oldest); /* never e: it fits alone */
	pthread_mutex_unlock(&s->mu);
	return 0;
}

cJSON *resp_store_get(struct resp_store *s, const char *id)
{
	pthread_mutex_lock(&s->mu);
	struct store_entry *e = find(s, id);
	cJSON *o = NULL;
	if (e && !e->deleted) {
		touch(s, e);
		o = cJSON_Parse(e->response);
	}
	pthread_mutex_unlock(&s->mu);
	return o;
}

bool resp_store_delete(struct resp_store *s, const char *id)
{
	pthread_mutex_lock(&s->mu);
	struct store_entry *e = find(s, id);
	bool found = e && !e->deleted;
	if (found) {
		e->deleted = true;
		s->count--;
	}
	pthread_mutex_unlock(&s->mu);
	return found;
}

/* Appends entry e's turn to items: its input items, then (with_output)
 * its output. */
static int turn_append(const struct store_entry *e, bool with_output, cJSON *items)
{
	cJSON *in = cJSON_Parse(e->input), *resp = cJSON_Parse(e->response);
	cJSON *out = cJSON_GetObjectItemCaseSensitive(resp, "output");
	int rc = cJSON_IsArray(in) && cJSON_IsArray(out) ? 0 : -1;
	for (cJSON *it = rc ? NULL : in->child, *next; it; it = next) {
		next = it->next;
		cJSON_AddItemToArray(items, cJSON_DetachItemViaPointer(in, it));
	}
	for (cJSON *it = rc || !with_output ? NULL : out->child, *next; it; it = next) {
		next = it->next;
		cJSON_AddItemToArray(items, cJSON_DetachItemViaPointer(out, it));
	}
	cJSON_Delete(in);
	cJSON_Delete(resp);
	return rc;
}

int resp_store_history(struct resp_store *s, const char *id, bool last_output, cJSON **items,
		       char *missing, size_t missing_cap)
{
	*items = NULL;
	missing[0] = 0;
	pthread_mutex_lock(&s->mu);
	/* the chain, newest first */
	size_t n = 0, cap = 16;
	struct store_entry **chain = ing_malloc_array(cap, sizeof *chain);
	int rc = chain ? 0 : -1;
	for (const char *at = id; !rc && at; n++) {
		struct store_entry *e = find(s, at);
		if (!e || (n == 0 && e->deleted)) { /* a deleted turn only serves later ones */
			snprintf(missing, missing_cap, "%s", at);
			rc = RESP_STORE_NOT_FOUND;
			break;
		}
		if (n == STORE_MAX_CHAIN) {
			rc = RESP_STORE_TOO_LONG;
			break;
		}
		if (n == cap) {
			struct store_entry **g = ing_realloc(chain, cap * 2 * sizeof *chain);
			if (!g) {
				rc = -1;
				break;
			}
			chain = g, cap *= 2;
		}
		chain[n] = e;
		at = e->prev_id;
	}
	cJSON *arr = rc ? NULL : cJSON_CreateArray();
	if (!rc && !arr)
		rc = -1;
	for (size_t i = n; !rc && i-- > 0;) {
		touch(s, chain[i]);
		rc = turn_append(chain[i], i > 0 || last_output, arr);
	}
	pthread_mutex_unlock(&s->mu);
	ing_free(chain);
	if (rc) {
		cJSON_Delete(arr);
		return rc;
	}
	*items = arr;
	return 0;
}

size_t resp_store_usage(struct resp_store *s, size_t *bytes)
{
	pthread_mutex_lock(&s->mu);
	size_t n = s->count;
	if (bytes)
		*bytes = s->bytes;
	pthread_mutex_unlock(&s->mu);
	return n;
}
