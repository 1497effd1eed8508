/* gguf_writer.h — a small in-memory GGUF writer for tests.
 *
 * Builds a GGUF v2/v3 file (little-endian) in memory: metadata of every value
 * type (arrays of strings and nested arrays included), tensors of any type
 * with raw bytes or floats quantized by quant_quantize_ref(), and the
 * alignment taken from a "general.alignment" uint32 entry when one is
 * written (else 32), exactly as gguf.c reads it.
 *
 * It is also a tool for writing *broken* files:
 *   - the low-level gguf_writer_kv_begin() + gguf_writer_put_*() stream
 *     writes any bytes as a value (unknown types, bools of 2, lengths that
 *     lie, arrays nested as deep as wanted);
 *   - gguf_writer_tensor_raw() takes any type, n_dims and dims unchecked,
 *     gguf_writer_tensor_offset() overrides a tensor's data offset;
 *   - after gguf_writer_finish() the file offset of every field is known
 *     (gguf_writer_kv_pos(), gguf_writer_tensor_pos(), GGUF_POS_* for the
 *     header), so a test can patch precise bytes with gguf_patch_le().
 *
 * Memory: the writer uses plain malloc, not ing_malloc, so it never shows in
 * ing_mem_live() or in fault injection of the library. It aborts on
 * out-of-memory (test code only). Not thread-safe; one writer per thread.
 *
 * Usage:
 *   struct gguf_writer w;
 *   gguf_writer_init(&w, 3);
 *   gguf_writer_kv_str(&w, "general.architecture", "gemma3");
 *   gguf_writer_tensor_f32(&w, "tok", QTYPE_Q8_0, 2, (uint64_t[]){64, 4}, x);
 *   uint8_t *buf; size_t size;
 *   gguf_writer_finish(&w, &buf, &size);   // caller free()s buf
 *   gguf_writer_free(&w); */
#ifndef INGOT_TESTS_GGUF_WRITER_H
#define INGOT_TESTS_GGUF_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "quant.h"

/* File offsets of the header fields. */
#define GGUF_POS_MAGIC 0
#define GGUF_POS_VERSION 4
#define GGUF_POS_N_TENSORS 8
#define GGUF_POS_N_KV 16
#define GGUF_HEADER_BYTES 24

/* A growable byte buffer. */
struct gguf_wbuf {
	uint8_t *p;
	size_t len, cap;
};

/* File offsets of one metadata entry's fields (valid after finish). */
struct gguf_kv_pos {
	size_t key;   /* u64 key length, followed by the key bytes */
	size_t type;  /* u32 value type */
	size_t value; /* first byte of the value */
	size_t end;   /* one past the last byte of the value */
};

/* File offsets of one tensor's info fields and data (valid after finish). */
struct gguf_tensor_pos {
	size_t name;   /* u64 name length, followed by the name bytes */
	size_t n_dims; /* u32 */
	size_t ne;     /* u64 ne[0], then ne[1].. */
	size_t type;   /* u32 */
	size_t offset; /* u64 offset relative to the data section */
	size_t data;   /* where the writer put the data bytes */
};

#define GGUF_WRITER_MAX_DIMS 8

struct gguf_wtensor {
	char *name;            /* malloc'd, NUL-terminated, may hold NULs */
	size_t name_len;
	uint32_t n_dims;
	uint64_t ne[GGUF_WRITER_MAX_DIMS];
	uint32_t type;
	uint8_t *data;         /* copy of the bytes, malloc'd */
	size_t nbytes;
	bool offset_set;       /* offset overridden by gguf_writer_tensor_offset */
	uint64_t offset;       /* the override, relative to the data section */
	struct gguf_tensor_pos pos;
};

struct gguf_writer {
	uint32_t version;
	struct gguf_wbuf kv;       /* serialized metadata section (file offset 24) */
	struct gguf_kv_pos *kvs;   /* per entry, file offsets */
	size_t n_kv, cap_kv;
	struct gguf_wtensor *tensors;
	size_t n_tensors, cap_tensors;
	uint64_t alignment;        /* from the first general.alignment, else 32 */
	bool alignment_set;
	size_t data_offset;        /* file offset of the data section (after finish) */
	size_t size;               /* file size (after finish) */
};

/* Starts an empty file of the given version (2 or 3; anything else is
 * written as is). */
void gguf_writer_init(struct gguf_writer *w, uint32_t version);

/* Frees everything the writer holds (not a buffer returned by finish).
 * Accepts a zeroed or already freed writer. */
void gguf_writer_free(struct gguf_writer *w);

/* ---- metadata, typed ---- */
void gguf_writer_kv_u8(struct gguf_writer *w, const char *key, uint8_t v);
void gguf_writer_kv_i8(struct gguf_writer *w, const char *key, int8_t v);
void gguf_writer_kv_u16(struct gguf_writer *w, const char *key, uint16_t v);
void gguf_writer_kv_i16(struct gguf_writer *w, const char *key, int16_t v);
/* A uint32 "general.alignment" also sets the layout alignment when it is a
 * power of two in 1..2^20 (otherwise the layout keeps 32, so a test can
 * write a bad value and see the reader reject it). */
void gguf_writer_kv_u32(struct gguf_writer *w, const char *key, uint32_t v);
void gguf_writer_kv_i32(struct gguf_writer *w, const char *key, int32_t v);
void gguf_writer_kv_u64(struct gguf_writer *w, const char *key, uint64_t v);
void gguf_writer_kv_i64(struct gguf_writer *w, const char *key, int64_t v);
void gguf_writer_kv_f32(struct gguf_writer *w, const char *key, float v);
void gguf_writer_kv_f64(struct gguf_writer *w, const char *key, double v);
void gguf_writer_kv_bool(struct gguf_writer *w, const char *key, bool v);
void gguf_writer_kv_str(struct gguf_writer *w, const char *key, const char *v);
void gguf_writer_kv_strn(struct gguf_writer *w, const char *key, const char *v, size_t len);

/* Array of n numeric elements of elem_type, taken from data in host layout
 * (uint8_t[] for UINT8 and BOOL, int16_t[] for INT16, float[] for FLOAT32,
 * double[] for FLOAT64, ...). elem_type must be a fixed-size type. */
void gguf_writer_kv_arr(struct gguf_writer *w, const char *key, enum gguf_vtype elem_type,
			size_t n, const void *data);
void gguf_writer_kv_arr_i32(struct gguf_writer *w, const char *key, size_t n, const int32_t *v);
void gguf_writer_kv_arr_u32(struct gguf_writer *w, const char *key, size_t n, const uint32_t *v);
void gguf_writer_kv_arr_f32(struct gguf_writer *w, const char *key, size_t n, const float *v);
void gguf_writer_kv_arr_str(struct gguf_writer *w, const char *key, size_t n,
			    const char *const *v);

/* ---- metadata, low level ----
 * gguf_writer_kv_begin() writes a key and a value type tag and opens an
 * entry; the put functions then append the value's bytes verbatim. No check
 * that they match the tag: that is the point. A nested array element is
 * gguf_writer_put_arr_header(elem_type, n) followed by its n elements.
 * Example, [[1, 2], ["x"]]:
 *   gguf_writer_kv_begin(w, "k", GGUF_VT_ARRAY);
 *   gguf_writer_put_arr_header(w, GGUF_VT_ARRAY, 2);
 *   gguf_writer_put_arr_header(w, GGUF_VT_INT32, 2);
 *   gguf_writer_put_u32(w, 1); gguf_writer_put_u32(w, 2);
 *   gguf_writer_put_arr_header(w, GGUF_VT_STRING, 1);
 *   gguf_writer_put_str(w, "x"); */
void gguf_writer_kv_begin(struct gguf_writer *w, const char *key, uint32_t vtype);
/* Same with a key of len bytes (may be empty or contain NULs). */
void gguf_writer_kv_beginn(struct gguf_writer *w, const char *key, size_t len, uint32_t vtype);
void gguf_writer_put_u8(struct gguf_writer *w, uint8_t v);
void gguf_writer_put_u16(struct gguf_writer *w, uint16_t v);
void gguf_writer_put_u32(struct gguf_writer *w, uint32_t v);
void gguf_writer_put_u64(struct gguf_writer *w, uint64_t v);
void gguf_writer_put_f32(struct gguf_writer *w, float v);
void gguf_writer_put_f64(struct gguf_writer *w, double v);
void gguf_writer_put_str(struct gguf_writer *w, const char *s);       /* u64 len + bytes */
void gguf_writer_put_strn(struct gguf_writer *w, const char *s, size_t len);
void gguf_writer_put_arr_header(struct gguf_writer *w, uint32_t elem_type, uint64_t n);
void gguf_writer_put_bytes(struct gguf_writer *w, const void *p, size_t n);

/* ---- tensors ----
 * Each returns the tensor's index, or -1 (nothing added) when the input is
 * not a valid tensor: type unknown to qtype_traits, n_dims not 1..4, a
 * dimension 0, or ne[0] not a multiple of the block size.
 * ne[0] is the row length (ggml order). */

/* data: qtype_row_bytes(type, ne[0]) * rows bytes, copied; NULL writes
 * zeros. */
int gguf_writer_tensor(struct gguf_writer *w, const char *name, uint32_t type,
		       uint32_t n_dims, const uint64_t *ne, const void *data);
/* x: the tensor's elements as floats, quantized to type row by row with
 * quant_quantize_ref(). */
int gguf_writer_tensor_f32(struct gguf_writer *w, const char *name, uint32_t type,
			   uint32_t n_dims, const uint64_t *ne, const float *x);
/* Unchecked: any type and n_dims <= GGUF_WRITER_MAX_DIMS; nbytes of data
 * (NULL: zeros) are placed in the data section. Always succeeds. */
int gguf_writer_tensor_raw(struct gguf_writer *w, const char *name, size_t name_len,
			   uint32_t type, uint32_t n_dims, const uint64_t *ne,
			   const void *data, size_t nbytes);
/* Writes `offset` as tensor i's data offset instead of the computed one (its
 * bytes still go where the layout puts them). */
void gguf_writer_tensor_offset(struct gguf_writer *w, int i, uint64_t offset);

/* ---- output ---- */

/* Serializes the file into *buf (malloc'd; the caller free()s it) and
 * *size. Fills the kv/tensor positions and w->data_offset, w->size. May be
 * called again after more additions. Each tensor's data is padded to the
 * alignment, as ggml and gguf-py do, the last one included. */
void gguf_writer_finish(struct gguf_writer *w, uint8_t **buf, size_t *size);

/* finish() into a file. Returns 0, or -1 with errno set. */
int gguf_writer_save(struct gguf_writer *w, const char *path);

/* Positions of entry i / tensor i after finish (NULL when out of range). */
const struct gguf_kv_pos *gguf_writer_kv_pos(const struct gguf_writer *w, size_t i);
const struct gguf_tensor_pos *gguf_writer_tensor_pos(const struct gguf_writer *w, size_t i);

/* Writes the low nbytes (1..8) of v little-endian at buf + off. */
void gguf_patch_le(uint8_t *buf, size_t off, uint64_t v, unsigned nbytes);

#endif
