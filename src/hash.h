/* hash.h — small hashes: FNV-1a over bytes, for the hash tables of modules
 * that key by strings (template dictionaries, GBNF rule names), and
 * splitmix64 (Steele, Lea, Flood 2014) for 64-bit values: the prefix
 * cache's block chain, sampler seeds, the server's cache salts. Neither is
 * a cryptographic hash. */
#ifndef INGOT_HASH_H
#define INGOT_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint32_t hash_fnv1a32(const char *s, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

/* splitmix64's output function: a bijection of 64-bit values whose every
 * output bit depends on every input bit. */
static inline uint64_t hash_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The splitmix64 generator: advances *x and returns its next value. */
static inline uint64_t hash_splitmix64(uint64_t *x)
{
	return hash_mix64(*x += 0x9e3779b97f4a7c15ull);
}

#endif
