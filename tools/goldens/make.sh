#!/usr/bin/env bash
# tools/goldens/make.sh - rebuilds the golden corpus of tests/golden from scratch and prints how it
# differs from what is committed. Opt-in, for a developer: never run by `make`, `make test` or CI
# (it builds llama.cpp, which the project does not ship or vendor). tests/golden/README.md says
# when to rerun it.
#
#   tools/goldens/make.sh [--write] [--only REGEX] [--jobs N]
#
# 1. llama.cpp at the pinned commit LLAMA_COMMIT, OUTSIDE this repository ($LLAMA_DIR, default
#    ../llama.cpp): cloned from $LLAMA_REPO if absent (an existing checkout must already be at that
#    commit), configured with GGML_NATIVE, library target `llama` built in $LLAMA_DIR/build; its
#    CPU backend built again for AVX2 only (no AVX-512) in $LLAMA_DIR/build-avx2 and without SIMD
#    in $LLAMA_DIR/build-generic; and the library cross-built for arm64 in $LLAMA_DIR/build-arm64
#    (where the cross compiler and qemu-user are installed).
# 2. tools/goldens/dump.c and tools/goldens/tokenize.c (against llama.h) and tools/goldens/xxh64.c,
#    built into $WORK.
# 3. Every model of the corpus (the ARCHS x MIXES below) written by build/sniper-mkmodel; each
#    prompt of tests/golden/prompts run through dump; corpus.txt written with each model's XXH64;
#    first_builds.txt: for every golden, how far the other builds' first rows land from it (dump
#    --first with each of them), llama.cpp's spread between its own builds.
# 3b. The gemma4 tokenizer vectors (tests/tokenizer/gemma4*.out) by tools/goldens/tokenize; 3c.
#    those on Gemma 4's own vocabulary (gemma4-vocab*.out) where one is at hand.
# 4. Diff: every regenerated file compared with the committed one (cmp); --write copies the new
#    corpus over tests/golden (goldens, corpus.txt and first_builds.txt; prompts and README are not
#    touched).
# Exits 0 when the corpus is identical (or was written), 1 when it differs, 2 on a failure.
set -euo pipefail
cd "$(dirname "$0")/../.."

# The pin: llama.cpp's commit the shared fixtures' goldens were made with (../shared/fixtures/
# README.md), so the corpus and the shared fixtures describe the same reference.
LLAMA_COMMIT=34af94cd9ab277632e27caeec2d41de2fd091b31
LLAMA_REPO=${LLAMA_REPO:-https://github.com/ggml-org/llama.cpp}
LLAMA_DIR=${LLAMA_DIR:-$(cd .. && pwd)/llama.cpp}
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/goldens-XXXXXX")}
mkdir -p "$WORK"
BUILD=${BUILD:-build}
WRITE=0 ONLY=. JOBS=2
while [ $# -gt 0 ]; do
    case $1 in
    --write) WRITE=1 ;;
    --only) ONLY=$2; shift ;;
    --jobs) JOBS=$2; shift ;;
    *) echo "usage: $0 [--write] [--only REGEX] [--jobs N]" >&2; exit 2 ;;
    esac
    shift
done

# The corpus: architecture, the sniper-mkmodel arguments of its shape, and a seed of its own;
# optionally a third field, the mixes to make (default: every mix below).
# Shapes are tiny (2 layers; the hybrids 4, for their attention layer) but 256 wide with 256-wide
# FFN rows, so the K- and i-quants fill whole blocks and no mix falls back (except qwen35moe's
# shared expert, 64 wide, as in the real models' ratio; and gemma4-ple's per-layer projection,
# 128 wide, which Q4_K_M writes as Q5_0, llama-quantize's fallback).
ARCHS=(
    "qwen35moe|--preset tiny-qwen35moe --n-expert 4 --n-expert-used 2 --n-ff-exp 256 --seed 104"
    "qwen3moe|--preset tiny --n-layer 2 --n-expert 4 --n-expert-used 2 --n-ff-exp 256 --seed 101"
    "qwen3|--preset tiny-dense --n-layer 2 --n-ff 256 --seed 102"
    "llama|--preset tiny-dense --arch llama --n-layer 2 --n-ff 256 --seed 103"
    "qwen35|--preset tiny-qwen35 --seed 105"
    "gpt-oss|--preset tiny-gpt-oss --n-embd 256 --n-layer 2 --n-expert 4 --n-expert-used 2 --n-ff-exp 256 --seed 106"
    "gemma4|--preset tiny-gemma4 --seed 107"
    "gemma4|--preset tiny-gemma4-ple --seed 108|f32 q4_k_m"
)
# Every --types mix of sniper-mkmodel (llama-quantize's recipes; f16/bf16 the converter's); the
# experts-only mxfp4_moe on the MoE architectures only (on a dense model it is q8_0).
MIXES="f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k_m q4_k_m q5_k_m q6_k iq1_s iq1_m iq2_xxs
iq2_xs iq2_m iq3_xxs iq3_m iq4_nl iq4_xs"
MOE_MIXES="mxfp4_moe"

die() { echo "goldens: $*" >&2; exit 2; }

# ---- 1. llama.cpp at the pin ----
if [ ! -e "$LLAMA_DIR" ]; then
    git clone --quiet "$LLAMA_REPO" "$LLAMA_DIR" || die "cannot clone $LLAMA_REPO"
    git -C "$LLAMA_DIR" checkout --quiet "$LLAMA_COMMIT" || die "no commit $LLAMA_COMMIT"
fi
if [ ! -f "$LLAMA_DIR/build/bin/libllama.so" ] && [ ! -f "$LLAMA_DIR/build/src/libllama.so" ]; then
    cmake -S "$LLAMA_DIR" -B "$LLAMA_DIR/build" -DGGML_NATIVE=ON -DCMAKE_BUILD_TYPE=Release \
        -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF >/dev/null || die "cmake configure failed"
    cmake --build "$LLAMA_DIR/build" -j "$JOBS" --target llama >/dev/null || die "build failed"
fi
LIBDIR=$(dirname "$(find "$LLAMA_DIR/build" -name 'libllama.so' | head -n 1)")
[ -n "$LIBDIR" ] || die "no libllama.so under $LLAMA_DIR/build"
# llama.cpp's other builds of the same sources, for its spread between builds at the first position
# (first_builds.txt): its CPU backend for AVX2 only (its SIMD exp, and vec_dot_f32's 8-wide steps
# where the native AVX-512 build takes 16) and without any SIMD (generic x86: the scalar kernels),
# each loaded in place of the native libggml-cpu by LD_LIBRARY_PATH; and the whole library for
# arm64 (NEON with the dot-product extension, as on Apple's M1), cross-built and run under
# qemu-user, where aarch64-linux-gnu-g++, qemu-aarch64 and libjansson:arm64 are installed.
LLAMA_OFF="-DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
-DLLAMA_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF"
cpu_build() { # DIR CMAKE-FLAGS...: the x86 CPU backend built with those flags, once
    local dir=$1; shift
    [ -f "$dir/bin/libggml-cpu.so" ] && return 0
    cmake -S "$LLAMA_DIR" -B "$dir" $LLAMA_OFF "$@" >/dev/null &&
        cmake --build "$dir" -j "$JOBS" --target ggml-cpu >/dev/null
}
AVX2_BUILD=${AVX2_BUILD:-$LLAMA_DIR/build-avx2}
GENERIC_BUILD=${GENERIC_BUILD:-$LLAMA_DIR/build-generic}
ARM64_BUILD=${ARM64_BUILD:-$LLAMA_DIR/build-arm64}
cpu_build "$AVX2_BUILD" -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
    -DGGML_AVX512=OFF || die "avx2 build failed"
cpu_build "$GENERIC_BUILD" -DGGML_SSE42=OFF -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF \
    -DGGML_F16C=OFF -DGGML_BMI2=OFF -DGGML_AVX512=OFF || die "generic build failed"
ARM64=0
if command -v aarch64-linux-gnu-g++ >/dev/null && command -v qemu-aarch64 >/dev/null &&
   [ -e /usr/lib/aarch64-linux-gnu/libjansson.so ]; then
    if [ ! -f "$ARM64_BUILD/bin/libllama.so" ]; then
        printf '%s\n' "set(CMAKE_SYSTEM_NAME Linux)" "set(CMAKE_SYSTEM_PROCESSOR aarch64)" \
            "set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)" "set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)" \
            "set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)" >"$WORK/aarch64.cmake"
        cmake -S "$LLAMA_DIR" -B "$ARM64_BUILD" $LLAMA_OFF -DCMAKE_TOOLCHAIN_FILE="$WORK/aarch64.cmake" \
            -DGGML_OPENMP=OFF -DGGML_CPU_ARM_ARCH=armv8.2-a+dotprod >/dev/null &&
            cmake --build "$ARM64_BUILD" -j "$JOBS" --target llama >/dev/null || die "arm64 build failed"
    fi
    ARM64=1
else
    echo "note: no aarch64-linux-gnu-g++, qemu-aarch64 or libjansson:arm64: first_builds.txt's arm64" \
         "column is '-' (apt-get install g++-aarch64-linux-gnu qemu-user libjansson-dev:arm64)"
fi

# ---- 2. the two helpers ----
cc -O2 -std=c11 -D_GNU_SOURCE -I"$LLAMA_DIR/include" -I"$LLAMA_DIR/ggml/include" \
    tools/goldens/dump.c -o "$WORK/dump" -L"$LIBDIR" -Wl,-rpath,"$LIBDIR" -lllama -ljansson -lm \
    || die "cannot build dump"
if [ "$ARM64" = 1 ]; then
    aarch64-linux-gnu-gcc -O2 -std=c11 -D_GNU_SOURCE -I"$LLAMA_DIR/include" -I"$LLAMA_DIR/ggml/include" \
        tools/goldens/dump.c -o "$WORK/dump-arm64" -L"$ARM64_BUILD/bin" -Wl,-rpath,"$ARM64_BUILD/bin" \
        -lllama -ljansson -lm || die "cannot build dump for arm64"
fi
cc -O2 -std=c11 -Icommon tools/goldens/xxh64.c common/hash64.c -o "$WORK/xxh64" \
    || die "cannot build xxh64"
cc -O2 -std=c11 -D_GNU_SOURCE -I"$LLAMA_DIR/include" -I"$LLAMA_DIR/ggml/include" \
    tools/goldens/tokenize.c -o "$WORK/tokenize" -L"$LIBDIR" -Wl,-rpath,"$LIBDIR" -lllama \
    || die "cannot build tokenize"
[ -x "$BUILD/sniper-mkmodel" ] || make -j "$JOBS" "$BUILD/sniper-mkmodel" >/dev/null

# ---- 3. models and goldens ----
mkdir -p "$WORK/golden" "$WORK/models"
{
    echo "# The golden corpus (tests/golden/README.md): ARCH NAME XXH64 SNIPER-MKMODEL-ARGS."
    echo "# Written by tools/goldens/make.sh with llama.cpp $LLAMA_COMMIT; do not edit by hand."
} >"$WORK/corpus.txt"
{
    echo "# llama.cpp's spread between its own builds at the first position (tests/golden/README.md):"
    echo "# GOLDEN AVX2 GENERIC ARM64: max|that build's first row - the golden's| (AVX2: x86 AVX2"
    echo "# only; GENERIC: x86 without SIMD; ARM64: NEON + dotprod under qemu-user; '-': not built)."
    echo "# Written by tools/goldens/make.sh; do not edit by hand."
} >"$WORK/first_builds.txt"
for entry in "${ARCHS[@]}"; do
    arch=${entry%%|*} shape=${entry#*|} only_mixes=
    case $shape in *"|"*) only_mixes=${shape#*|} shape=${shape%%|*} ;; esac
    mixes=$MIXES
    case $arch in qwen3moe|qwen35moe|gpt-oss|gemma4) mixes="$MIXES $MOE_MIXES" ;; esac
    [ -n "$only_mixes" ] && mixes=$only_mixes
    # the model's name: the architecture and, for a second shape of it, the preset's suffix
    tag=$arch
    case $shape in *"--preset tiny-$arch-"*) tag=$arch-${shape#*--preset tiny-$arch-}
                                              tag=${tag%% *} ;; esac
    for mix in $mixes; do
        name=$tag-$mix
        args="$shape --types $mix"
        model=$WORK/models/$name.gguf
        "$BUILD/sniper-mkmodel" --quiet -o "$model" $args || die "sniper-mkmodel $args failed"
        hash=$("$WORK/xxh64" "$model" | cut -d' ' -f1)
        echo "$arch $name $hash $args" >>"$WORK/corpus.txt"
        if echo "$name" | grep -Eq -- "$ONLY"; then
            for p in tests/golden/prompts/*.txt; do
                pn=$(basename "$p" .txt)
                "$WORK/dump" "$model" "$p" "$WORK/golden/${name}__$pn" || die "dump $name $pn failed"
            done
            echo "  $name"
        fi
        for p in tests/golden/prompts/*.txt; do
            g=${name}__$(basename "$p" .txt)
            gold=$WORK/golden/$g
            [ -f "$gold.json" ] || gold=tests/golden/$g
            v1=$(LD_LIBRARY_PATH=$AVX2_BUILD/bin "$WORK/dump" --first "$model" "$p" "$gold") &&
                v2=$(LD_LIBRARY_PATH=$GENERIC_BUILD/bin "$WORK/dump" --first "$model" "$p" "$gold") ||
                die "dump --first $g failed"
            v3=-
            if [ "$ARM64" = 1 ]; then
                v3=$(qemu-aarch64 -L /usr/aarch64-linux-gnu "$WORK/dump-arm64" --first "$model" "$p" \
                     "$gold") || die "dump --first $g (arm64) failed"
            fi
            echo "$g $v1 $v2 $v3" >>"$WORK/first_builds.txt"
        done
        rm -f "$model"
    done
done

# ---- 3b. the gemma4 tokenizer vectors (tests/tokenizer/README.md): llama.cpp's ids on the
# --vocab gemma4 vocabulary for our strings and for its own test strings (../shared) ----
mkdir -p "$WORK/tokenizer"
"$BUILD/sniper-mkmodel" --quiet --preset tiny-gemma4 --vocab gemma4 -o "$WORK/models/g4vocab.gguf" \
    || die "sniper-mkmodel --vocab gemma4 failed"
"$WORK/tokenize" "$WORK/models/g4vocab.gguf" tests/tokenizer/gemma4.inp \
    >"$WORK/tokenizer/gemma4.out" || die "tokenize gemma4.inp failed"
QWEN3_INP=../shared/fixtures/tokenizer/ggml-vocab-qwen3.gguf.inp
if [ -f "$QWEN3_INP" ]; then
    "$WORK/tokenize" "$WORK/models/g4vocab.gguf" "$QWEN3_INP" \
        >"$WORK/tokenizer/gemma4-llamacpp.out" || die "tokenize $QWEN3_INP failed"
fi
rm -f "$WORK/models/g4vocab.gguf"

# ---- 3c. the vectors on Gemma 4's own vocabulary (tests/tokenizer/gemma4-vocab*.out): the GGUF
# named by $SNIPER_GEMMA4_GGUF, else the one tests/gemma4vocab.sh leaves in $BUILD/gemma4vocab ----
G4_VOCAB=${SNIPER_GEMMA4_GGUF:-$BUILD/gemma4vocab/vocab.gguf}
if [ -f "$G4_VOCAB" ]; then
    "$WORK/tokenize" "$G4_VOCAB" tests/tokenizer/gemma4.inp >"$WORK/tokenizer/gemma4-vocab.out" &&
    "$WORK/tokenize" --special "$G4_VOCAB" tests/tokenizer/gemma4-chat.inp \
        >"$WORK/tokenizer/gemma4-vocab-chat.out" &&
    "$WORK/tokenize" "$G4_VOCAB" tests/tokenizer/gemma4-chat.inp \
        >"$WORK/tokenizer/gemma4-vocab-chat-plain.out" || die "tokenize on $G4_VOCAB failed"
    if [ -f "$QWEN3_INP" ]; then
        "$WORK/tokenize" "$G4_VOCAB" "$QWEN3_INP" >"$WORK/tokenizer/gemma4-vocab-llamacpp.out" ||
            die "tokenize $QWEN3_INP on $G4_VOCAB failed"
    fi
else
    echo "note: no Gemma 4 vocabulary ($G4_VOCAB): tests/tokenizer/gemma4-vocab*.out not remade" \
        "(run tests/gemma4vocab.sh first, or set SNIPER_GEMMA4_GGUF)"
fi

# ---- 4. the diff ----
differ=0
for f in "$WORK"/tokenizer/*; do
    [ -e "$f" ] || continue
    cmp -s "$f" "tests/tokenizer/$(basename "$f")" || { echo "differs: tokenizer/$(basename "$f")"; differ=1; }
done
if ! cmp -s "$WORK/corpus.txt" tests/golden/corpus.txt; then
    echo "corpus.txt differs:"; diff tests/golden/corpus.txt "$WORK/corpus.txt" | head -n 20 || true
    differ=1
fi
if ! cmp -s "$WORK/first_builds.txt" tests/golden/first_builds.txt; then
    echo "first_builds.txt differs:"
    diff tests/golden/first_builds.txt "$WORK/first_builds.txt" | head -n 20 || true
    differ=1
fi
for f in "$WORK"/golden/*; do
    [ -e "$f" ] || continue
    b=$(basename "$f")
    if ! cmp -s "$f" "tests/golden/$b"; then
        echo "differs: $b"
        differ=1
    fi
done
if [ "$ONLY" = . ]; then
    for f in tests/golden/*.json tests/golden/*.logits.i16; do
        [ -e "$f" ] && [ ! -e "$WORK/golden/$(basename "$f")" ] && { echo "gone: $f"; differ=1; }
    done
fi
if [ "$WRITE" = 1 ]; then
    for f in "$WORK"/golden/*; do [ -e "$f" ] && cp "$f" tests/golden/; done
    cp "$WORK/corpus.txt" "$WORK/first_builds.txt" tests/golden/
    for f in "$WORK"/tokenizer/*; do [ -e "$f" ] && cp "$f" tests/tokenizer/; done
    echo "goldens: written to tests/golden ($WORK kept)"
    exit 0
fi
[ "$differ" = 0 ] && echo "goldens: identical to the committed corpus" && rm -rf "$WORK"
exit "$differ"
