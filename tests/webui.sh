#!/usr/bin/env bash
# The web UI in a real headless Chromium (Debian's /usr/bin/chromium driven by npm "playwright-core",
# installed once into $BUILD/npm) against two sniperd on 127.0.0.1 with a tiny model, one with an
# API key: tests/webui/webui_test.mjs. Saved contexts stay in the temp dir. Screenshots go to
# $BUILD/webui-screenshots. Skipped loudly without chromium, node or npm, or when the npm registry
# cannot be reached.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
skip() { echo "SKIP: $1: the web UI is NOT checked"; echo "0 passed, 0 failed, 1 skipped"; exit 0; }
[ -x /usr/bin/chromium ] || skip "/usr/bin/chromium absent (apt-get install chromium)"
. tests/lib/npm.sh
npm_need playwright-core playwright-core@1
TMP=$(mktemp -d /tmp/sniper-webui.XXXXXX)
SHOTS=$BUILD/webui-screenshots
mkdir -p "$SHOTS"
"$BUILD/sniper-mkmodel" --quiet --preset tiny --types q8_0 --seed 5 -o "$TMP/m.gguf"
# contexts saved through the page go to $TMP (HOME too, so nothing lands outside it)
# 32k positions: the stop check's long reply (30,000 tokens) fits
HOME=$TMP "$BUILD/sniperd" -m "$TMP/m.gguf" --port 0 --threads 2 --context-dir "$TMP/contexts" \
    --parallel 2 --ctx-size 32768 2>"$TMP/err1" &
pid1=$!
HOME=$TMP "$BUILD/sniperd" -m "$TMP/m.gguf" --port 0 --threads 2 --context-dir "$TMP/contexts2" \
    --api-key web-key 2>"$TMP/err2" &
pid2=$!
# a third serves a directory of models (two, and a file that is no model): the model picker
mkdir -p "$TMP/models"
cp "$TMP/m.gguf" "$TMP/models/alpha.gguf"
"$BUILD/sniper-mkmodel" --quiet --preset tiny-dense --types q8_0 --seed 6 -o "$TMP/models/beta.gguf"
echo "not a model" >"$TMP/models/broken.gguf"
HOME=$TMP "$BUILD/sniperd" --models-dir "$TMP/models" --port 0 --threads 2 \
    --context-dir "$TMP/contexts3" 2>"$TMP/err3" &
pid3=$!
# a fourth runs on the machine's Vulkan device by number (lavapipe in CI) on three levels: 2 of the
# 16 experts a layer in VRAM, the rest on the CPU through the expert cache (the device taken as a
# discrete card's: on unified memory the cache's slots would be read in place)
HOME=$TMP SNIPER_GPU_NO_MAP=1 "$BUILD/sniperd" -m "$TMP/m.gguf" --port 0 --threads 2 --context-dir "$TMP/contexts4" \
    --gpu 0 --gpu-budget 4M --ram-budget 160M --ctx-size 256 -b 16 2>"$TMP/err4" &
pid4=$!
trap 'kill $pid1 $pid2 $pid3 $pid4 2>/dev/null; wait $pid1 $pid2 $pid3 $pid4 2>/dev/null; [ -n "${KEEP_TMP:-}" ] || rm -rf "$TMP"' EXIT
# Prints the port of the daemon whose stderr is $1 once it is ready, or nothing.
port_of() {
    local port=
    for _ in $(seq 300); do
        port=$(sed -nE 's/.*listening on http:\/\/[^:]+:([0-9]+).*/\1/p' "$1")
        grep -q "ready" "$1" && [ -n "$port" ] && break
        sleep 0.05
    done
    grep -q "ready" "$1" && echo "$port"
}
port1=$(port_of "$TMP/err1")
port2=$(port_of "$TMP/err2")
port3=$(port_of "$TMP/err3")
if [ -z "$port1" ] || [ -z "$port2" ] || [ -z "$port3" ]; then
    echo "FAIL   sniperd did not start: $(cat "$TMP/err1" "$TMP/err2" "$TMP/err3")"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
# the GPU's panel is checked only where the fourth came up on three levels (a build or a machine
# without Vulkan runs it on the CPU: the test says it skipped)
port4=$(port_of "$TMP/err4")
gpu_url=
grep -q "routed experts: 2 of 16 a layer in VRAM" "$TMP/err4" && [ -n "$port4" ] &&
    gpu_url="http://127.0.0.1:$port4"
cp tests/webui/webui_test.mjs "$NPM_DIR/webui_test.mjs"
timeout 120 node "$NPM_DIR/webui_test.mjs" "http://127.0.0.1:$port1" "http://127.0.0.1:$port2" \
    web-key "$(cd "$SHOTS" && pwd)" "http://127.0.0.1:$port3" "$gpu_url"
