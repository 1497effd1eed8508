/* grammar_int.h — what the grammar_*.c files share (not a public interface).
 *
 *   grammar.c         the rule builder, flattening into struct grammar,
 *                     reference counting
 *   grammar_schema.c  JSON schema (and JSON mode) -> rules
 *   grammar_text.c    GBNF and regular expressions -> rules
 *   grammar_match.c   the lazily determinized automaton over stack sets,
 *                     matchers, token masks by a pruned trie walk
 *   grammar_vocab.c   the token trie of a tokenizer
 *
 * A grammar is a list of rules; a rule is a list of alternatives; an
 * alternative is a sequence of symbols, each a byte class (a 256-bit set),
 * a reference to a rule, or END (closing the alternative). In the flat form
 * all alternatives lie in one array of symbols, each followed by END.
 *
 * A parse position is a stack of symbol indices: the top is the next
 * symbol to match (always a byte class once expanded), the entries below
 * are where the enclosing rules continue. The set of all stacks
 * consistent with the bytes so far is the matcher's state; grammar_match.c
 * interns each distinct set as an automaton state with a lazily filled
 * 256-way transition table, so a byte costs one table load once seen. */
#ifndef INGOT_GRAMMAR_INT_H
#define INGOT_GRAMMAR_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "grammar.h"

/* Symbol encoding (uint32_t). */
#define GSYM_CLASS 0x80000000u          /* | class index */
#define GSYM_END 0x7fffffffu
#define GSYM_IS_CLASS(s) (((s) & GSYM_CLASS) != 0)
/* otherwise a rule index (< GSYM_END) */

#define GRAMMAR_MAX_RULES (1 << 20)
#define GRAMMAR_MAX_SYMS (1 << 22)
#define GRAMMAR_MAX_DEPTH 200           /* stack entries; deeper parses are dropped */
#define GRAMMAR_MAX_EXPAND 50000        /* closure steps per transition */
#define GRAMMAR_MAX_STATES 40000        /* automaton states before a reset */
#define GRAMMAR_MAX_MASKS 256           /* cached token masks before they are dropped */
#define GRAMMAR_MAX_WORK 10000000       /* closure steps and key words per mask or token
					 * (about 0.1-0.2 s; gdfa.max_work) */
#define GRAMMAR_MAX_WORK_TOTAL 200000000 /* ... per matcher over its life, for masks
					  * (about 2.5 s; gdfa.max_work_total) */

struct gclass {
	uint32_t w[8];
};

static inline bool gclass_has(const struct gclass *c, unsigned b)
{
	return (c->w[b >> 5] >> (b & 31)) & 1u;
}

/* ---- builder (grammar.c) ---- */

struct gb_alt {
	uint32_t *s;
	int n, cap;
};

struct gb_rule {
	struct gb_alt *alts;
	int n, cap;
};

/* Rules under construction. Calls after a failure are no-ops returning
 * dummy symbols; gb_finish reports the failure. */
struct gbuild {
	struct gb_rule *rules;
	int n_rules, cap_rules;
	struct gclass *classes;
	int n_classes, cap_classes;
	int failed; /* 0 or ING_ERR_NOMEM / ING_ERR_UNSUPPORTED (too large) */
};

void gb_free(struct gbuild *b);
int gb_rule_new(struct gbuild *b);
/* Appends an alternative (a copy of syms[0..n)) to rule r. */
void gb_rule_add(struct gbuild *b, int r, const uint32_t *syms, int n);
/* Class symbols. */
uint32_t gb_class(struct gbuild *b, const struct gclass *c);
uint32_t gb_range(struct gbuild *b, unsigned lo, unsigned hi);
uint32_t gb_byte(struct gbuild *b, unsigned c);
/* Any of the bytes in set (a C string). */
uint32_t gb_set(struct gbuild *b, const char *set);
/* Rule symbols: a literal, a sequence, alternatives (each one symbol), a
 * rule with no alternative (matches nothing), x repeated min..max times
 * (max < 0: unbounded). */
uint32_t gb_lit(struct gbuild *b, const char *s, size_t n);
uint32_t gb_seqv(struct gbuild *b, const uint32_t *syms, int n);
uint32_t gb_altv(struct gbuild *b, const uint32_t *syms, int n);
uint32_t gb_nothing(struct gbuild *b);
uint32_t gb_repeat(struct gbuild *b, uint32_t x, int min, int max);
#define GB_N(...) ((int)(sizeof((uint32_t[]){ __VA_ARGS__ }) / sizeof(uint32_t)))
#define GB_SEQ(b, ...) gb_seqv((b), (uint32_t[]){ __VA_ARGS__ }, GB_N(__VA_ARGS__))
#define GB_ALT(b, ...) gb_altv((b), (uint32_t[]){ __VA_ARGS__ }, GB_N(__VA_ARGS__))

/* A regular expression (grammar_text.c's syntax) as a symbol of b that
 * generates the inside of a JSON string whose value matches it: characters
 * JSON must escape come out escaped where the pattern names them, and
 * classes leave them out. *anchored_start / *anchored_end: the pattern
 * begins with ^ / ends with $ (unanchored ends are the caller's to pad).
 * *rc: 0, or the error (message in err). */
uint32_t gt_regex_sym(struct gbuild *b, const char *pattern, size_t len, bool *anchored_start,
		      bool *anchored_end, int *rc, ing_err *err);

/* Flattens b (freed in any case) with root symbol `root` into *out. */
int gb_finish(struct gbuild *b, uint32_t root, struct grammar **out, ing_err *err);

/* ---- the automaton (grammar_match.c) ---- */

struct gstate {
	uint32_t key_off, key_len; /* the canonical stack set in dfa.keys */
	uint64_t hash;
	int32_t *trans;            /* [256] next state, GDFA_DEAD, GDFA_UNKNOWN; or NULL */
	uint32_t *mask;            /* [ceil(V/32)] allowed tokens, or NULL */
	int64_t n_allowed;
	bool accepting, done;
	int32_t plain_next;        /* where every plain character leads: a state,
				    * GDFA_DEAD, GDFA_MIXED; GDFA_UNKNOWN before computed */
};

#define GDFA_DEAD (-1)
#define GDFA_UNKNOWN (-2)
#define GDFA_FAIL (-3)             /* why in gdfa.fail */
#define GDFA_MIXED (-4)

/* Why a transition could not be computed. */
enum gdfa_fail { GFAIL_NOMEM = 1, GFAIL_EXPAND, GFAIL_WORK, GFAIL_WORK_TOTAL };

struct gdfa {
	struct gstate *st;
	int32_t n, cap;
	uint32_t *keys;             /* records [len, p0 .. p(len-1)] per stack, sets back to back */
	size_t n_keys, cap_keys;
	int32_t *table;             /* [table_cap] open addressing of state ids, -1 empty */
	uint32_t table_cap;
	uint64_t generation;        /* bumped by a reset; matchers re-intern */
	const struct grammar_vocab *mask_vocab;
	int n_masks;
	int64_t work;               /* closure steps and key words since the call began */
	int64_t max_work;           /* GRAMMAR_MAX_WORK (tests lower it) */
	int64_t max_work_total;     /* GRAMMAR_MAX_WORK_TOTAL (tests lower it) */
	int64_t budget;             /* this call's: max_work, or what its matcher has left */
	enum gdfa_fail fail;        /* set when a transition returns GDFA_FAIL */
	/* transition scratch */
	uint32_t *todo, *out, *cur;
	size_t n_todo, cap_todo, n_out, cap_out, cap_cur;
	uint32_t *recs;             /* record offsets for sorting */
	size_t cap_recs;
	int32_t *walk;              /* [max piece length + 1] states along a trie path */
	size_t cap_walk;
};

void gdfa_free(struct gdfa *d);

struct grammar {
	atomic_int refs;
	uint32_t *syms;       /* [n_syms] alternatives, each ending in GSYM_END */
	uint32_t n_syms;
	uint32_t *rule_alt;   /* [n_rules + 1] rule r's alternatives: alt_start[rule_alt[r]..rule_alt[r+1]) */
	uint32_t *alt_start;  /* symbol index where each alternative begins */
	uint32_t n_rules;
	struct gclass *classes;
	uint32_t n_classes;
	uint8_t byte_class[256]; /* bytes no class tells apart share a group (grammar.c) */
	uint32_t start;       /* symbol index of the synthetic "root END" */
	pthread_mutex_t mu;   /* guards dfa */
	struct gdfa dfa;
};

/* ---- the token trie (grammar_vocab.c) ---- */

struct gnode {
	int32_t end;     /* index just past this node's subtree (preorder) */
	int32_t tok_lo;  /* first of the tokens whose piece ends here, in vocab.sorted */
	uint16_t tok_n;
	uint16_t depth;  /* bytes from the root, >= 1 */
	uint8_t byte;
};

struct gtrie {
	struct gnode *nodes; /* preorder: a node's children follow it */
	int32_t n_nodes;
	int32_t *sorted;     /* token ids in trie order */
	int max_depth;
};

/* "Plain text" tokens decode to whole UTF-8 characters of JSON string
 * content: code points >= U+0020 other than '"' and backslash (no
 * surrogates, no overlong forms). When every such character takes a state
 * to one same next state, and so on until a state that loops (an unbounded
 * string) or refuses them all (a string at its maxLength), the plain tokens
 * allowed are exactly those of at most so many characters: the mask is a
 * prefix of plain_sorted (or plain_bits) plus a walk of the much smaller
 * trie of the other tokens. */
#define GRAMMAR_PLAIN_MAXLEN 64

struct grammar_vocab {
	const struct tokenizer *tk;
	int32_t n_vocab;
	struct gtrie all;     /* every token that decodes to bytes */
	struct gtrie other;   /* those that are not plain text */
	uint32_t *plain_bits; /* [ceil(V/32)] */
	int64_t n_plain;
	int32_t *plain_sorted; /* [n_plain] plain tokens by number of characters */
	int64_t plain_upto[GRAMMAR_PLAIN_MAXLEN + 1]; /* plain tokens of <= k characters */
	int32_t *eog;         /* end-of-generation ids */
	int n_eog;
};

#endif
