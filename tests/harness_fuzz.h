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

/* Prints "harness: <what>" to stderr and aborts. */
void harness_fail(const char *what, ...) __attribute__((noreturn, format(printf, 1, 2)));

#endif
