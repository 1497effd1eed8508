/* fuzz_template.c — libFuzzer entry for the chat template engine (template x context); the body is tests/harness_api.c. */
#include "harness_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return harness_template(data, size);
}
