/* toolcall.h — function calls in model output, per chat-template family.
 *
 * A model asks for a function call by writing it in the markup its chat
 * template taught it. The formats known here:
 *
 *   TOOLCALL_HERMES       <tool_call>{"name": N, "arguments": {...}}</tool_call>
 *                         (Hermes 2 Pro, Qwen 2.5, and ingot's built-in
 *                         template for models without one)
 *   TOOLCALL_LLAMA3       [<|python_tag|>]{"name": N, "parameters": {...}}
 *                         at the very start of the reply (Llama 3.1/3.2)
 *   TOOLCALL_FUNCTIONARY  <function=N>{...}</function>, or <|python_tag|>code
 *                         (the "python" tool) (Functionary v3.1)
 *   TOOLCALL_DEEPSEEK_R1  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function
 *                         <｜tool▁sep｜>N\n```json\n{...}\n```<｜tool▁call▁end｜>
 *                         ...<｜tool▁calls▁end｜>
 *   TOOLCALL_MISTRAL      [TOOL_CALLS][{"name": N, "arguments": {...}}, ...]
 *
 * Parsing is all-or-nothing: when the markup is there but a call in it is
 * malformed, the whole text stays content (the client sees what the model
 * wrote, never a half-parsed call). Content is the text before the first
 * call. Functions here are pure: no state, safe from any thread. */
#ifndef INGOT_TOOLCALL_H
#define INGOT_TOOLCALL_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "sbuf.h"

enum toolcall_format {
	TOOLCALL_HERMES,
	TOOLCALL_LLAMA3,
	TOOLCALL_FUNCTIONARY,
	TOOLCALL_DEEPSEEK_R1,
	TOOLCALL_MISTRAL,
};

/* The format a chat template's source teaches, from the markup it
 * contains; TOOLCALL_HERMES when it shows none (templates without tool
 * support, the built-in one). */
enum toolcall_format toolcall_format_detect(const char *tpl, size_t n);

/* Static lower-case name ("hermes", "llama3", ...). */
const char *toolcall_format_name(enum toolcall_format f);

struct toolcall {
	char *name;        /* NUL-terminated */
	char *arguments;   /* JSON text of the arguments (an object, usually) */
};

struct toolcall_list {
	struct toolcall *v;  /* [n] */
	int n;
	size_t content_len;  /* text[0..content_len) is the message content */
};

/* Parses text[0..n) written in format f. On ING_OK, out->n calls (0 when
 * the text holds none, or malformed ones; then content_len == n). The
 * caller frees out with toolcall_list_free, also after an error.
 * ING_ERR_NOMEM. */
int toolcall_parse(enum toolcall_format f, const char *text, size_t n, struct toolcall_list *out,
		   ing_err *err);

/* Accepts a zeroed list. */
void toolcall_list_free(struct toolcall_list *l);

/* Streaming: how many leading bytes of text[0..n) are content whatever
 * comes next, i.e. end before anything that is or may become the start of
 * a call. */
size_t toolcall_content_prefix(enum toolcall_format f, const char *text, size_t n);

/* The markup that closes one call in the formats that write each call as
 * a block of its own (Hermes' </tool_call>, Functionary's </function>);
 * NULL in those that frame all calls as one (Llama 3, DeepSeek R1,
 * Mistral). Static. */
const char *toolcall_block_close(enum toolcall_format f);

/* Output cut off inside a call: the length of text[0..n) up to the end
 * of its last call block that closed (Hermes' </tool_call>, Functionary's
 * </function>), to be parsed without the call that did not; 0 when none
 * closed or the format frames all calls as one (Llama 3, DeepSeek R1,
 * Mistral). */
size_t toolcall_complete_prefix(enum toolcall_format f, const char *text, size_t n);

/* The literal text that starts a call to name in format f, up to where its
 * arguments object begins (prefix), and the text that ends the call after
 * the arguments (suffix); appended to the buffers. Used to force a named
 * call. With name NULL, only the opening markup before the function name
 * (suffix untouched): forces some call. Returns -1 when out of memory. */
int toolcall_frame(enum toolcall_format f, const char *name, struct sbuf *prefix,
		   struct sbuf *suffix);

#endif
