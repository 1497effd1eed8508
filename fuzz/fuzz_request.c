/* fuzz_request.c — libFuzzer entry for the request path (body bytes to prompt tokens); the body is tests/harness_api.c. */
#include "harness_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return harness_request(data, size);
}
