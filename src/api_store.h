/* api_store.h — stored responses of the Responses API (api_store.c): a
 * bounded, least-recently-used map from response id to the response and
 * the input of its turn, from which previous_response_id rebuilds a
 * conversation. Thread-safe. */
#ifndef INGOT_API_STORE_H
#define INGOT_API_STORE_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

struct resp_store;

enum { RESP_STORE_NOT_FOUND = -2, RESP_STORE_TOO_LONG = -3 };

/* An empty store keeping at most max_bytes of response and input text
 * (the oldest used go first). -1 when out of memory (*out NULL). */
int resp_store_create(size_t max_bytes, struct resp_store **out);
void resp_store_free(struct resp_store *s); /* accepts NULL */

/* Stores a copy of response (a response object with its "id") as the
 * answer to req (the Responses request body: its input and
 * previous_response_id). An id stored before is replaced. A response
 * larger than the whole store is not kept. 0, or -1 out of memory. */
int resp_store_put(struct resp_store *s, const cJSON *response, const cJSON *req);

/* A copy of the stored response object (the caller deletes it), or NULL
 * when id is not stored. */
cJSON *resp_store_get(struct resp_store *s, const char *id);

/* Removes id from view (get, history from it, delete: not found); its
 * turn still serves the responses that continued it, until evicted.
 * False when it was not stored. */
bool resp_store_delete(struct resp_store *s, const char *id);

/* The conversation that response id ends, as Responses input items, oldest
 * first: each turn's input items, then its output items (for the last
 * turn, id's own, only with last_output: without, what id was generated
 * from). Input items read as a listing shows them: each with a type and
 * an id, a message's text as content parts. *items is a new array (the
 * caller deletes it). RESP_STORE_NOT_FOUND when id or one of
 * the turns before it is not stored (its id copied into missing),
 * RESP_STORE_TOO_LONG for a chain past 100,000 turns, -1 out of memory. */
int resp_store_history(struct resp_store *s, const char *id, bool last_output, cJSON **items,
		       char *missing, size_t missing_cap);

/* Responses stored now (not deleted), and (bytes, may be NULL) the bytes
 * the store counts against its bound (deleted turns kept included). */
size_t resp_store_usage(struct resp_store *s, size_t *bytes);

#endif
