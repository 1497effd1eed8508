/* fuzz_grammar.c — libFuzzer entry for the JSON schema compiler and the
 * grammar matcher; the body is tests/harness_grammar.c. */
#include "harness_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return harness_grammar(data, size);
}
