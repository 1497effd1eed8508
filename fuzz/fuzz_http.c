/* fuzz_http.c — libFuzzer entry for the HTTP request path on an in-process server; the body is tests/harness_http.c. */
#include "harness_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return harness_http(data, size);
}
