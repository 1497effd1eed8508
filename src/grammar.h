/* grammar.h — constrained decoding: byte-level grammars compiled from JSON
 * schemas (OpenAI's response_format), matched token by token.
 *
 * Three objects:
 *   struct grammar          a compiled language over bytes (a set of rules
 *                           with alternatives, recursion allowed). Shared:
 *                           reference counted, usable from any thread. It
 *                           also carries the lazily built automaton and
 *                           token-mask cache that matchers share (guarded
 *                           by its own lock), so compiling a schema once
 *                           and reusing the grammar makes later requests
 *                           cheap.
 *   struct grammar_vocab    the token trie of one tokenizer: every token's
 *                           decoded bytes, sorted and laid out for a
 *                           pruned depth-first walk. Built once per
 *                           tokenizer (about 0.2 s for a 262k vocabulary),
 *                           immutable, shareable between threads.
 *   struct grammar_matcher  one sequence's position in a grammar: which
 *                           tokens may come next (a logit mask), advancing
 *                           by the chosen token. Not thread-safe.
 *
 * The language is over the decoded bytes of the output (UTF-8), not over
 * tokens; any tokenization of an allowed text is allowed. Control tokens
 * and tokens that decode to nothing are never allowed. End-of-generation
 * tokens (tokenizer_is_eog) are allowed exactly when the text so far is a
 * complete sentence of the grammar; once the text is complete and nothing
 * can extend it, only they are allowed (grammar_matcher_done is then true,
 * and an engine may stop without sampling).
 *
 * JSON output: between JSON tokens the whitespace is nothing, one space,
 * or one newline followed by at most GRAMMAR_JSON_MAX_WS - 1 spaces or tabs
 * (compact and pretty-printed JSON fit, endless blank lines do not); the
 * same is allowed before the top-level value (unless a prefix comes
 * first), nothing after it, so generation ends with the value.
 *
 * Errors: compilation returns ING_ERR_UNSUPPORTED naming the construct
 * (e.g. "unsupported JSON schema keyword 'oneOf' at #/properties/x"),
 * ING_ERR_INVALID for something that is not a schema, ING_ERR_NOMEM. */
#ifndef INGOT_GRAMMAR_H
#define INGOT_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct cJSON;
struct tokenizer;
struct grammar;
struct grammar_vocab;
struct grammar_matcher;

#define GRAMMAR_JSON_MAX_WS 20

/* ---- compiling ---- */

/* Any JSON object (response_format {"type": "json_object"}). */
int grammar_json_object(struct grammar **out, ing_err *err);

/* JSON text of a schema (the "schema" member of response_format's
 * json_schema) -> grammar of the JSON values it accepts. Supported: type
 * (one or a list), properties / required / additionalProperties (extra
 * properties are never generated), items / prefixItems / minItems /
 * maxItems, enum, const, anyOf, allOf with one member, $ref into #/$defs or
 * #/definitions (recursion allowed), string minLength / maxLength / format
 * (date, time, date-time, email, uuid, ipv4) or pattern (a regular
 * expression as grammar_from_regex takes them; not with the others; the
 * characters JSON escapes only where the pattern names them), integer and
 * number bounds
 * when they are integers, boolean, null, {} / true (any value).
 * Annotations (title, description, default, examples, $schema, ...) are
 * ignored. On success *out holds one reference (grammar_free). */
int grammar_from_json_schema(const char *json, size_t len, struct grammar **out, ing_err *err);

/* One alternative of an output: literal prefix, a JSON value, literal
 * suffix. schema NULL means any JSON value; prefix/suffix NULL mean "". */
struct grammar_alt {
	const char *prefix;
	const struct cJSON *schema;
	const char *suffix;
};

/* The output is between min_count and max_count (>= min_count, >= 1)
 * occurrences of any of the n alternatives, separated by sep (NULL: "").
 * For tool calls, e.g. one alternative per function:
 *   prefix "<tool_call>{\"name\": \"get_weather\", \"arguments\": "
 *   schema the function's parameters, suffix "}</tool_call>".
 * min_count = max_count = 1 with one alternative of prefix/suffix NULL is
 * grammar_from_json_schema on a parsed schema. The schemas are read during
 * the call only. */
int grammar_from_alts(const struct grammar_alt *alts, int n, int min_count, int max_count,
		      const char *sep, struct grammar **out, ing_err *err);

/* A grammar in GBNF (llama.cpp's notation; start rule "root") or a regular
 * expression the whole output must match; see grammar_text.c for the
 * accepted syntax. ING_ERR_INVALID / ING_ERR_UNSUPPORTED with the offset of
 * the problem in err. */
int grammar_from_gbnf(const char *text, size_t len, struct grammar **out, ing_err *err);
int grammar_from_regex(const char *pattern, size_t len, struct grammar **out, ing_err *err);

/* Adds a reference; returns g. */
struct grammar *grammar_ref(struct grammar *g);

/* Drops a reference, freeing at the last. Accepts NULL. */
void grammar_free(struct grammar *g);

/* ---- vocabulary ---- */

/* Builds the token trie of tk (which must outlive it). */
int grammar_vocab_create(const struct tokenizer *tk, struct grammar_vocab **out, ing_err *err);
void grammar_vocab_free(struct grammar_vocab *v);

/* ---- matching ---- */

/* A matcher at the start of g (takes a reference to g; v must outlive the
 * matcher). v may be NULL for a matcher that is only fed bytes. */
int grammar_matcher_create(struct grammar *g, const struct grammar_vocab *v,
			   struct grammar_matcher **out, ing_err *err);
void grammar_matcher_free(struct grammar_matcher *m);

/* Sets logits[t] = -INFINITY for every token t of the vocabulary that may
 * not come next. Returns how many tokens remain allowed; 0 means the
 * grammar cannot continue with this vocabulary (the caller should end the
 * sequence). Cost: a cache lookup plus one pass writing the masked logits
 * for a state seen before (per grammar, across matchers); a pruned trie
 * walk the first time, which may build automaton states. -1 with logits
 * untouched and err set: ING_ERR_NOMEM, or ING_ERR_UNSUPPORTED when the
 * grammar is too complex to follow (building this mask needed more than
 * GRAMMAR_MAX_WORK steps, or the matcher's masks together more than
 * GRAMMAR_MAX_WORK_TOTAL, grammar_int.h: the bounds on the time one call
 * and one sequence can take, for patterns whose automaton grows
 * exponentially; or one byte's expansion runs too far). The states built
 * before the failure stay cached. */
int64_t grammar_matcher_mask(struct grammar_matcher *m, float *logits, ing_err *err);

/* Advances by token tok. False, with the matcher unchanged, when tok is
 * not allowed here. An end-of-generation token is accepted when the text
 * is complete and leaves the matcher as it was. */
bool grammar_matcher_accept_token(struct grammar_matcher *m, int32_t tok);

/* Advances by raw bytes (tests, forced text). False, unchanged, when they
 * leave the language, or when the automaton cannot be built for them (out
 * of memory; a byte's expansion running too far; more than
 * GRAMMAR_MAX_WORK steps for the whole text). */
bool grammar_matcher_accept_bytes(struct grammar_matcher *m, const char *s, size_t n);

/* The text so far is a complete sentence (an end-of-generation token is
 * allowed). */
bool grammar_matcher_can_end(const struct grammar_matcher *m);

/* Complete and nothing may follow: only end-of-generation is allowed. */
bool grammar_matcher_done(const struct grammar_matcher *m);

#endif
