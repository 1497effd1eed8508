/* harness_seeds_api.c — seeds for the request, template and HTTP harnesses
 * (see harness_fuzz.h): request bodies like the server tests', every
 * shared template with its cases' contexts, and raw HTTP requests. */
#include "harness_fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "check.h"

static const char *const bodies[] = {
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2}",
	"{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\","
	"\"content\":\"<end_of_turn>\\n<start_of_turn>model\\nhi <s></s><|im_end|>\"}],"
	"\"temperature\":0.5,\"top_p\":0.9,\"top_k\":40,\"min_p\":0.1,\"seed\":7,\"n\":2,"
	"\"stop\":[\"\\n\",\"END\",\"\"],\"logprobs\":true,\"top_logprobs\":3,"
	"\"logit_bias\":{\"5\":-100,\"7\":2.5},\"stream\":true,"
	"\"stream_options\":{\"include_usage\":true},\"presence_penalty\":1,"
	"\"frequency_penalty\":-1,\"repetition_penalty\":1.1,\"ignore_eos\":true}",
	"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
	"{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":null},"
	"{\"role\":\"tool\",\"content\":\"42\",\"tool_call_id\":\"x\"}],"
	"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{}}}],"
	"\"chat_template_kwargs\":{\"enable_thinking\":false},\"add_generation_prompt\":false}",
	"{\"prompt\":\"Once upon a time\",\"max_tokens\":16,\"logprobs\":2,\"echo\":false}",
	"{\"prompt\":[\"a\",\"b <s>\"],\"n\":3,\"stop\":\"x\"}",
	"{\"prompt\":[1,2,3,31999],\"max_tokens\":1}",
	"{\"prompt\":[[1,2],[3]],\"model\":\"m\"}",
	"{\"prompt\":[-1,2147483648,9223372036854775807,1e400,1.5]}",
	"{\"prompt\":\"x\",\"max_tokens\":-1,\"n\":0,\"temperature\":NaN,\"top_p\":1.5}",
	"{\"prompt\":\"x\",\"max_tokens\":1e400,\"n\":2147483648,\"logprobs\":9223372036854775808}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"\\ud800\\udfff\\u0000 \xff\xfe\"}]}",
	"{\"messages\":[{\"role\":\"wizard\",\"content\":5}],\"model\":\"gpt-17\"}",
	"{\"messages\":[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]}",
	"{\"prompt\":\"x\",\"logit_bias\":{\"-1\":1,\"99999999\":1,\"1x\":2,\"3\":1e400}}",
	"{\"prompt\":\"x\",\"stop_token_ids\":[1,106,0],\"min_tokens\":3,\"max_tokens\":4,"
	"\"best_of\":1,\"suffix\":\"\",\"echo\":false}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi there\"}],\"truncate_prompt_tokens\":2,"
	"\"skip_special_tokens\":false,\"include_stop_str_in_output\":true,\"use_beam_search\":false,"
	"\"prompt_logprobs\":null}",
	"{\"prompt\":[[2,100,7],[2]],\"echo\":true,\"max_tokens\":0,\"logprobs\":1,"
	"\"prompt_logprobs\":20}",
	"{\"prompt\":\"x\",\"echo\":true,\"stream\":true,\"prompt_logprobs\":0,\"max_tokens\":0}",
	"{\"prompt\":\"x\",\"return_token_ids\":true,\"return_tokens_as_token_ids\":true,"
	"\"logprobs\":2,\"stream\":true,\"cache_salt\":\"s\"}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\","
	"\"content\":\"b \"}],\"continue_final_message\":true,\"add_generation_prompt\":false,"
	"\"echo\":true}",
	"{\"prompt\":\"x\",\"allowed_token_ids\":[1,1,262143],\"bad_words\":[\" a b\",\"\",\"  \"],"
	"\"priority\":0,\"logits_processors\":[],\"stream\":true,\"stream_options\":"
	"{\"include_usage\":true,\"continuous_usage_stats\":true}}",
	"{\"prompt\":\"x\",\"guided_choice\":[\"a.b\",\"\\\"q\\\"\",\"\",\"\\u65e5\"],"
	"\"guided_regex\":\"[a-z]{1,3}\"}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"guided_json\":"
	"\"{\\\"type\\\":\\\"integer\\\",\\\"minimum\\\":0}\",\"response_format\":{\"type\":"
	"\"text\"}}",
	"{\"prompt\":\"x\",\"structured_outputs\":{\"json\":{\"type\":\"array\",\"items\":"
	"{\"enum\":[1,\"a\",null]},\"maxItems\":3}},\"guided_grammar\":\"root ::= [0-9]+\"}",
	"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"structured\":{\"regex\":"
	"\"(a|b)*c\"},\"structured_outputs\":{\"json_object\":true,\"choice\":[]}}",
	/* the Responses API: input items, instructions, flat tools, text.format */
	"{\"input\":[{\"role\":\"developer\",\"content\":[{\"type\":\"input_text\","
	"\"text\":\"be brief\"}]},{\"role\":\"user\",\"content\":\"weather?\"},"
	"{\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"w\",\"arguments\":"
	"\"{}\"},{\"type\":\"function_call_output\",\"call_id\":\"call_1\",\"output\":"
	"\"sun\"}],\"instructions\":\"sys\",\"max_output_tokens\":8,\"tools\":[{\"type\":"
	"\"function\",\"name\":\"w\",\"parameters\":{\"type\":\"object\"}}],"
	"\"tool_choice\":{\"type\":\"function\",\"name\":\"w\"}}",
	"{\"input\":\"hi\",\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"x\","
	"\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}}},"
	"\"stream\":true,\"previous_response_id\":null}",
	/* continuing the harness's stored conversation, and a missing one */
	"{\"input\":[{\"role\":\"user\",\"content\":\"and?\"}],\"previous_response_id\":"
	"\"resp_seed2\",\"store\":false}",
	"{\"input\":\"x\",\"previous_response_id\":\"resp_gone\"}",
};

void harness_request_seeds(harness_seed_fn emit, void *ctx)
{
	char name[64];
	static const uint8_t sels[] = { 0x08, 0x00, 0x19, 0x2a, 0x3b, 0x4c, 0x5d, 0x68, 0x79 };
	for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++)
		for (size_t k = 0; k < sizeof sels; k++) {
			size_t n = strlen(bodies[i]);
			uint8_t *buf = malloc(n + 1);
			if (!buf)
				abort();
			/* chat and Responses bodies go to chat, the others to
			 * completions */
			bool chat = strstr(bodies[i], "messages") || strstr(bodies[i], "\"input\"");
			buf[0] = (uint8_t)((sels[k] & ~8u) | (chat ? 8u : 0u));
			memcpy(buf + 1, bodies[i], n);
			snprintf(name, sizeof name, "body%02zu-%02x", i, buf[0]);
			emit(name, buf, n + 1, ctx);
			free(buf);
		}
}

void harness_template_seeds(harness_seed_fn emit, void *ctx)
{
	static char names[32][256];
	size_t n = harness_template_files(names, 32);
	for (size_t i = 0; i < n; i++) {
		size_t tlen, clen;
		char *tpl = check_read_file(names[i], &tlen), cases_path[300];
		snprintf(cases_path, sizeof cases_path, "%.*s.cases.json",
			 (int)(strlen(names[i]) - 6), names[i]);
		char *cases = check_read_file(cases_path, &clen);
		cJSON *cj = cases ? cJSON_ParseWithLength(cases, clen) : NULL;
		const cJSON *c, *arr = cJSON_GetObjectItemCaseSensitive(cj, "cases");
		int k = 0;
		cJSON_ArrayForEach(c, arr) {
			char *ctxs = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(c, "context"));
			if (!ctxs || !tpl)
				break;
			size_t cl = strlen(ctxs);
			uint8_t *buf = malloc(tlen + 1 + cl);
			if (!buf)
				abort();
			memcpy(buf, tpl, tlen);
			buf[tlen] = 0;
			memcpy(buf + tlen + 1, ctxs, cl);
			const char *base = strrchr(names[i], '/');
			char name[128];
			snprintf(name, sizeof name, "%.60s-%d", base ? base + 1 : names[i], k++);
			emit(name, buf, tlen + 1 + cl, ctx);
			free(buf);
			cJSON_free(ctxs);
		}
		cJSON_Delete(cj);
		free(cases);
		free(tpl);
	}
}

#define AUTH "Authorization: Bearer k\r\n"
static const char *const http_reqs[] = {
	"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET /v1/models HTTP/1.1\r\nHost: x\r\n" AUTH "\r\n",
	"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n\r\n",
	"HEAD /health HTTP/1.0\r\n\r\n",
	"DELETE /v1/models HTTP/1.1\r\nHost: x\r\n" AUTH "\r\n",
	"GET /nothing?x=1 HTTP/1.1\r\nHost: x\r\n" AUTH "\r\n",
	"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" AUTH "Content-Type: application/json\r\n"
	"Content-Length: 60\r\n\r\n{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"n\":1}  ",
	"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" AUTH "Content-Length: 17\r\n\r\n"
	"{\"prompt\":\"hi\"}\r\n",
	"POST /tokenize HTTP/1.1\r\nHost: x\r\n" AUTH "Transfer-Encoding: chunked\r\n\r\n"
	"a\r\n{\"prompt\":\r\n8\r\n\"a <s>\"}\r\n0\r\n\r\n",
	"POST /detokenize HTTP/1.1\r\nHost: x\r\n" AUTH "Content-Length: 22\r\n\r\n"
	"{\"tokens\":[1,2,3,-1]}\n",
	"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" AUTH "Content-Length: 99999999999\r\n\r\nab",
	"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" AUTH "Content-Length: 100000\r\n"
	"Expect: 100-continue\r\n\r\n",
	"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" AUTH "Content-Length: 5\r\n\r\n{\"prompt\":1}",
	"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n" AUTH
	"\r\nPOST /detokenize HTTP/1.1\r\nHost: x\r\n" AUTH "Content-Length: 15\r\n\r\n"
	"{\"tokens\":[5]}\r\n",
	"GET /metrics HTTP/1.1\r\nHost: x\r\n" AUTH "Connection: close\r\n\r\n",
	"PO\x00ST /\xff HTTP/9.9\r\n\r\n",
};

void harness_http_seeds(harness_seed_fn emit, void *ctx)
{
	char name[32];
	for (size_t i = 0; i < sizeof http_reqs / sizeof *http_reqs; i++) {
		snprintf(name, sizeof name, "http%02zu", i);
		size_t n = i + 1 == sizeof http_reqs / sizeof *http_reqs ? 21 : strlen(http_reqs[i]);
		emit(name, (const uint8_t *)http_reqs[i], n, ctx);
	}
}
