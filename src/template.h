/* template.h — Jinja chat templates (tokenizer.chat_template).
 *
 * A compiled template is parsed once and rendered many times, from any
 * number of threads at once: template_parse() builds an immutable syntax
 * tree, each render keeps all of its state on its own.
 *
 * The language and its results follow Python jinja2 configured as Hugging
 * Face transformers does: a sandboxed (immutable) environment with
 * trim_blocks and lstrip_blocks, the loop-controls extension ({% break %},
 * {% continue %}), the {% generation %} tag, and the globals
 * raise_exception(msg) and strftime_now(fmt); tojson is HF's json.dumps
 * (ensure_ascii=False, indent, separators, sort_keys). Values come from a
 * JSON object (the template's variables: messages, tools,
 * add_generation_prompt, bos_token, eos_token, ...).
 *
 * Errors (the ing_err code):
 *   ING_ERR_INVALID  the input was refused: the template called
 *                    raise_exception (msg is exactly its message), or the
 *                    context is not a JSON object;
 *   ING_ERR_FORMAT   syntax error, or a runtime error inside the template
 *                    (undefined attribute, wrong type, ...); msg starts with
 *                    "line L, column C: ";
 *   ING_ERR_RANGE    a limit was hit (output size, loop steps, nesting);
 *   ING_ERR_NOMEM    out of memory.
 * Hostile templates end in one of these, never in a crash. */
#ifndef INGOT_TEMPLATE_H
#define INGOT_TEMPLATE_H

#include <stddef.h>
#include <time.h>

#include "err.h"

struct template;
struct cJSON;

/* Render options; a zeroed struct (or NULL) means the defaults. */
struct template_opts {
	/* Clock of strftime_now(): when non-NULL, this broken-down local time
	 * (tm_wday/tm_yday need not be set). When NULL, the environment
	 * variable INGOT_TEMPLATE_NOW ("YYYY-MM-DD HH:MM:SS") if set, else the
	 * real local time. */
	const struct tm *now;
	size_t max_output;  /* bytes of one rendering; default 32 MiB */
	size_t max_bytes;   /* bytes of all strings made while rendering;
			       default 512 MiB (bounds quadratic concatenation) */
	long max_steps;     /* loop iterations plus macro calls; default 1e6 */
	int max_depth;      /* nesting of evaluation (expressions inside macro
			       calls inside ...); default 1000 */
};

/* Compiles the template text src[0..len). On success *out owns the result
 * (template_free). On a syntax error returns ING_ERR_FORMAT with
 * "line L, column C: ..." in err; ING_ERR_NOMEM when out of memory. */
int template_parse(const char *src, size_t len, struct template **out, ing_err *err);

/* Frees t; NULL is fine. */
void template_free(struct template *t);

/* Renders t with the variables of the JSON object json[0..len). On success
 * *out is a NUL-terminated string of *out_len bytes that the caller frees
 * with ing_free(); on failure *out is NULL and err says why (see above).
 * Numbers written with a fraction or exponent are floats, others ints, as
 * Python's json module reads them. */
int template_render_json(const struct template *t, const char *json, size_t len,
			 const struct template_opts *opts, char **out, size_t *out_len,
			 ing_err *err);

/* As template_render_json with an already parsed cJSON object (not
 * modified). cJSON keeps no int/float distinction: integral numbers within
 * +-2^53 become ints. */
int template_render_cjson(const struct template *t, const struct cJSON *ctx,
			  const struct template_opts *opts, char **out, size_t *out_len,
			  ing_err *err);

#endif
