/* fuzz_gguf.c — libFuzzer entry for the GGUF parser, tokenizer loading and
 * model binding; the body is tests/harness_gguf.c. */
#include "harness_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return harness_gguf(data, size);
}
