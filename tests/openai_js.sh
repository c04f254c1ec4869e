#!/usr/bin/env bash
# The official OpenAI JavaScript client (npm "openai", installed once into $BUILD/npm) against the
# real sniperd on a tiny model: tests/openai_js/client_test.mjs. Skipped loudly without node/npm or
# when the npm registry cannot be reached.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
skip() { echo "SKIP: $1: the OpenAI JavaScript client is NOT checked"; echo "0 passed, 0 failed, 1 skipped"; exit 0; }
. tests/lib/npm.sh
npm_need openai openai@4
TMP=$(mktemp -d /tmp/sniper-js.XXXXXX)
"$BUILD/sniper-mkmodel" --quiet --preset tiny --types q8_0 --seed 5 -o "$TMP/m.gguf"
"$BUILD/sniperd" -m "$TMP/m.gguf" --port 0 --threads 2 --api-key js-key 2>"$TMP/err" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; [ -n "${KEEP_TMP:-}" ] || rm -rf "$TMP"' EXIT
port=
for _ in $(seq 300); do
    port=$(sed -nE 's/.*listening on http:\/\/[^:]+:([0-9]+).*/\1/p' "$TMP/err")
    grep -q "ready" "$TMP/err" && [ -n "$port" ] && break
    sleep 0.05
done
[ -n "$port" ] || { echo "FAIL   sniperd did not start: $(cat "$TMP/err")"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
cp tests/openai_js/client_test.mjs "$NPM_DIR/client_test.mjs"
node "$NPM_DIR/client_test.mjs" "http://127.0.0.1:$port/v1" js-key
