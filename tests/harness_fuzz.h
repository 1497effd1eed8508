/* harness_fuzz.h — the bodies of ingot's fuzz targets.
 *
 * Each harness takes one input of any bytes, drives a module with it and
 * checks invariants; a violated invariant prints what broke and calls
 * abort(), so libFuzzer, a sanitizer build or the regression test all
 * count it as a crash. They are called from two places:
 *   fuzz/fuzz_*.c              thin LLVMFuzzerTestOneInput wrappers (clang,
 *                              ASan + UBSan + libFuzzer, `make fuzz`);
 *   tests/test_fuzz_regress.c  replays the files in fuzz/regress/<target>/
 *                              in the ordinary test builds.
 * Inputs and their layout are described at the top of each harness file.
 * Neither harness keeps memory between calls except the tokenizer cache,
 * which harness_tokenizer_cleanup() releases. */
#ifndef INGOT_TESTS_HARNESS_FUZZ_H
#define INGOT_TESTS_HARNESS_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tokenizer;

/* data is a GGUF file: parse it, walk every value and tensor, open a
 * tokenizer and bind a model on it. Always returns 0. */
int harness_gguf(const uint8_t *data, size_t size);

/* data[0] picks one of the shared vocabularies, data[1..] is text to
 * encode, decode and stream-decode. Always returns 0. */
int harness_tokenizer(const uint8_t *data, size_t size);

/* Frees the tokenizers harness_tokenizer cached. */
void harness_tokenizer_cleanup(void);

/* data is a JSON schema, optionally followed by a NUL and bytes that
 * drive a generation under the compiled grammar (tests/harness_grammar.c).
 * Always returns 0. */
int harness_grammar(const uint8_t *data, size_t size);

/* Frees the vocabulary harness_grammar built. */
void harness_grammar_cleanup(void);

/* The tokenizer of shared vocabulary i (modulo their count), opened once
 * and cached until harness_tokenizer_cleanup(). */
const struct tokenizer *harness_vocab(size_t i);

/* data[0] selects vocabulary, endpoint and chat template, data[1..] is a
 * request body: parsed and read up to prompt tokens (tests/harness_api.c).
 * Always returns 0. */
int harness_request(const uint8_t *data, size_t size);

/* data is a chat template, a NUL byte and a JSON context: compiled and
 * rendered (tests/harness_api.c). Always returns 0. */
int harness_template(const uint8_t *data, size_t size);

/* data is sent as one client connection to an in-process server
 * (tests/harness_http.c). Always returns 0. */
int harness_http(const uint8_t *data, size_t size);

/* An engine-less api for the request harnesses: vocabulary sel & 7,
 * template sel >> 4 (0 a built-in ChatML, then the shared templates). */
struct api;
void harness_api_init(struct api *a, unsigned sel);
/* Paths of the shared templates (*.jinja), sorted; returns how many. */
size_t harness_template_files(char names[][256], size_t max);
/* Free the compiled templates and the seeded response store; stop the
 * in-process server. */
void harness_api_cleanup(void);
void harness_http_cleanup(void);

/* The checks harness_tokenizer runs, on any open tokenizer: encodes text
 * with every flag combination, decodes the ids with every flag
 * combination and stream-decodes them, and aborts unless the ids are in
 * range, decoding succeeds, the stream gives valid UTF-8 and (without
 * space clean-up) the same text as decode with invalid sequences replaced.
 * With roundtrip (trusted vocabularies only), a SentencePiece vocabulary
 * must also decode valid UTF-8 text that holds no special-token text back
 * to itself, modulo one leading space. */
void harness_tokenizer_exercise(const struct tokenizer *tk, const uint8_t *text, size_t len,
				bool roundtrip);

/* Seed inputs built in memory (tests/harness_seeds.c): emit is called
 * once per seed with a short name and the bytes, which it must copy. GGUF
 * seeds: metadata of every type, tiny models of each architecture, cut-down
 * shared vocabularies. Tokenizer seeds: the shared conformance texts for
 * each vocabulary. Seeds that need shared/testdata are skipped without it. */
typedef void (*harness_seed_fn)(const char *name, const uint8_t *data, size_t size, void *ctx);
void harness_gguf_seeds(harness_seed_fn emit, void *ctx);
void harness_tokenizer_seeds(harness_seed_fn emit, void *ctx);
/* Grammar seeds: schemas of each supported kind (and one refused), each
 * with drive bytes. */
void harness_grammar_seeds(harness_seed_fn emit, void *ctx);

/* Request seeds: the bodies of tests/test_server.py's cases and the
 * shared template cases as chat requests. Template seeds: each shared
 * template with each of its cases' contexts. HTTP seeds: requests to every
 * endpoint, with and without the key, bodies, chunked encoding,
 * pipelining. */
void harness_request_seeds(harness_seed_fn emit, void *ctx);
void harness_template_seeds(harness_seed_fn emit, void *ctx);
void harness_http_seeds(harness_seed_fn emit, void *ctx);

/* Prints "harness: <what>" to stderr and aborts. */
void harness_fail(const char *what, ...) __attribute__((noreturn, format(printf, 1, 2)));

#endif
