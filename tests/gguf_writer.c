/* gguf_writer.c — in-memory GGUF writer for tests (see gguf_writer.h).
 *
 * The metadata section is serialized as entries are added (it is a plain
 * byte stream that starts right after the 24-byte header, so file offsets
 * are known at once); tensors are kept as a list and laid out by finish(),
 * because the data section's position depends on everything before it. */
#include "gguf_writer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q) {
		fprintf(stderr, "gguf_writer: out of memory (%zu bytes)\n", n);
		abort();
	}
	return q;
}

/* ---- byte buffer ---- */

static void wbuf_reserve(struct gguf_wbuf *b, size_t extra)
{
	if (extra <= b->cap - b->len)
		return;
	size_t cap = b->cap ? b->cap : 256;
	while (cap - b->len < extra)
		cap *= 2;
	b->p = xrealloc(b->p, cap);
	b->cap = cap;
}

static void wbuf_put(struct gguf_wbuf *b, const void *p, size_t n)
{
	wbuf_reserve(b, n);
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void wbuf_zeros(struct gguf_wbuf *b, size_t n)
{
	wbuf_reserve(b, n);
	memset(b->p + b->len, 0, n);
	b->len += n;
}

static void wbuf_le(struct gguf_wbuf *b, uint64_t v, unsigned n)
{
	uint8_t tmp[8];
	for (unsigned i = 0; i < n; i++)
		tmp[i] = (uint8_t)(v >> (8 * i));
	wbuf_put(b, tmp, n);
}

void gguf_patch_le(uint8_t *buf, size_t off, uint64_t v, unsigned nbytes)
{
	for (unsigned i = 0; i < nbytes && i < 8; i++)
		buf[off + i] = (uint8_t)(v >> (8 * i));
}

/* ---- lifecycle ---- */

void gguf_writer_init(struct gguf_writer *w, uint32_t version)
{
	memset(w, 0, sizeof *w);
	w->version = version;
	w->alignment = GGUF_DEFAULT_ALIGNMENT;
}

void gguf_writer_free(struct gguf_writer *w)
{
	free(w->kv.p);
	free(w->kvs);
	for (size_t i = 0; i < w->n_tensors; i++) {
		free(w->tensors[i].name);
		free(w->tensors[i].data);
	}
	free(w->tensors);
	uint32_t version = w->version;
	gguf_writer_init(w, version);
}

/* ---- metadata, low level ---- */

/* Keeps the open entry's end offset current after every put. */
static void kv_touch(struct gguf_writer *w)
{
	if (w->n_kv)
		w->kvs[w->n_kv - 1].end = GGUF_HEADER_BYTES + w->kv.len;
}

void gguf_writer_kv_beginn(struct gguf_writer *w, const char *key, size_t len, uint32_t vtype)
{
	if (w->n_kv == w->cap_kv) {
		w->cap_kv = w->cap_kv ? 2 * w->cap_kv : 16;
		w->kvs = xrealloc(w->kvs, w->cap_kv * sizeof *w->kvs);
	}
	struct gguf_kv_pos *p = &w->kvs[w->n_kv++];
	p->key = GGUF_HEADER_BYTES + w->kv.len;
	wbuf_le(&w->kv, len, 8);
	wbuf_put(&w->kv, key, len);
	p->type = GGUF_HEADER_BYTES + w->kv.len;
	wbuf_le(&w->kv, vtype, 4);
	p->value = p->end = GGUF_HEADER_BYTES + w->kv.len;
}

void gguf_writer_kv_begin(struct gguf_writer *w, const char *key, uint32_t vtype)
{
	gguf_writer_kv_beginn(w, key, strlen(key), vtype);
}

void gguf_writer_put_bytes(struct gguf_writer *w, const void *p, size_t n)
{
	wbuf_put(&w->kv, p, n);
	kv_touch(w);
}

static void put_le(struct gguf_writer *w, uint64_t v, unsigned n)
{
	wbuf_le(&w->kv, v, n);
	kv_touch(w);
}

void gguf_writer_put_u8(struct gguf_writer *w, uint8_t v) { put_le(w, v, 1); }
void gguf_writer_put_u16(struct gguf_writer *w, uint16_t v) { put_le(w, v, 2); }
void gguf_writer_put_u32(struct gguf_writer *w, uint32_t v) { put_le(w, v, 4); }
void gguf_writer_put_u64(struct gguf_writer *w, uint64_t v) { put_le(w, v, 8); }

void gguf_writer_put_f32(struct gguf_writer *w, float v)
{
	uint32_t u;
	memcpy(&u, &v, 4);
	put_le(w, u, 4);
}

void gguf_writer_put_f64(struct gguf_writer *w, double v)
{
	uint64_t u;
	memcpy(&u, &v, 8);
	put_le(w, u, 8);
}

void gguf_writer_put_strn(struct gguf_writer *w, const char *s, size_t len)
{
	put_le(w, len, 8);
	gguf_writer_put_bytes(w, s, len);
}

void gguf_writer_put_str(struct gguf_writer *w, const char *s)
{
	gguf_writer_put_strn(w, s, strlen(s));
}

void gguf_writer_put_arr_header(struct gguf_writer *w, uint32_t elem_type, uint64_t n)
{
	put_le(w, elem_type, 4);
	put_le(w, n, 8);
}

/* ---- metadata, typed ---- */

static void kv_le(struct gguf_writer *w, const char *key, uint32_t vtype, uint64_t v, unsigned n)
{
	gguf_writer_kv_begin(w, key, vtype);
	put_le(w, v, n);
}

void gguf_writer_kv_u8(struct gguf_writer *w, const char *k, uint8_t v)
{
	kv_le(w, k, GGUF_VT_UINT8, v, 1);
}

void gguf_writer_kv_i8(struct gguf_writer *w, const char *k, int8_t v)
{
	kv_le(w, k, GGUF_VT_INT8, (uint8_t)v, 1);
}

void gguf_writer_kv_u16(struct gguf_writer *w, const char *k, uint16_t v)
{
	kv_le(w, k, GGUF_VT_UINT16, v, 2);
}

void gguf_writer_kv_i16(struct gguf_writer *w, const char *k, int16_t v)
{
	kv_le(w, k, GGUF_VT_INT16, (uint16_t)v, 2);
}

void gguf_writer_kv_i32(struct gguf_writer *w, const char *k, int32_t v)
{
	kv_le(w, k, GGUF_VT_INT32, (uint32_t)v, 4);
}

void gguf_writer_kv_u64(struct gguf_writer *w, const char *k, uint64_t v)
{
	kv_le(w, k, GGUF_VT_UINT64, v, 8);
}

void gguf_writer_kv_i64(struct gguf_writer *w, const char *k, int64_t v)
{
	kv_le(w, k, GGUF_VT_INT64, (uint64_t)v, 8);
}

void gguf_writer_kv_bool(struct gguf_writer *w, const char *k, bool v)
{
	kv_le(w, k, GGUF_VT_BOOL, v ? 1 : 0, 1);
}

void gguf_writer_kv_u32(struct gguf_writer *w, const char *key, uint32_t v)
{
	kv_le(w, key, GGUF_VT_UINT32, v, 4);
	if (!w->alignment_set && strcmp(key, "general.alignment") == 0) {
		w->alignment_set = true;
		if (v && (v & (v - 1)) == 0 && v <= (1u << 20))
			w->alignment = v;
	}
}

void gguf_writer_kv_f32(struct gguf_writer *w, const char *key, float v)
{
	gguf_writer_kv_begin(w, key, GGUF_VT_FLOAT32);
	gguf_writer_put_f32(w, v);
}

void gguf_writer_kv_f64(struct gguf_writer *w, const char *key, double v)
{
	gguf_writer_kv_begin(w, key, GGUF_VT_FLOAT64);
	gguf_writer_put_f64(w, v);
}

void gguf_writer_kv_strn(struct gguf_writer *w, const char *key, const char *v, size_t len)
{
	gguf_writer_kv_begin(w, key, GGUF_VT_STRING);
	gguf_writer_put_strn(w, v, len);
}

void gguf_writer_kv_str(struct gguf_writer *w, const char *key, const char *v)
{
	gguf_writer_kv_strn(w, key, v, strlen(v));
}

/* Bytes of one element of a fixed-size type; 0 for string/array/unknown. */
static unsigned elem_size(uint32_t t)
{
	switch (t) {
	case GGUF_VT_UINT8: case GGUF_VT_INT8: case GGUF_VT_BOOL: return 1;
	case GGUF_VT_UINT16: case GGUF_VT_INT16: return 2;
	case GGUF_VT_UINT32: case GGUF_VT_INT32: case GGUF_VT_FLOAT32: return 4;
	case GGUF_VT_UINT64: case GGUF_VT_INT64: case GGUF_VT_FLOAT64: return 8;
	default: return 0;
	}
}

void gguf_writer_kv_arr(struct gguf_writer *w, const char *key, enum gguf_vtype elem_type,
			size_t n, const void *data)
{
	unsigned sz = elem_size(elem_type);
	gguf_writer_kv_begin(w, key, GGUF_VT_ARRAY);
	gguf_writer_put_arr_header(w, elem_type, n);
	const uint8_t *p = data;
	for (size_t i = 0; i < n; i++) {
		uint64_t v = 0;
		/* host layout to little-endian: read the element as its own
		 * width (memcpy keeps it alignment-safe) */
		switch (sz) {
		case 1: v = p[i]; break;
		case 2: { uint16_t x; memcpy(&x, p + 2 * i, 2); v = x; break; }
		case 4: { uint32_t x; memcpy(&x, p + 4 * i, 4); v = x; break; }
		case 8: memcpy(&v, p + 8 * i, 8); break;
		}
		put_le(w, v, sz);
	}
}

void gguf_writer_kv_arr_i32(struct gguf_writer *w, const char *key, size_t n, const int32_t *v)
{
	gguf_writer_kv_arr(w, key, GGUF_VT_INT32, n, v);
}

void gguf_writer_kv_arr_u32(struct gguf_writer *w, const char *key, size_t n, const uint32_t *v)
{
	gguf_writer_kv_arr(w, key, GGUF_VT_UINT32, n, v);
}

void gguf_writer_kv_arr_f32(struct gguf_writer *w, const char *key, size_t n, const float *v)
{
	gguf_writer_kv_arr(w, key, GGUF_VT_FLOAT32, n, v);
}

void gguf_writer_kv_arr_str(struct gguf_writer *w, const char *key, size_t n,
			    const char *const *v)
{
	gguf_writer_kv_begin(w, key, GGUF_VT_ARRAY);
	gguf_writer_put_arr_header(w, GGUF_VT_STRING, n);
	for (size_t i = 0; i < n; i++)
		gguf_writer_put_str(w, v[i]);
}

/* ---- tensors ---- */

int gguf_writer_tensor_raw(struct gguf_writer *w, const char *name, size_t name_len,
			   uint32_t type, uint32_t n_dims, const uint64_t *ne,
			   const void *data, size_t nbytes)
{
	if (n_dims > GGUF_WRITER_MAX_DIMS)
		n_dims = GGUF_WRITER_MAX_DIMS;
	if (w->n_tensors == w->cap_tensors) {
		w->cap_tensors = w->cap_tensors ? 2 * w->cap_tensors : 16;
		w->tensors = xrealloc(w->tensors, w->cap_tensors * sizeof *w->tensors);
	}
	struct gguf_wtensor *t = &w->tensors[w->n_tensors];
	memset(t, 0, sizeof *t);
	t->name = xrealloc(NULL, name_len + 1);
	memcpy(t->name, name, name_len);
	t->name[name_len] = '\0';
	t->name_len = name_len;
	t->n_dims = n_dims;
	for (uint32_t d = 0; d < n_dims; d++)
		t->ne[d] = ne[d];
	t->type = type;
	t->nbytes = nbytes;
	t->data = xrealloc(NULL, nbytes);
	if (data)
		memcpy(t->data, data, nbytes);
	else
		memset(t->data, 0, nbytes);
	return (int)w->n_tensors++;
}

/* Byte size of a well-formed tensor, or -1. */
static int tensor_bytes(uint32_t type, uint32_t n_dims, const uint64_t *ne, size_t *nbytes)
{
	if (!qtype_traits(type) || n_dims < 1 || n_dims > GGUF_MAX_DIMS)
		return -1;
	uint64_t rows = 1, row;
	for (uint32_t d = 0; d < n_dims; d++) {
		if (ne[d] == 0)
			return -1;
		if (d > 0)
			rows *= ne[d];
	}
	if (qtype_row_bytes(type, ne[0], &row) != 0)
		return -1;
	*nbytes = (size_t)(row * rows);
	return 0;
}

int gguf_writer_tensor(struct gguf_writer *w, const char *name, uint32_t type,
		       uint32_t n_dims, const uint64_t *ne, const void *data)
{
	size_t nbytes;
	if (tensor_bytes(type, n_dims, ne, &nbytes) != 0)
		return -1;
	return gguf_writer_tensor_raw(w, name, strlen(name), type, n_dims, ne, data, nbytes);
}

int gguf_writer_tensor_f32(struct gguf_writer *w, const char *name, uint32_t type,
			   uint32_t n_dims, const uint64_t *ne, const float *x)
{
	size_t nbytes;
	if (tensor_bytes(type, n_dims, ne, &nbytes) != 0)
		return -1;
	uint64_t row;
	qtype_row_bytes(type, ne[0], &row);
	size_t rows = nbytes / row;
	uint8_t *q = xrealloc(NULL, nbytes);
	for (size_t r = 0; r < rows; r++)
		quant_quantize_ref((enum qtype)type, x + r * ne[0], q + r * row, (int64_t)ne[0]);
	int i = gguf_writer_tensor_raw(w, name, strlen(name), type, n_dims, ne, q, nbytes);
	free(q);
	return i;
}

void gguf_writer_tensor_offset(struct gguf_writer *w, int i, uint64_t offset)
{
	if (i < 0 || (size_t)i >= w->n_tensors)
		return;
	w->tensors[i].offset_set = true;
	w->tensors[i].offset = offset;
}

/* ---- output ---- */

static size_t pad_to(size_t n, uint64_t align)
{
	return (size_t)((align - n % align) % align);
}

void gguf_writer_finish(struct gguf_writer *w, uint8_t **buf, size_t *size)
{
	struct gguf_wbuf b = { 0 };
	wbuf_put(&b, "GGUF", 4);
	wbuf_le(&b, w->version, 4);
	wbuf_le(&b, w->n_tensors, 8);
	wbuf_le(&b, w->n_kv, 8);
	wbuf_put(&b, w->kv.p, w->kv.len);

	/* data offsets first: the infos carry them */
	uint64_t *rel = xrealloc(NULL, (w->n_tensors ? w->n_tensors : 1) * sizeof *rel);
	size_t data_len = 0;
	for (size_t i = 0; i < w->n_tensors; i++) {
		rel[i] = data_len;
		data_len += w->tensors[i].nbytes;
		data_len += pad_to(data_len, w->alignment);
	}
	for (size_t i = 0; i < w->n_tensors; i++) {
		struct gguf_wtensor *t = &w->tensors[i];
		t->pos.name = b.len;
		wbuf_le(&b, t->name_len, 8);
		wbuf_put(&b, t->name, t->name_len);
		t->pos.n_dims = b.len;
		wbuf_le(&b, t->n_dims, 4);
		t->pos.ne = b.len;
		for (uint32_t d = 0; d < t->n_dims; d++)
			wbuf_le(&b, t->ne[d], 8);
		t->pos.type = b.len;
		wbuf_le(&b, t->type, 4);
		t->pos.offset = b.len;
		wbuf_le(&b, t->offset_set ? t->offset : rel[i], 8);
	}
	if (w->n_tensors)
		wbuf_zeros(&b, pad_to(b.len, w->alignment));
	w->data_offset = b.len;
	for (size_t i = 0; i < w->n_tensors; i++) {
		struct gguf_wtensor *t = &w->tensors[i];
		t->pos.data = w->data_offset + rel[i];
		wbuf_put(&b, t->data, t->nbytes);
		wbuf_zeros(&b, pad_to(b.len - w->data_offset, w->alignment));
	}
	free(rel);
	w->size = b.len;
	*buf = b.p ? b.p : xrealloc(NULL, 1);
	*size = b.len;
}

int gguf_writer_save(struct gguf_writer *w, const char *path)
{
	uint8_t *buf;
	size_t size;
	gguf_writer_finish(w, &buf, &size);
	FILE *f = fopen(path, "wb");
	int rc = -1;
	if (f) {
		size_t n = fwrite(buf, 1, size, f);
		int e = errno;
		rc = fclose(f) == 0 && n == size ? 0 : -1;
		if (n != size)
			errno = e;
	}
	free(buf);
	return rc;
}

const struct gguf_kv_pos *gguf_writer_kv_pos(const struct gguf_writer *w, size_t i)
{
	return i < w->n_kv ? &w->kvs[i] : NULL;
}

const struct gguf_tensor_pos *gguf_writer_tensor_pos(const struct gguf_writer *w, size_t i)
{
	return i < w->n_tensors ? &w->tensors[i].pos : NULL;
}
