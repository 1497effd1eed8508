/* fuzz_tokenizer.c — libFuzzer entry for encode/decode/stream on the
 * shared vocabularies; the body is tests/harness_tokenizer.c. */
#include "harness_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return harness_tokenizer(data, size);
}
