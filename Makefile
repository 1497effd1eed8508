# ingot build.
#
#   make              release build of ./ingot
#   make debug        build/debug/ingot   (-O0 -g)
#   make asan         build/asan/ingot    (ASan + UBSan)
#   make test         installs test deps if missing, builds, runs every test
#   make test-asan    the C tests under ASan + UBSan
#   make tsan         build/tsan: the threaded tests (engine, server) under TSan
#   make test-tsan    builds and runs them (`make test` runs them too)
#   make run          builds, pulls the default model, generates from it
#   make fuzz         clang libFuzzer targets, FUZZ_SECONDS=N each (fuzz/run.sh)
#
# Sources are globbed: every src/*.c except main.c goes into libingot.a,
# every tests/test_*.c becomes a test binary linked against it. Files named
# *_avx2.c / *_avxvnni.c / *_avx512.c / *_amx.c get their ISA flags; dispatch happens
# at run time.

# One job per CPU unless the command line says otherwise (make -j1 still
# builds serially): `make test` builds three trees (release, ASan, TSan),
# which serially took about a third of CI's time on two cores. Set at the
# top level only; sub-makes share its job slots.
ifeq ($(MAKELEVEL),0)
ifeq ($(filter -j% j%,$(MAKEFLAGS)),)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 1)
endif
endif

MODE     ?= release
BUILD    := build/$(MODE)
CC       ?= cc
CSTD     := -std=c11 -D_GNU_SOURCE
WARN     := -Wall -Wextra -Wshadow -Wno-unused-parameter -Wvla -Wpointer-arith
PKGS     := libpcre2-8 libcjson libmicrohttpd libcurl
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lpcre2-8)

ifeq ($(MODE),release)
  OPT := -O2 -g -DNDEBUG
else ifeq ($(MODE),debug)
  OPT := -O0 -g
else ifeq ($(MODE),asan)
  OPT := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDSAN := -fsanitize=address,undefined
else ifeq ($(MODE),tsan)
  OPT := -O1 -g -fsanitize=thread -fno-omit-frame-pointer
  LDSAN := -fsanitize=thread
endif

# Under TSan the quant kernels (src/quant_*.c) go uninstrumented: they read
# every weight each step, which checked made test_engine take over 10
# minutes; their callers declare the activations they touch instead
# (src/sanitize.h).
ifeq ($(MODE),tsan)
$(patsubst src/%.c,$(BUILD)/obj/%.o,$(wildcard src/quant_*.c)): OPT += -fno-sanitize=thread
endif

# Under ASan the model's tests link the SIMD kernels built without the
# sanitizers (build/asan/kobj), ahead of the library's checked copies,
# which the other tests (test_quant, the kernels' own) keep: checked the
# kernels made test_engine take 193 s (55 s so), test_runner 89 (25).
# What the kernels touch in the heap their callers declare
# (src/sanitize.h), and ASan checks it; the weights are mappings that ASan
# cannot check anyway.
ASAN_MODEL_TESTS := test_engine test_runner test_kv
KERNEL_SRC := src/quant_avx2.c $(wildcard src/quant_gemm_*.c)
ifeq ($(MODE),asan)
KERNEL_UNCHECKED := $(KERNEL_SRC:src/%.c=$(BUILD)/kobj/%.o)
$(ASAN_MODEL_TESTS:%=$(BUILD)/tests/%): $(KERNEL_UNCHECKED)
$(ASAN_MODEL_TESTS:%=$(BUILD)/tests/%): TEST_KERNELS := $(KERNEL_UNCHECKED)
endif

# The tests that exercise threads (engine thread + workers + callers; the
# HTTP server's connection threads), built and run under ThreadSanitizer.
TSAN_TESTS := test_engine test_server_stream test_steal

CFLAGS_ALL = $(CSTD) $(WARN) $(OPT) $(PKG_CFLAGS) -Isrc -pthread $(CFLAGS)
LDLIBS_ALL = $(LDSAN) $(PKG_LIBS) -lm -pthread $(LDLIBS)

ISA_avx2   := -mavx2 -mfma -mf16c
ISA_avxvnni := $(ISA_avx2) -mavxvnni
ISA_avx512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mfma -mf16c
ISA_amx    := $(ISA_avx512) -mamx-tile -mamx-int8

LIB_SRC  := $(filter-out src/main.c,$(wildcard src/*.c))
LIB_OBJ  := $(LIB_SRC:src/%.c=$(BUILD)/obj/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TEST_HELPERS := $(filter-out $(TEST_SRC),$(wildcard tests/*.c))
TEST_HELPER_OBJ := $(TEST_HELPERS:tests/%.c=$(BUILD)/testobj/%.o)
TOOL_SRC := $(wildcard tests/tools/*.c)
TOOL_BIN := $(TOOL_SRC:tests/tools/%.c=$(BUILD)/tools/%)

.PHONY: all release debug asan tsan test test-asan test-tsan test-deps build-deps run clean \
	tests-build fuzz
.DEFAULT_GOAL := all
.SECONDARY:

ifeq ($(MODE),release)
all: ingot
ingot: $(BUILD)/ingot
	cp $< $@
else
all: $(BUILD)/ingot
endif

debug:
	$(MAKE) MODE=debug all tests-build
asan:
	$(MAKE) MODE=asan all tests-build
tsan:
	$(MAKE) MODE=tsan $(TSAN_TESTS:%=build/tsan/tests/%)

$(BUILD)/obj/%_avx2.o: src/%_avx2.c $(wildcard src/*.h) | $(BUILD)/obj
	$(CC) $(CFLAGS_ALL) $(ISA_avx2) -c $< -o $@
$(BUILD)/obj/%_avxvnni.o: src/%_avxvnni.c $(wildcard src/*.h) | $(BUILD)/obj
	$(CC) $(CFLAGS_ALL) $(ISA_avxvnni) -c $< -o $@
$(BUILD)/obj/%_avx512.o: src/%_avx512.c $(wildcard src/*.h) | $(BUILD)/obj
	$(CC) $(CFLAGS_ALL) $(ISA_avx512) -c $< -o $@
$(BUILD)/obj/%_amx.o: src/%_amx.c $(wildcard src/*.h) | $(BUILD)/obj
	$(CC) $(CFLAGS_ALL) $(ISA_amx) -c $< -o $@
# the VNNI builds of quant_gemm_avx2.c, and test_quant's build under SIMDe
# (whose 256-bit vectors, without -mavx, draw GCC's ABI notes, and whose
# emulated kernels outgrow its variable tracking)
$(BUILD)/obj/quant_gemm_avxvnni.o $(BUILD)/obj/quant_gemm_avx512.o $(BUILD)/tests/test_quant: \
	src/quant_gemm_avx2.c
$(BUILD)/kobj/quant_gemm_avxvnni.o $(BUILD)/kobj/quant_gemm_avx512.o: src/quant_gemm_avx2.c
$(BUILD)/obj/quant_gemm_k_avxvnni.o $(BUILD)/obj/quant_gemm_k_avx512.o: src/quant_gemm_k_avx2.c
$(BUILD)/kobj/quant_gemm_k_avxvnni.o $(BUILD)/kobj/quant_gemm_k_avx512.o: src/quant_gemm_k_avx2.c
$(BUILD)/tests/test_quant $(BUILD)/tests/test_ops_simde $(BUILD)/tests/test_act_simde: \
	CFLAGS += -Wno-psabi -fno-var-tracking-assignments
# (test_ops_simde compiles src/ops_avx512.c itself, under SIMDe;
# test_act_simde src/quant_act_avx512.c)
$(BUILD)/tests/test_ops_simde: src/ops_avx512.c
$(BUILD)/tests/test_act_simde: src/quant_act_avx512.c
# test_r16_simde compiles src/quant_gemm_r16_avx512.c under SIMDe, and
# test_r16_amx src/quant_gemm_r16_amx.c under SIMDe and tests/amx_emu.h
# (the tile instructions emulated). In release they build at -O0 (the last
# -O wins): seconds, where -O1 took GCC minutes. Under ASan it is the other
# way round, so they keep its -O1: test_r16_simde 123 s to compile and
# 14.5 s to run at -O0, 21 s and 4 s at -O1 (test_r16_amx 10 + 20.5 s ->
# 5 + 12.5 s; Zen 3 host, one job).
$(BUILD)/tests/test_r16_simde: src/quant_gemm_r16_avx512.c
$(BUILD)/tests/test_r16_amx: src/quant_gemm_r16_amx.c
$(BUILD)/tests/test_r16_simde $(BUILD)/tests/test_r16_amx: \
	CFLAGS += -Wno-psabi -fno-var-tracking-assignments
ifneq ($(MODE),asan)
$(BUILD)/tests/test_r16_simde $(BUILD)/tests/test_r16_amx: OPT += -O0
endif
$(BUILD)/obj/%.o: src/%.c $(wildcard src/*.h) | $(BUILD)/obj
	$(CC) $(CFLAGS_ALL) -c $< -o $@
# (every kernel file's name ends in its ISA: quant_gemm_r16_amx -> ISA_amx)
$(BUILD)/kobj/%.o: src/%.c $(wildcard src/*.h) | $(BUILD)/kobj
	$(CC) $(CFLAGS_ALL) $(ISA_$(lastword $(subst _, ,$*))) -fno-sanitize=address,undefined \
		-c $< -o $@

$(BUILD)/libingot.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/ingot: src/main.c $(BUILD)/libingot.a
	$(CC) $(CFLAGS_ALL) $< $(BUILD)/libingot.a $(LDLIBS_ALL) -o $@

$(BUILD)/testobj/%.o: tests/%.c $(wildcard src/*.h tests/*.h) | $(BUILD)/testobj
	$(CC) $(CFLAGS_ALL) -Itests -c $< -o $@
$(BUILD)/tests/%: tests/%.c $(TEST_HELPER_OBJ) $(BUILD)/libingot.a $(wildcard src/*.h tests/*.h) | $(BUILD)/tests
	$(CC) $(CFLAGS_ALL) -Itests $< $(TEST_HELPER_OBJ) $(TEST_KERNELS) $(BUILD)/libingot.a \
		$(LDLIBS_ALL) -o $@

$(BUILD)/tools/%: tests/tools/%.c $(TEST_HELPER_OBJ) $(BUILD)/libingot.a $(wildcard src/*.h tests/*.h) | $(BUILD)/tools
	$(CC) $(CFLAGS_ALL) -Itests $< $(TEST_HELPER_OBJ) $(BUILD)/libingot.a $(LDLIBS_ALL) -o $@

tests-build: $(TEST_BIN) $(TOOL_BIN) $(BUILD)/ingot

$(BUILD)/obj $(BUILD)/kobj $(BUILD)/tests $(BUILD)/testobj $(BUILD)/tools:
	mkdir -p $@

build-deps:
	@scripts/setup.sh build
test-deps:
	@scripts/setup.sh test

test: test-deps
	$(MAKE) MODE=release all tests-build
	$(MAKE) MODE=asan tests-build
	$(MAKE) tsan
	./ingot pull > /dev/null
	@tests/run.sh

test-asan: test-deps
	$(MAKE) MODE=asan tests-build
	@INGOT_TEST_MODE=asan tests/run.sh

test-tsan: test-deps
	$(MAKE) tsan
	./ingot pull > /dev/null
	@INGOT_TEST_MODE=tsan tests/run.sh

run: build-deps
	$(MAKE) MODE=release all
	./ingot pull
	./ingot run -p "The capital of France is" -n 32

FUZZ_SECONDS ?= 60
fuzz:
	@scripts/setup.sh fuzz
	@FUZZ_SECONDS=$(FUZZ_SECONDS) fuzz/run.sh

clean:
	rm -rf build ingot
