/* gguf.h — read-only view of a GGUF v2/v3 file.
 *
 * gguf_open() maps the file and validates all of it up front: header,
 * every metadata key/value (nested arrays included), the tensor index and
 * the placement of every tensor's data. After a successful open nothing in
 * the view can point outside the mapping, so accessors need no checks of
 * their own. Strings are *not* NUL-terminated: they are (ptr, len) views
 * into the map, valid until gguf_close().
 *
 * Errors name the byte offset and the field ("offset 1234: tensor 7
 * 'blk.0.attn_q.weight': dimension 2 is 0"). Nothing here aborts. */
#ifndef INGOT_GGUF_H
#define INGOT_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

enum gguf_vtype {
	GGUF_VT_UINT8 = 0,
	GGUF_VT_INT8 = 1,
	GGUF_VT_UINT16 = 2,
	GGUF_VT_INT16 = 3,
	GGUF_VT_UINT32 = 4,
	GGUF_VT_INT32 = 5,
	GGUF_VT_FLOAT32 = 6,
	GGUF_VT_BOOL = 7,
	GGUF_VT_STRING = 8,
	GGUF_VT_ARRAY = 9,
	GGUF_VT_UINT64 = 10,
	GGUF_VT_INT64 = 11,
	GGUF_VT_FLOAT64 = 12,
	GGUF_VT_COUNT,
};

struct gguf_str {
	const char *ptr; /* into the map; not NUL-terminated */
	uint64_t len;
};

/* An array value: n elements of elem_type stored back to back at data.
 * Numeric elements are packed little-endian and may be unaligned: read them
 * with the gguf_arr_* helpers. String and nested-array elements have
 * variable size: walk them with gguf_arr_iter. */
struct gguf_arr {
	enum gguf_vtype elem_type;
	uint64_t n;
	const uint8_t *data;
	uint64_t nbytes; /* bytes spanned by all elements */
};

struct gguf_value {
	enum gguf_vtype type;
	union {
		uint64_t u64;   /* UINT8..UINT64, BOOL (0/1) */
		int64_t i64;    /* INT8..INT64 */
		double f64;     /* FLOAT32, FLOAT64 */
		struct gguf_str str;
		struct gguf_arr arr;
	};
};

struct gguf_kv {
	struct gguf_str key;
	struct gguf_value val;
	uint64_t offset; /* file offset of the key, for messages */
};

struct gguf_tensor {
	struct gguf_str name;
	uint32_t n_dims;
	uint64_t ne[GGUF_MAX_DIMS]; /* ne[0] = row length; unused dims are 1 */
	uint32_t type;              /* enum qtype */
	uint64_t offset;            /* relative to the data section */
	uint64_t nbytes;
	uint64_t nelems;
	const void *data;           /* into the map */
};

struct gguf {
	uint32_t version;
	uint64_t n_kv;
	struct gguf_kv *kv;
	uint64_t n_tensors;
	struct gguf_tensor *tensors;
	uint64_t alignment;
	uint64_t data_offset; /* file offset of the tensor data section */
	const uint8_t *map;
	uint64_t size;
	int mapped;           /* map came from mmap (else borrowed memory) */
	ing_err err;
};

/* Maps and validates path. On success returns ING_OK and *out is a handle
 * the caller closes with gguf_close(). On failure returns a status, writes
 * the reason into err (which may be NULL), and sets *out = NULL. */
int gguf_open(const char *path, struct gguf **out, ing_err *err);

/* Same over a caller-owned buffer that must outlive the handle (tests,
 * fuzzing). */
int gguf_open_memory(const void *buf, size_t size, struct gguf **out, ing_err *err);

/* Unmaps and frees. Accepts NULL. */
void gguf_close(struct gguf *g);

/* Lookup by exact key; NULL when absent. */
const struct gguf_kv *gguf_kv_find(const struct gguf *g, const char *key);
const struct gguf_tensor *gguf_tensor_find(const struct gguf *g, const char *name);

/* Typed getters: ING_OK, ING_ERR_NOTFOUND when the key is absent, or
 * ING_ERR_FORMAT when its type does not fit (integers convert between
 * widths when the value fits; floats accept FLOAT32/FLOAT64). */
int gguf_get_u64(const struct gguf *g, const char *key, uint64_t *out);
int gguf_get_i64(const struct gguf *g, const char *key, int64_t *out);
int gguf_get_f64(const struct gguf *g, const char *key, double *out);
int gguf_get_bool(const struct gguf *g, const char *key, bool *out);
int gguf_get_str(const struct gguf *g, const char *key, struct gguf_str *out);
int gguf_get_arr(const struct gguf *g, const char *key, struct gguf_arr *out);

/* Element i of a numeric array as a wider type (caller checks i < n and the
 * element type). Floats convert to integers saturating, NaN to 0. */
uint64_t gguf_arr_u64(const struct gguf_arr *a, uint64_t i);
int64_t gguf_arr_i64(const struct gguf_arr *a, uint64_t i);
double gguf_arr_f64(const struct gguf_arr *a, uint64_t i);

/* Sequential walk over an array's elements (any element type). */
struct gguf_arr_iter {
	const struct gguf_arr *arr;
	uint64_t index;
	const uint8_t *p;
};
void gguf_arr_iter_init(struct gguf_arr_iter *it, const struct gguf_arr *a);
/* Next element into *v; returns false past the end. */
bool gguf_arr_iter_next(struct gguf_arr_iter *it, struct gguf_value *v);

/* Static name of a value type ("uint32", "array", ...). */
const char *gguf_vtype_name(uint32_t t);

/* True when s equals the NUL-terminated string c. */
bool gguf_str_eq(struct gguf_str s, const char *c);

#endif
