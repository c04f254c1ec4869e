#!/usr/bin/env bash
# `make run`: serves a model with sniperd on http://127.0.0.1:8000: the one given as MODEL=path,
# else a small default model generated once by sniper-mkmodel into models/. Extra arguments go to
# sniperd (ARGS="--port 9000 --ram-budget 4G ...", or a prompt: ARGS='-p "Hello" -n 32').
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
model=${MODEL:-models/tiny-qwen3moe-q8_0.gguf}
if [ ! -f "$model" ]; then
    mkdir -p "$(dirname "$model")"
    echo "run: generating the default model $model (random weights: the text will be gibberish)" >&2
    "$BUILD/sniper-mkmodel" --preset tiny --types q8_0 --seed 1 -o "$model"
fi
cat >&2 <<'HELP'
run: talk to it with, for example,
  curl http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' \
       -d '{"messages":[{"role":"user","content":"Hello"}],"max_tokens":32}'
  build/sniper "Hello"            (the agent's default server is this one)
  (docs/api.md lists every endpoint; Ctrl-C stops the daemon)
HELP
exec "$BUILD/sniperd" -m "$model" "$@"
