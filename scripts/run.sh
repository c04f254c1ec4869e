#!/usr/bin/env bash
# `make run`: runs sniperd on a model: the one given as MODEL=path, else a small default model
# generated once by sniper-mkmodel into models/. Extra arguments go to sniperd (ARGS="...").
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
model=${MODEL:-models/tiny-qwen3moe-q8_0.gguf}
if [ ! -f "$model" ]; then
    mkdir -p "$(dirname "$model")"
    echo "run: generating the default model $model (random weights: the text will be gibberish)" >&2
    "$BUILD/sniper-mkmodel" --preset tiny --types q8_0 --seed 1 -o "$model"
fi
if [ $# -eq 0 ]; then
    set -- -p "<|im_start|>user
Hello, who are you?<|im_end|>
<|im_start|>assistant
" -n 48
fi
exec "$BUILD/sniperd" -m "$model" "$@"
