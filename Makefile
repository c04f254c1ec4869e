# Expert Sniper - build, test, run.
#   make          build build/sniperd, build/sniper, build/sniper-mkmodel
#   make test     install missing packages, build, run every test (closing line: N passed, N failed)
#   make check    the tests again under ASan+UBSan (build-check/)
#   make run      install missing packages, build the three binaries, generate the default model,
#                 serve it
#   make bench    benchmarks (see docs/benchmarks.md)
#   make test-arm64  the CPU's tests cross-built for linux-arm64 and run under qemu (tests/arm64.sh)
#   make PORTABLE=1  the OS layer's portable files on Linux: pread threads, no io_uring, no huge
#                 pages (what macOS runs, less its own calls); CC=clang works as well as gcc
CC      ?= cc
HOSTCC  ?= $(CC)
ifeq ($(PORTABLE),1)
BUILD   ?= build-portable
endif
BUILD   ?= build
OPT     ?= -O2
SAN     ?=
# PHASES=1 (give it a BUILD of its own): a developer's build in which every GPU kernel's workgroup 0
# stamps the device's clock at its start, at its PHASE(j) markers and at its end, and gpu_close
# prints each kernel's last dispatch (server/gpu/gpu.c, shaders/common.glsl); needs the device's
# VK_KHR_shader_clock. Never in a release: the stamps cost a store each.
ifeq ($(PHASES),1)
GLSLC_FLAGS  += -DPHASE_CLOCK
EXTRA_CFLAGS += -DGPU_PHASES
endif
CFLAGS  := -std=c11 $(OPT) -g -Wall -Wextra -Werror -Wshadow -Wvla -pthread -D_GNU_SOURCE \
           -fno-math-errno -fno-trapping-math -ffp-contract=off $(SAN) \
           -Icommon -Iserver/engine -Iserver/experts -Iserver/gpu -Iserver/http -Iserver/context -Itools \
           -Itests $(EXTRA_CFLAGS)
LDLIBS  := -lmicrohttpd -lpcre2-8 -ljansson -lzstd -lcurl -lcrypto -lxml2 -lm -pthread
LDFLAGS := $(SAN)

# ---- the target: its CPU from the compiler, its OS from uname (the OS layer: common/os.h) -------
MACHINE   := $(shell $(CC) -dumpmachine)
UNAME_S   ?= $(shell uname -s)
ifneq ($(filter x86_64% i386% i486% i586% i686%,$(MACHINE)),)
  CPU_ARCH := x86
else ifneq ($(filter aarch64% arm64%,$(MACHINE)),)
  CPU_ARCH := arm64
else
  CPU_ARCH := other
endif
# clang (macOS's compiler, and CC=clang here) warns of the tests' deliberate string concatenations
# in array initializers
ifneq ($(findstring clang,$(shell $(CC) --version 2>/dev/null | head -n 1)),)
  CFLAGS += -Wno-string-concatenation
endif
ifeq ($(UNAME_S),Darwin)
  OS_KIND  := darwin
  OS_SRC   := io_darwin pages_posix ring_none mem_darwin cpu_darwin
  # Homebrew's packages (scripts/deps.sh); curl, libxml2, libedit and openssl are keg-only there
  BREW     := $(shell brew --prefix 2>/dev/null)
  empty    :=
  export PKG_CONFIG_PATH := $(subst $(empty) $(empty),:,$(foreach k,curl libxml2 libedit openssl@3,$(BREW)/opt/$(k)/lib/pkgconfig)):$(PKG_CONFIG_PATH)
  BREW_PKGS := libmicrohttpd libpcre2-8 jansson libzstd libcurl libxml-2.0 libcrypto
  CFLAGS   += $(shell pkg-config --cflags $(BREW_PKGS) 2>/dev/null)
  LDFLAGS  += $(shell pkg-config --libs-only-L $(BREW_PKGS) 2>/dev/null)
else ifeq ($(PORTABLE),1)
  OS_KIND  := posix
  OS_SRC   := io_posix pages_posix ring_none mem_linux cpu_linux
else
  OS_KIND  := linux
  OS_SRC   := io_linux pages_linux ring_uring mem_linux cpu_linux
  LDLIBS   += -luring
endif

AVX2_FLAGS   := -mavx2 -mfma -mf16c
AVX512_FLAGS := $(AVX2_FLAGS) -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni

ISA_SRC    := $(wildcard common/*_avx2.c common/*_avx512.c common/*_neon.c common/*_neondot.c \
                         common/*_i8mm.c)
ISA_KEEP   := $(if $(filter x86,$(CPU_ARCH)),$(filter %_avx2.c %_avx512.c,$(ISA_SRC))) \
              $(if $(filter arm64,$(CPU_ARCH)),$(filter %_neon.c %_neondot.c %_i8mm.c,$(ISA_SRC)))
COMMON_SRC := $(filter-out $(ISA_SRC),$(wildcard common/*.c)) $(ISA_KEEP) \
              $(OS_SRC:%=common/os/%.c)
ENGINE_SRC := $(wildcard server/engine/*.c) $(wildcard server/experts/*.c) $(wildcard server/http/*.c) \
              $(wildcard server/context/*.c)
LIB_SRC    := $(COMMON_SRC) $(ENGINE_SRC) tools/route_trace.c tools/op_trace.c

# The Vulkan backend (server/gpu) is built where libvulkan-dev's headers and glslc are; elsewhere
# gpu_none.c stands in and every device lookup says this build has none.
VULKAN     ?= $(shell pkg-config --exists vulkan 2>/dev/null && command -v glslc >/dev/null && echo 1)
GPU_KERNELS := $(basename $(notdir $(wildcard server/gpu/shaders/*.comp)))
GPU_VK_SRC := server/gpu/gpu.c server/gpu/vk_fn.c
GPU_SRC    := $(filter-out $(GPU_VK_SRC) server/gpu/gpu_none.c,$(wildcard server/gpu/*.c))
ifeq ($(VULKAN),1)
GPU_SRC    += $(GPU_VK_SRC)
GPU_OBJ    := $(BUILD)/obj/gen/gpu_shaders.o $(GPU_KERNELS:%=$(BUILD)/obj/gen/spv/%.o)
else
GPU_SRC    += server/gpu/gpu_none.c
GPU_OBJ    :=
endif
LIB_OBJ    := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(GPU_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/webui.o \
              $(GPU_OBJ)
TEST_SRC   := $(wildcard tests/test_*.c)
TEST_BIN   := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TOOL_SRC   := $(wildcard tools/bench_*.c)
TOOL_BIN   := $(TOOL_SRC:tools/bench_%.c=$(BUILD)/bench-%)
BINS       := $(BUILD)/sniperd $(BUILD)/sniper $(BUILD)/sniper-mkmodel

.PHONY: all test test-arm64 check run bench clean install deps FORCE
.SECONDARY:
ifeq ($(OS_KIND),darwin)
all: $(BINS) $(TOOL_BIN) # the tests pin CPUs and read /proc: they are Linux's
else
all: $(BINS) $(TEST_BIN) $(TOOL_BIN)
endif

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/common/%_avx2.o: CFLAGS += $(AVX2_FLAGS)
$(BUILD)/obj/common/%_avx512.o: CFLAGS += $(AVX512_FLAGS)
$(BUILD)/obj/common/%_neondot.o: CFLAGS += -march=armv8.2-a+dotprod
$(BUILD)/obj/common/%_i8mm.o: CFLAGS += -march=armv8.2-a+dotprod+i8mm
# Debian 12's aarch64 GCC 12.2 crashes vectorizing test_quant.c's fmax reductions (an internal
# compiler error in vect_transform_reduction): that file is built without the loop vectorizer there.
ifeq ($(CPU_ARCH),arm64)
$(BUILD)/obj/tests/test_quant.o: CFLAGS += -fno-tree-loop-vectorize
endif

$(BUILD)/obj/server/context/%.o: CFLAGS += $(shell pkg-config --cflags libxml-2.0 2>/dev/null)

# ---- the web UI, compiled in: web/index.html -> build/gen/webui.c (tools/embed.c; webui.h) ----
$(BUILD)/embed: tools/embed.c
	@mkdir -p $(dir $@)
	$(HOSTCC) $(CFLAGS) $(LDFLAGS) -o $@ $< -lcrypto

$(BUILD)/gen/webui.c: web/index.html $(BUILD)/embed
	@mkdir -p $(dir $@)
	$(BUILD)/embed --csp web/index.html webui_index_html $@

# ------------------------------------------------------------------------------------------------

# ---- the GPU kernels: server/gpu/shaders/NAME.comp -> SPIR-V -> build/gen/spv/NAME.c, and the
# table of them all (gpu_shaders.h) ----
$(BUILD)/gen/spv/%.spv: server/gpu/shaders/%.comp $(wildcard server/gpu/shaders/*.glsl)
	@mkdir -p $(dir $@)
	glslc --target-env=vulkan1.2 -O $(GLSLC_FLAGS) -o $@ $<

$(BUILD)/gen/spv/%.c: $(BUILD)/gen/spv/%.spv $(BUILD)/embed
	$(BUILD)/embed $< gpu_spv_$* $@

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# The kernels' names, rewritten only when the list changes: a kernel added (a file older than the
# table, from a checkout) or removed rebuilds the table.
$(BUILD)/gen/gpu_kernels.list: FORCE
	@mkdir -p $(dir $@)
	@echo '$(GPU_KERNELS)' | cmp -s - $@ || echo '$(GPU_KERNELS)' >$@

$(BUILD)/gen/gpu_shaders.c: $(wildcard server/gpu/shaders/*.comp) $(BUILD)/gen/gpu_kernels.list
	@mkdir -p $(dir $@)
	@{ echo '/* generated by the Makefile: every kernel of server/gpu/shaders (gpu_shaders.h) */'; \
	   echo '#include "gpu_shaders.h"'; \
	   for k in $(GPU_KERNELS); do \
	       echo "extern const unsigned char gpu_spv_$$k[]; extern const size_t gpu_spv_$${k}_len;"; done; \
	   echo 'const struct gpu_spirv gpu_spirv_table[] = {'; \
	   for k in $(GPU_KERNELS); do echo "    {\"$$k\", gpu_spv_$$k, &gpu_spv_$${k}_len},"; done; \
	   echo '    {0, 0, 0}};'; \
	   echo 'const int gpu_spirv_count = $(words $(GPU_KERNELS));'; } >$@

# gpu_none.c stands in for gpu.c where Vulkan is missing, and must define every function gpu.h
# declares: a Vulkan build checks it too (a missed one once broke only the builds without Vulkan,
# arm64's cross build among them, after the change had passed here).
$(BUILD)/gen/gpu_none.ok: $(BUILD)/obj/server/gpu/gpu_none.o server/gpu/gpu.h
	@mkdir -p $(dir $@)
	@sed -n 's/^[a-z][^(]*[ *]\(gpu_[a-z0-9_]*\)(.*/\1/p' server/gpu/gpu.h | sort -u >$@.want
	@nm --defined-only $< | awk '$$2 == "T" {print $$3}' | sort -u >$@.have
	@missing=$$(comm -23 $@.want $@.have); rm -f $@.want $@.have; \
	 if [ -n "$$missing" ]; then echo "gpu_none.c lacks what gpu.h declares: $$missing" >&2; exit 1; fi
	@touch $@

ifeq ($(VULKAN),1)
$(BUILD)/libsniper.a: $(BUILD)/gen/gpu_none.ok
endif
$(BUILD)/libsniper.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $(LIB_OBJ)
	@[ "$(VULKAN)" = 1 ] || echo "build: no Vulkan headers (libvulkan-dev) or no glslc: CPU only"

$(BUILD)/sniperd: $(BUILD)/obj/server/main.o $(BUILD)/libsniper.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The agent: agent/*.c and a few of common/ (err, paths, and hub and what it uses: `sniper pull`),
# linked with its own libraries (not libsniper.a).
AGENT_PKGS   := libcurl libuv libxml-2.0 libedit jansson libcrypto
AGENT_CFLAGS := $(shell pkg-config --cflags $(AGENT_PKGS) 2>/dev/null)
AGENT_LIBS   := $(shell pkg-config --libs $(AGENT_PKGS) 2>/dev/null)
AGENT_OBJ    := $(patsubst %.c,$(BUILD)/obj/%.o,$(filter-out agent/main.c,$(wildcard agent/*.c))) \
                $(patsubst %,$(BUILD)/obj/common/%.o,err paths hub download gguf qtype fault)
$(BUILD)/obj/agent/%.o: CFLAGS += -Iagent $(AGENT_CFLAGS)
$(BUILD)/obj/tests/test_agent_%.o: CFLAGS += -Iagent $(AGENT_CFLAGS)

$(BUILD)/sniper: $(BUILD)/obj/agent/main.o $(AGENT_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(AGENT_LIBS)

$(BUILD)/tests/test_agent_%: $(BUILD)/obj/tests/test_agent_%.o $(BUILD)/obj/tests/harness.o \
                             $(AGENT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(AGENT_LIBS)

# sniper-mkmodel writes the same bytes on every machine: no fused multiply-adds (clang fuses by
# default), so each float is rounded where the C source rounds it.
$(BUILD)/obj/tools/mkmodel.o: CFLAGS += -ffp-contract=off

$(BUILD)/sniper-mkmodel: $(BUILD)/obj/tools/mkmodel.o $(BUILD)/libsniper.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bench-%: $(BUILD)/obj/tools/bench_%.o $(BUILD)/libsniper.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(BUILD)/obj/tests/harness.o $(BUILD)/libsniper.a | $(BUILD)/sniper-mkmodel
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

deps:
	@scripts/deps.sh

test: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) tests/run.sh

test-arm64: # BUILD is the host's (its sniper-mkmodel writes the models); the arm64 build is build-arm64
	@BUILD=$(BUILD) ARM64_BUILD=build-arm64 tests/arm64.sh

check: deps
	@$(MAKE) --no-print-directory BUILD=build-check OPT=-O1 \
	    SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" all
	@BUILD=build-check SNIPER_CHECK=1 tests/run.sh

run: deps
	@$(MAKE) --no-print-directory $(BINS)
	@BUILD=$(BUILD) MODEL=$(MODEL) scripts/run.sh $(ARGS)

bench: deps
	@$(MAKE) --no-print-directory all
	@scripts/bench.sh

PREFIX ?= /usr/local
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/systemd/system $(DESTDIR)/etc/sniper
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	sed 's|/usr/local/bin/|$(PREFIX)/bin/|' systemd/sniperd.service \
	    >$(DESTDIR)$(PREFIX)/lib/systemd/system/sniperd.service
	[ -e $(DESTDIR)/etc/sniper/config.json ] || \
	    install -m 640 config.example.json $(DESTDIR)/etc/sniper/config.json

clean:
	rm -rf build build-check build-arm64 build-portable

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

FORCE:
