/* spec_trie.h — a suffix trie of bounded depth over token sequences
 * (internal to the suffix drafter, spec.c).
 *
 * Appending token t to a sequence inserts every suffix that ends at t, of
 * length 1..depth: the trie holds each substring of length <= depth once,
 * with cnt = how many times it occurred, and for each node the child that
 * followed it most often (ties: the most recent). That is all a drafter
 * needs: "after this context, what usually comes next, and how sure".
 *
 * Nodes live in arrays of a fixed capacity; edges in an open-addressing
 * hash table keyed by (parent, token), entries stamped with an epoch so
 * that clearing the trie is O(1). When the node arrays are full, inserts
 * stop (strie_append returns false) and the caller decides (stop learning,
 * or clear and start over). */
#ifndef INGOT_SPEC_TRIE_H
#define INGOT_SPEC_TRIE_H

#include <stdbool.h>
#include <stdint.h>

#define STRIE_MAX_DEPTH 32

struct strie_edge {
	int32_t parent, token, child;
	uint32_t epoch;
};

struct strie {
	int32_t cap, n_nodes;     /* node 0 is the root */
	int depth;                /* longest substring stored */
	uint32_t *cnt;            /* [cap] occurrences of the node's string */
	uint32_t *child_total;    /* [cap] occurrences followed by some token */
	int32_t *best;            /* [cap] most frequent child, -1: none */
	int32_t *tok;             /* [cap] token on the edge into the node */
	struct strie_edge *edges; /* [hmask + 1] */
	uint32_t hmask, epoch;
	int32_t active[STRIE_MAX_DEPTH]; /* nodes of the current suffixes, by length - 1 */
	int n_active;
};

/* Allocates a trie of cap nodes and the given depth (1..STRIE_MAX_DEPTH). */
int strie_init(struct strie *t, int32_t cap, int depth);
void strie_free(struct strie *t);

/* Empties the trie (O(1)). */
void strie_clear(struct strie *t);

/* Ends the current sequence: the next append starts a new one (suffixes
 * never span two sequences). */
void strie_break(struct strie *t);

/* Appends one token to the current sequence. False when the trie is full
 * (nothing was inserted for this token). */
bool strie_append(struct strie *t, int32_t token);

/* The node of path[0, n) from the root, or -1. */
int32_t strie_find(const struct strie *t, const int32_t *path, int n);

/* The token on the edge into child (stored in the node). */
int32_t strie_token(const struct strie *t, int32_t node);

#endif
