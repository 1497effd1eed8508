/* dequant.c — dumps a GGUF tensor as float32, dequantized by the scalar
 * reference (quant_dequantize_ref), for comparison with other readers.
 *
 *   dequant MODEL.gguf TENSOR_NAME   raw little-endian float32 on stdout,
 *                                    ne[0] fastest, nelems values in all
 *   dequant MODEL.gguf --list        one "name type" line per tensor
 *
 * Works in chunks of whole blocks so a 670 MB tensor never sits in memory
 * as floats at once. Exit status 0 on success, 1 on any error (message on
 * stderr). Assumes a little-endian host, as the rest of ingot does. */
#include <stdio.h>
#include <string.h>

#include "gguf.h"
#include "mem.h"
#include "quant.h"

#define CHUNK_ELEMS (1 << 20) /* floats per write, a multiple of every block */

static const char *type_name(uint32_t t)
{
	static char buf[32];
	const struct qtype_traits *tr = qtype_traits(t);
	if (tr)
		return tr->name;
	snprintf(buf, sizeof buf, "type%u", t);
	return buf;
}

static void tensors_list(const struct gguf *g)
{
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct gguf_tensor *t = &g->tensors[i];
		printf("%.*s %s\n", (int)t->name.len, t->name.ptr, type_name(t->type));
	}
}

/* Writes the tensor's values to out; returns 0 or -1 (message printed). */
static int tensor_dump(const struct gguf_tensor *t, FILE *out)
{
	const struct qtype_traits *tr = qtype_traits(t->type);
	if (!tr || t->nelems % tr->block_elems) {
		fprintf(stderr, "dequant: tensor type %s not supported\n", type_name(t->type));
		return -1;
	}
	float *buf = ing_malloc(CHUNK_ELEMS * sizeof *buf);
	if (!buf) {
		fprintf(stderr, "dequant: out of memory\n");
		return -1;
	}
	const uint8_t *src = t->data;
	int rc = 0;
	for (uint64_t done = 0; done < t->nelems && rc == 0;) {
		uint64_t n = t->nelems - done < CHUNK_ELEMS ? t->nelems - done : CHUNK_ELEMS;
		quant_dequantize_ref((enum qtype)t->type, src + done / tr->block_elems * tr->block_bytes,
				     buf, (int64_t)n);
		if (fwrite(buf, sizeof *buf, n, out) != n) {
			perror("dequant: write");
			rc = -1;
		}
		done += n;
	}
	ing_free(buf);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s MODEL.gguf TENSOR_NAME | --list\n", argv[0]);
		return 2;
	}
	struct gguf *g = NULL;
	ing_err err;
	ing_err_clear(&err);
	if (gguf_open(argv[1], &g, &err) != ING_OK) {
		fprintf(stderr, "dequant: %s: %s\n", argv[1], err.msg);
		return 1;
	}
	int rc = 0;
	if (strcmp(argv[2], "--list") == 0) {
		tensors_list(g);
	} else {
		const struct gguf_tensor *t = gguf_tensor_find(g, argv[2]);
		if (!t) {
			fprintf(stderr, "dequant: no tensor '%s' in %s\n", argv[2], argv[1]);
			rc = -1;
		} else {
			rc = tensor_dump(t, stdout);
		}
	}
	if (fflush(stdout) != 0)
		rc = -1;
	gguf_close(g);
	return rc == 0 ? 0 : 1;
}
