# fuzz.mk — clang builds of the fuzz targets, separate from the gcc builds.
#
#   make -f fuzz/fuzz.mk        (fuzz/run.sh does this, then runs them)
#
# Library sources (src/*.c but main.c) and the harness bodies are compiled
# with libFuzzer's coverage instrumentation plus ASan and UBSan (UB is
# fatal); each fuzz/fuzz_*.c links them into build/fuzz/fuzz_*. make_seeds
# writes the seed corpora. Everything lands under build/fuzz/.

CLANG    ?= clang
B        := build/fuzz
SAN      := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
PKGS     := libpcre2-8 libcjson libmicrohttpd libcurl
PKG_CF   := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LD   := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lpcre2-8)
CFLAGS_F := -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Wno-unused-parameter $(SAN) \
            -fsanitize=fuzzer-no-link $(PKG_CF) -Isrc -Itests -pthread
LDLIBS_F := $(PKG_LD) -lm -pthread

ISA_avx2   := -mavx2 -mfma -mf16c
ISA_avxvnni := $(ISA_avx2) -mavxvnni
ISA_avx512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mfma -mf16c
ISA_amx    := $(ISA_avx512) -mamx-tile -mamx-int8

LIB_OBJ    := $(patsubst src/%.c,$(B)/obj/%.o,$(filter-out src/main.c,$(wildcard src/*.c)))
HELPERS    := harness_fuzz harness_gguf harness_tokenizer harness_grammar harness_seeds \
              harness_api harness_http harness_seeds_api check gguf_writer
HELPER_OBJ := $(HELPERS:%=$(B)/testobj/%.o)
FUZZERS    := $(patsubst fuzz/%.c,$(B)/%,$(wildcard fuzz/fuzz_*.c))
HDRS       := $(wildcard src/*.h tests/*.h)

.PHONY: all
all: $(FUZZERS) $(B)/make_seeds

# The SIMD kernel files (*_avx2.c, *_avxvnni.c, *_avx512.c, *_amx.c) are
# compiled without ASan and UBSan: no fuzz target reaches them (the request
# and HTTP harnesses run engine-less, and model binding repacks weights in
# plain C), the C tests run them under ASan + UBSan (make asan), and here
# the sanitizers made them ~400 of the build's ~500 CPU-seconds (clang 14,
# Zen 3: quant_gemm_k_avx512.c 96 s, 2.5 s without).
CFLAGS_K := $(filter-out $(SAN),$(CFLAGS_F))

$(B)/obj/%_avx2.o: src/%_avx2.c $(HDRS) | $(B)/obj
	$(CLANG) $(CFLAGS_K) $(ISA_avx2) -c $< -o $@
$(B)/obj/%_avxvnni.o: src/%_avxvnni.c $(HDRS) | $(B)/obj
	$(CLANG) $(CFLAGS_K) $(ISA_avxvnni) -c $< -o $@
$(B)/obj/%_avx512.o: src/%_avx512.c $(HDRS) | $(B)/obj
	$(CLANG) $(CFLAGS_K) $(ISA_avx512) -c $< -o $@
$(B)/obj/%_amx.o: src/%_amx.c $(HDRS) | $(B)/obj
	$(CLANG) $(CFLAGS_K) $(ISA_amx) -c $< -o $@
$(B)/obj/quant_gemm_avxvnni.o $(B)/obj/quant_gemm_avx512.o: src/quant_gemm_avx2.c
$(B)/obj/%.o: src/%.c $(HDRS) | $(B)/obj
	$(CLANG) $(CFLAGS_F) -c $< -o $@
$(B)/testobj/%.o: tests/%.c $(HDRS) | $(B)/testobj
	$(CLANG) $(CFLAGS_F) -c $< -o $@

$(B)/libingot.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(B)/fuzz_%: fuzz/fuzz_%.c $(HELPER_OBJ) $(B)/libingot.a $(HDRS)
	$(CLANG) $(CFLAGS_F) -fsanitize=fuzzer $< $(HELPER_OBJ) $(B)/libingot.a $(LDLIBS_F) -o $@

$(B)/make_seeds: fuzz/make_seeds.c $(HELPER_OBJ) $(B)/libingot.a $(HDRS)
	$(CLANG) $(CFLAGS_F) $< $(HELPER_OBJ) $(B)/libingot.a $(LDLIBS_F) -o $@

$(B)/obj $(B)/testobj:
	mkdir -p $@
