/* gguf.c — GGUF v2/v3 parser and validator (see gguf.h).
 *
 * Design: the whole file is mapped read-only and parsed once by a bounds-
 * checked cursor. Every length read from the file is compared with the
 * bytes that remain before anything is allocated or dereferenced, and every
 * size computation is overflow-checked, so a hostile file can only produce
 * an error message, never an out-of-bounds access or an outsized
 * allocation. Keys and tensor names are checked for duplicates by sorting
 * (O(n log n): a file may claim millions of entries).
 *
 * Layout (all little-endian):
 *   "GGUF" u32 version  u64 n_tensors  u64 n_kv
 *   n_kv  x { str key, u32 vtype, value }
 *   n_tensors x { str name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset }
 *   padding to general.alignment, then the tensor data section.
 *   str = u64 len + bytes; array value = u32 elem_type, u64 n, elements. */
#include "gguf.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mem.h"
#include "quant.h"

#define GGUF_MAX_ARRAY_DEPTH 8
#define GGUF_MAX_KEY_LEN 65535
#define GGUF_MAX_ALIGNMENT (1u << 20)

struct cursor {
	const uint8_t *base;
	uint64_t size;
	uint64_t pos;
	ing_err *err;
	const char *what; /* field being read, for messages */
};

static const uint8_t vtype_size[GGUF_VT_COUNT] = {
	[GGUF_VT_UINT8] = 1, [GGUF_VT_INT8] = 1, [GGUF_VT_UINT16] = 2,
	[GGUF_VT_INT16] = 2, [GGUF_VT_UINT32] = 4, [GGUF_VT_INT32] = 4,
	[GGUF_VT_FLOAT32] = 4, [GGUF_VT_BOOL] = 1, [GGUF_VT_UINT64] = 8,
	[GGUF_VT_INT64] = 8, [GGUF_VT_FLOAT64] = 8,
};

static const char *const vtype_names[GGUF_VT_COUNT] = {
	"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
	"bool", "string", "array", "uint64", "int64", "float64",
};

const char *gguf_vtype_name(uint32_t t)
{
	return t < GGUF_VT_COUNT ? vtype_names[t] : "unknown";
}

/* ---- cursor ---- */

static uint64_t cur_left(const struct cursor *c) { return c->size - c->pos; }

static int cur_fail(struct cursor *c, const char *why)
{
	return ing_err_set(c->err, ING_ERR_FORMAT, "offset %llu: %s: %s",
			   (unsigned long long)c->pos, c->what, why);
}

static int cur_need(struct cursor *c, uint64_t n)
{
	if (n > cur_left(c))
		return cur_fail(c, "truncated (file ends inside this field)");
	return ING_OK;
}

static uint64_t le_read(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static int cur_u32(struct cursor *c, uint32_t *out)
{
	if (cur_need(c, 4))
		return ING_ERR_FORMAT;
	*out = (uint32_t)le_read(c->base + c->pos, 4);
	c->pos += 4;
	return ING_OK;
}

static int cur_u64(struct cursor *c, uint64_t *out)
{
	if (cur_need(c, 8))
		return ING_ERR_FORMAT;
	*out = le_read(c->base + c->pos, 8);
	c->pos += 8;
	return ING_OK;
}

static int cur_str(struct cursor *c, struct gguf_str *s)
{
	uint64_t len;
	if (cur_u64(c, &len))
		return ING_ERR_FORMAT;
	if (len > cur_left(c)) {
		c->pos -= 8;
		return cur_fail(c, "string length exceeds the bytes left in the file");
	}
	s->ptr = (const char *)c->base + c->pos;
	s->len = len;
	c->pos += len;
	return ING_OK;
}

/* ---- values ---- */

static int parse_value(struct cursor *c, uint32_t type, struct gguf_value *v, int depth);

/* Skips/validates n elements of an array starting at the cursor. */
static int parse_array(struct cursor *c, struct gguf_arr *a, int depth)
{
	uint32_t et;
	if (depth >= GGUF_MAX_ARRAY_DEPTH)
		return cur_fail(c, "arrays nested too deeply");
	if (cur_u32(c, &et) || cur_u64(c, &a->n))
		return ING_ERR_FORMAT;
	if (et >= GGUF_VT_COUNT) {
		c->pos -= 12;
		return cur_fail(c, "unknown array element type");
	}
	a->elem_type = (enum gguf_vtype)et;
	a->data = c->base + c->pos;
	uint64_t start = c->pos;
	if (vtype_size[et]) {
		if (a->n > cur_left(c) / vtype_size[et])
			return cur_fail(c, "array length exceeds the bytes left in the file");
		/* bools are checked like scalar ones, so iterating never stops
		 * short of n */
		for (uint64_t i = 0; et == GGUF_VT_BOOL && i < a->n; i++) {
			if (c->base[c->pos + i] > 1) {
				c->pos += i;
				return cur_fail(c, "bool array element is neither 0 nor 1");
			}
		}
		c->pos += a->n * vtype_size[et];
	} else {
		/* every string or nested array takes at least 8 bytes */
		if (a->n > cur_left(c) / 8)
			return cur_fail(c, "array length exceeds the bytes left in the file");
		for (uint64_t i = 0; i < a->n; i++) {
			struct gguf_value tmp;
			if (parse_value(c, et, &tmp, depth + 1))
				return ING_ERR_FORMAT;
		}
	}
	a->nbytes = c->pos - start;
	return ING_OK;
}

static int parse_value(struct cursor *c, uint32_t type, struct gguf_value *v, int depth)
{
	v->type = (enum gguf_vtype)type;
	if (type == GGUF_VT_STRING)
		return cur_str(c, &v->str);
	if (type == GGUF_VT_ARRAY)
		return parse_array(c, &v->arr, depth);
	if (type >= GGUF_VT_COUNT)
		return cur_fail(c, "unknown value type");
	unsigned n = vtype_size[type];
	if (cur_need(c, n))
		return ING_ERR_FORMAT;
	uint64_t raw = le_read(c->base + c->pos, n);
	c->pos += n;
	switch (type) {
	case GGUF_VT_INT8: v->i64 = (int8_t)raw; break;
	case GGUF_VT_INT16: v->i64 = (int16_t)raw; break;
	case GGUF_VT_INT32: v->i64 = (int32_t)raw; break;
	case GGUF_VT_INT64: v->i64 = (int64_t)raw; break;
	case GGUF_VT_FLOAT32: {
		uint32_t r32 = (uint32_t)raw;
		float f;
		memcpy(&f, &r32, 4);
		v->f64 = f;
		break;
	}
	case GGUF_VT_FLOAT64: memcpy(&v->f64, &raw, 8); break;
	case GGUF_VT_BOOL:
		if (raw > 1) {
			c->pos -= 1;
			return cur_fail(c, "bool value is neither 0 nor 1");
		}
		v->u64 = raw;
		break;
	default: v->u64 = raw; break;
	}
	return ING_OK;
}

/* ---- duplicate detection ---- */

static int str_cmp(struct gguf_str a, struct gguf_str b)
{
	uint64_t n = a.len < b.len ? a.len : b.len;
	int r = memcmp(a.ptr, b.ptr, n);
	if (r)
		return r;
	return (a.len > b.len) - (a.len < b.len);
}

static int strp_cmp(const void *a, const void *b)
{
	return str_cmp(**(const struct gguf_str *const *)a, **(const struct gguf_str *const *)b);
}

/* Returns the index (into the sorted pointer order) of a duplicate, or -1.
 * strs[i] are pointers to the n names; *dup receives the duplicated name. */
static int find_duplicate(const struct gguf_str **strs, uint64_t n, struct gguf_str *dup)
{
	qsort(strs, n, sizeof *strs, strp_cmp);
	for (uint64_t i = 1; i < n; i++) {
		if (str_cmp(*strs[i - 1], *strs[i]) == 0) {
			*dup = *strs[i];
			return 1;
		}
	}
	return 0;
}

static int check_duplicates(struct gguf *g, ing_err *err)
{
	uint64_t n = g->n_kv > g->n_tensors ? g->n_kv : g->n_tensors;
	if (n < 2)
		return ING_OK;
	const struct gguf_str **strs = ing_malloc_array(n, sizeof *strs);
	if (!strs)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory checking names");
	struct gguf_str dup;
	int rc = ING_OK;
	for (uint64_t i = 0; i < g->n_kv; i++)
		strs[i] = &g->kv[i].key;
	/* a name's bytes follow its u64 length: that is the offset to report */
	if (find_duplicate(strs, g->n_kv, &dup))
		rc = ing_err_set(err, ING_ERR_FORMAT, "offset %llu: duplicate metadata key '%.*s'",
				 (unsigned long long)((const uint8_t *)dup.ptr - g->map - 8),
				 (int)(dup.len > 200 ? 200 : dup.len), dup.ptr);
	for (uint64_t i = 0; rc == ING_OK && i < g->n_tensors; i++)
		strs[i] = &g->tensors[i].name;
	if (rc == ING_OK && find_duplicate(strs, g->n_tensors, &dup))
		rc = ing_err_set(err, ING_ERR_FORMAT, "offset %llu: duplicate tensor name '%.*s'",
				 (unsigned long long)((const uint8_t *)dup.ptr - g->map - 8),
				 (int)(dup.len > 200 ? 200 : dup.len), dup.ptr);
	ing_free(strs);
	return rc;
}

/* ---- header, metadata, tensor index ---- */

static int parse_header(struct cursor *c, struct gguf *g)
{
	c->what = "header";
	if (cur_need(c, 4))
		return ING_ERR_FORMAT;
	if (memcmp(c->base, "GGUF", 4) != 0)
		return cur_fail(c, "bad magic (not a GGUF file)");
	c->pos = 4;
	c->what = "version";
	if (cur_u32(c, &g->version))
		return ING_ERR_FORMAT;
	if (g->version == 1) {
		c->pos -= 4;
		return cur_fail(c, "GGUF version 1 is not supported (re-convert the model)");
	}
	if (g->version != 2 && g->version != 3) {
		c->pos -= 4;
		uint32_t swapped = __builtin_bswap32(g->version);
		if (swapped >= 1 && swapped <= 3)
			return cur_fail(c, "big-endian GGUF files are not supported");
		return cur_fail(c, "unsupported GGUF version");
	}
	c->what = "tensor count";
	if (cur_u64(c, &g->n_tensors))
		return ING_ERR_FORMAT;
	c->what = "metadata count";
	if (cur_u64(c, &g->n_kv))
		return ING_ERR_FORMAT;
	/* each kv needs >= 8 (key len) + 1 (key) + 4 (type) + 1 bytes, each
	 * tensor info >= 8 + 1 + 4 + 8 + 4 + 8 bytes */
	c->what = "metadata count";
	if (g->n_kv > cur_left(c) / 14)
		return cur_fail(c, "more metadata entries than the file could hold");
	c->what = "tensor count";
	if (g->n_tensors > cur_left(c) / 33)
		return cur_fail(c, "more tensors than the file could hold");
	return ING_OK;
}

static int parse_kv(struct cursor *c, struct gguf *g)
{
	char what[96];
	g->kv = ing_calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
	if (!g->kv)
		return ing_err_set(c->err, ING_ERR_NOMEM, "out of memory for %llu metadata entries",
				   (unsigned long long)g->n_kv);
	for (uint64_t i = 0; i < g->n_kv; i++) {
		struct gguf_kv *kv = &g->kv[i];
		kv->offset = c->pos;
		snprintf(what, sizeof what, "metadata entry %llu key", (unsigned long long)i);
		c->what = what;
		if (cur_str(c, &kv->key))
			return ING_ERR_FORMAT;
		if (kv->key.len == 0 || kv->key.len > GGUF_MAX_KEY_LEN) {
			c->pos = kv->offset;
			return cur_fail(c, "key length is 0 or over 65535");
		}
		snprintf(what, sizeof what, "metadata '%.*s'",
			 (int)(kv->key.len > 60 ? 60 : kv->key.len), kv->key.ptr);
		uint32_t type;
		if (cur_u32(c, &type))
			return ING_ERR_FORMAT;
		if (type >= GGUF_VT_COUNT) {
			c->pos -= 4;
			return cur_fail(c, "unknown value type");
		}
		if (parse_value(c, type, &kv->val, 0))
			return ING_ERR_FORMAT;
	}
	return ING_OK;
}

static int parse_alignment(struct cursor *c, struct gguf *g)
{
	g->alignment = GGUF_DEFAULT_ALIGNMENT;
	const struct gguf_kv *kv = gguf_kv_find(g, "general.alignment");
	if (!kv)
		return ING_OK;
	uint64_t a = kv->val.u64;
	if (kv->val.type != GGUF_VT_UINT32)
		return ing_err_set(c->err, ING_ERR_FORMAT,
				   "offset %llu: general.alignment must be uint32, got %s",
				   (unsigned long long)kv->offset, gguf_vtype_name(kv->val.type));
	if (a == 0 || (a & (a - 1)) != 0 || a > GGUF_MAX_ALIGNMENT)
		return ing_err_set(c->err, ING_ERR_FORMAT,
				   "offset %llu: general.alignment %llu is not a power of two in 1..%u",
				   (unsigned long long)kv->offset, (unsigned long long)a,
				   GGUF_MAX_ALIGNMENT);
	g->alignment = a;
	return ING_OK;
}

static int tensor_fail(struct cursor *c, uint64_t i, const struct gguf_tensor *t, const char *why)
{
	return ing_err_set(c->err, ING_ERR_FORMAT, "offset %llu: tensor %llu '%.*s': %s",
			   (unsigned long long)c->pos, (unsigned long long)i,
			   (int)(t->name.len > 80 ? 80 : t->name.len), t->name.ptr, why);
}

/* Reads and checks one tensor info: dims, type, row alignment to blocks, byte
 * size without overflow, offset alignment. Placement is checked later. */
static int parse_tensor_info(struct cursor *c, struct gguf *g, uint64_t i)
{
	struct gguf_tensor *t = &g->tensors[i];
	char what[64];
	snprintf(what, sizeof what, "tensor %llu name", (unsigned long long)i);
	c->what = what;
	if (cur_str(c, &t->name))
		return ING_ERR_FORMAT;
	if (t->name.len == 0)
		return tensor_fail(c, i, t, "empty name");
	snprintf(what, sizeof what, "tensor %llu", (unsigned long long)i);
	if (cur_u32(c, &t->n_dims))
		return ING_ERR_FORMAT;
	if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
		return tensor_fail(c, i, t, "n_dims must be 1..4");
	uint64_t nelems = 1;
	for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
		t->ne[d] = 1;
		if (d >= t->n_dims)
			continue;
		if (cur_u64(c, &t->ne[d]))
			return ING_ERR_FORMAT;
		if (t->ne[d] == 0 || t->ne[d] > (uint64_t)INT64_MAX)
			return tensor_fail(c, i, t, "a dimension is 0 or over INT64_MAX");
		if (nelems > (uint64_t)INT64_MAX / t->ne[d])
			return tensor_fail(c, i, t, "element count overflows");
		nelems *= t->ne[d];
	}
	t->nelems = nelems;
	if (cur_u32(c, &t->type))
		return ING_ERR_FORMAT;
	const struct qtype_traits *tr = qtype_traits(t->type);
	if (!tr)
		return tensor_fail(c, i, t, "unknown or unsupported tensor type");
	uint64_t row;
	if (t->ne[0] % tr->block_elems != 0)
		return tensor_fail(c, i, t, "row length is not a multiple of the type's block size");
	if (qtype_row_bytes(t->type, t->ne[0], &row) != 0)
		return tensor_fail(c, i, t, "row byte size overflows");
	uint64_t rows = nelems / t->ne[0];
	if (row && rows > UINT64_MAX / row)
		return tensor_fail(c, i, t, "byte size overflows");
	t->nbytes = row * rows;
	if (cur_u64(c, &t->offset))
		return ING_ERR_FORMAT;
	if (t->offset % g->alignment != 0)
		return tensor_fail(c, i, t, "data offset is not a multiple of general.alignment");
	return ING_OK;
}

static int offset_cmp(const void *a, const void *b)
{
	const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a;
	const struct gguf_tensor *y = *(const struct gguf_tensor *const *)b;
	return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Every tensor's bytes inside the file, none overlapping another. */
static int check_placement(struct gguf *g, ing_err *err)
{
	uint64_t avail = g->size - g->data_offset;
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		struct gguf_tensor *t = &g->tensors[i];
		if (t->offset > avail || t->nbytes > avail - t->offset)
			return ing_err_set(err, ING_ERR_FORMAT,
					   "offset %llu: tensor %llu '%.*s': data [%llu, +%llu) lies past "
					   "the end of the file (data section is %llu bytes)",
					   (unsigned long long)g->data_offset, (unsigned long long)i,
					   (int)(t->name.len > 80 ? 80 : t->name.len),
					   t->name.ptr, (unsigned long long)t->offset,
					   (unsigned long long)t->nbytes, (unsigned long long)avail);
		t->data = g->map + g->data_offset + t->offset;
	}
	if (g->n_tensors < 2)
		return ING_OK;
	const struct gguf_tensor **by_off = ing_malloc_array(g->n_tensors, sizeof *by_off);
	if (!by_off)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory checking tensor placement");
	for (uint64_t i = 0; i < g->n_tensors; i++)
		by_off[i] = &g->tensors[i];
	qsort(by_off, g->n_tensors, sizeof *by_off, offset_cmp);
	int rc = ING_OK;
	for (uint64_t i = 1; i < g->n_tensors && rc == ING_OK; i++) {
		const struct gguf_tensor *p = by_off[i - 1], *t = by_off[i];
		if (t->offset < p->offset + p->nbytes)
			rc = ing_err_set(err, ING_ERR_FORMAT,
					 "offset %llu: tensors '%.*s' and '%.*s' overlap",
					 (unsigned long long)(g->data_offset + t->offset),
					 (int)(p->name.len > 80 ? 80 : p->name.len), p->name.ptr,
					 (int)(t->name.len > 80 ? 80 : t->name.len), t->name.ptr);
	}
	ing_free(by_off);
	return rc;
}

static int parse_all(struct gguf *g, ing_err *err)
{
	struct cursor c = { .base = g->map, .size = g->size, .err = err, .what = "header" };
	if (parse_header(&c, g) || parse_kv(&c, g) || parse_alignment(&c, g))
		return err->code;
	g->tensors = ing_calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
	if (!g->tensors)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory for %llu tensors",
				   (unsigned long long)g->n_tensors);
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if (parse_tensor_info(&c, g, i))
			return err->code;
	uint64_t pad = (g->alignment - c.pos % g->alignment) % g->alignment;
	g->data_offset = c.pos + pad;
	if (g->data_offset > g->size) {
		if (g->n_tensors == 0) {
			g->data_offset = g->size; /* metadata-only files may omit padding */
		} else {
			c.what = "data section";
			return cur_fail(&c, "file ends before the tensor data section");
		}
	}
	if (check_duplicates(g, err) || check_placement(g, err))
		return err->code;
	return ING_OK;
}

/* ---- open/close ---- */

static int open_common(struct gguf *g, struct gguf **out, ing_err *err)
{
	ing_err_clear(err);
	int rc = parse_all(g, err);
	if (rc) {
		gguf_close(g);
		*out = NULL;
		return rc;
	}
	*out = g;
	return ING_OK;
}

int gguf_open_memory(const void *buf, size_t size, struct gguf **out, ing_err *err)
{
	ing_err scratch; /* err may be NULL; parsing needs somewhere to write */
	if (!err)
		err = &scratch;
	*out = NULL;
	struct gguf *g = ing_calloc(1, sizeof *g);
	if (!g)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	g->map = buf;
	g->size = size;
	return open_common(g, out, err);
}

int gguf_open(const char *path, struct gguf **out, ing_err *err)
{
	ing_err scratch;
	if (!err)
		err = &scratch;
	*out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ing_err_set(err, ING_ERR_IO, "%s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return ing_err_set(err, ING_ERR_IO, "%s: %s", path, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return ing_err_set(err, ING_ERR_IO, "%s: not a regular file", path);
	}
	if (st.st_size == 0) {
		close(fd);
		return ing_err_set(err, ING_ERR_FORMAT, "%s: empty file", path);
	}
	void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	int e = errno;
	close(fd);
	if (map == MAP_FAILED)
		return ing_err_set(err, ING_ERR_IO, "%s: mmap: %s", path, strerror(e));
	struct gguf *g = ing_calloc(1, sizeof *g);
	if (!g) {
		munmap(map, (size_t)st.st_size);
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	}
	g->map = map;
	g->size = (uint64_t)st.st_size;
	g->mapped = 1;
	int rc = open_common(g, out, err);
	if (rc) {
		char tmp[ING_ERR_MSG_MAX];
		snprintf(tmp, sizeof tmp, "%s", err->msg);
		ing_err_set(err, rc, "%s: %s", path, tmp);
	}
	return rc;
}

void gguf_close(struct gguf *g)
{
	if (!g)
		return;
	if (g->mapped && g->map)
		munmap((void *)g->map, g->size);
	ing_free(g->kv);
	ing_free(g->tensors);
	ing_free(g);
}

/* ---- lookups and getters ---- */

bool gguf_str_eq(struct gguf_str s, const char *c)
{
	size_t n = strlen(c);
	return s.len == n && memcmp(s.ptr, c, n) == 0;
}

const struct gguf_kv *gguf_kv_find(const struct gguf *g, const char *key)
{
	for (uint64_t i = 0; i < g->n_kv; i++)
		if (gguf_str_eq(g->kv[i].key, key))
			return &g->kv[i];
	return NULL;
}

const struct gguf_tensor *gguf_tensor_find(const struct gguf *g, const char *name)
{
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if (gguf_str_eq(g->tensors[i].name, name))
			return &g->tensors[i];
	return NULL;
}

static bool vt_unsigned(uint32_t t)
{
	return t == GGUF_VT_UINT8 || t == GGUF_VT_UINT16 || t == GGUF_VT_UINT32 ||
	       t == GGUF_VT_UINT64 || t == GGUF_VT_BOOL;
}

static bool vt_signed(uint32_t t)
{
	return t == GGUF_VT_INT8 || t == GGUF_VT_INT16 || t == GGUF_VT_INT32 || t == GGUF_VT_INT64;
}

static const struct gguf_kv *find_typed(const struct gguf *g, const char *key, int *rc)
{
	const struct gguf_kv *kv = gguf_kv_find(g, key);
	*rc = kv ? ING_OK : ING_ERR_NOTFOUND;
	return kv;
}

int gguf_get_u64(const struct gguf *g, const char *key, uint64_t *out)
{
	int rc;
	const struct gguf_kv *kv = find_typed(g, key, &rc);
	if (!kv)
		return rc;
	if (vt_unsigned(kv->val.type)) {
		*out = kv->val.u64;
		return ING_OK;
	}
	if (vt_signed(kv->val.type) && kv->val.i64 >= 0) {
		*out = (uint64_t)kv->val.i64;
		return ING_OK;
	}
	return ING_ERR_FORMAT;
}

int gguf_get_i64(const struct gguf *g, const char *key, int64_t *out)
{
	int rc;
	const struct gguf_kv *kv = find_typed(g, key, &rc);
	if (!kv)
		return rc;
	if (vt_signed(kv->val.type)) {
		*out = kv->val.i64;
		return ING_OK;
	}
	if (vt_unsigned(kv->val.type) && kv->val.u64 <= (uint64_t)INT64_MAX) {
		*out = (int64_t)kv->val.u64;
		return ING_OK;
	}
	return ING_ERR_FORMAT;
}

int gguf_get_f64(const struct gguf *g, const char *key, double *out)
{
	int rc;
	const struct gguf_kv *kv = find_typed(g, key, &rc);
	if (!kv)
		return rc;
	if (kv->val.type == GGUF_VT_FLOAT32 || kv->val.type == GGUF_VT_FLOAT64) {
		*out = kv->val.f64;
		return ING_OK;
	}
	return ING_ERR_FORMAT;
}

int gguf_get_bool(const struct gguf *g, const char *key, bool *out)
{
	int rc;
	const struct gguf_kv *kv = find_typed(g, key, &rc);
	if (!kv)
		return rc;
	if (kv->val.type != GGUF_VT_BOOL)
		return ING_ERR_FORMAT;
	*out = kv->val.u64 != 0;
	return ING_OK;
}

int gguf_get_str(const struct gguf *g, const char *key, struct gguf_str *out)
{
	int rc;
	const struct gguf_kv *kv = find_typed(g, key, &rc);
	if (!kv)
		return rc;
	if (kv->val.type != GGUF_VT_STRING)
		return ING_ERR_FORMAT;
	*out = kv->val.str;
	return ING_OK;
}

int gguf_get_arr(const struct gguf *g, const char *key, struct gguf_arr *out)
{
	int rc;
	const struct gguf_kv *kv = find_typed(g, key, &rc);
	if (!kv)
		return rc;
	if (kv->val.type != GGUF_VT_ARRAY)
		return ING_ERR_FORMAT;
	*out = kv->val.arr;
	return ING_OK;
}

/* ---- arrays ---- */

static uint64_t arr_raw(const struct gguf_arr *a, uint64_t i)
{
	unsigned sz = vtype_size[a->elem_type];
	return le_read(a->data + i * sz, sz);
}

/* Float to integer, saturating, NaN to 0: casting an out-of-range double is
 * undefined behaviour, and these values come from the file. */
static uint64_t f64_to_u64(double d)
{
	if (!(d > 0))
		return 0;
	return d >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)d;
}

static int64_t f64_to_i64(double d)
{
	if (d != d)
		return 0;
	if (d >= 9223372036854775808.0)
		return INT64_MAX;
	return d < -9223372036854775808.0 ? INT64_MIN : (int64_t)d;
}

uint64_t gguf_arr_u64(const struct gguf_arr *a, uint64_t i)
{
	if (vt_signed(a->elem_type))
		return (uint64_t)gguf_arr_i64(a, i);
	if (a->elem_type == GGUF_VT_FLOAT32 || a->elem_type == GGUF_VT_FLOAT64)
		return f64_to_u64(gguf_arr_f64(a, i));
	return arr_raw(a, i);
}

int64_t gguf_arr_i64(const struct gguf_arr *a, uint64_t i)
{
	uint64_t r = arr_raw(a, i);
	switch (a->elem_type) {
	case GGUF_VT_INT8: return (int8_t)r;
	case GGUF_VT_INT16: return (int16_t)r;
	case GGUF_VT_INT32: return (int32_t)r;
	case GGUF_VT_INT64: return (int64_t)r;
	case GGUF_VT_FLOAT32:
	case GGUF_VT_FLOAT64: return f64_to_i64(gguf_arr_f64(a, i));
	default: return (int64_t)r;
	}
}

double gguf_arr_f64(const struct gguf_arr *a, uint64_t i)
{
	uint64_t r = arr_raw(a, i);
	if (a->elem_type == GGUF_VT_FLOAT32) {
		uint32_t r32 = (uint32_t)r;
		float f;
		memcpy(&f, &r32, 4);
		return f;
	}
	if (a->elem_type == GGUF_VT_FLOAT64) {
		double d;
		memcpy(&d, &r, 8);
		return d;
	}
	return vt_signed(a->elem_type) ? (double)gguf_arr_i64(a, i) : (double)r;
}

void gguf_arr_iter_init(struct gguf_arr_iter *it, const struct gguf_arr *a)
{
	it->arr = a;
	it->index = 0;
	it->p = a->data;
}

bool gguf_arr_iter_next(struct gguf_arr_iter *it, struct gguf_value *v)
{
	const struct gguf_arr *a = it->arr;
	if (it->index >= a->n)
		return false;
	/* The array was validated at open, so re-parsing cannot fail; a
	 * cursor over exactly the array's bytes keeps that true by
	 * construction. */
	struct cursor c = { .base = a->data, .size = a->nbytes,
			    .pos = (uint64_t)(it->p - a->data), .what = "array" };
	if (parse_value(&c, a->elem_type, v, 1) != ING_OK)
		return false;
	it->p = a->data + c.pos;
	it->index++;
	return true;
}
