/* hash.h — FNV-1a over bytes, for the small hash tables of modules that
 * key by strings (template dictionaries, GBNF rule names). Not for
 * anything adversarial beyond table probing. */
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

#endif
