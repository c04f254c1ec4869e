#!/usr/bin/env bash
# chat.sh - renders the chat-template test conversations again with jinja2 from the real templates
# and checks tests/chat/expected.json (what test_chat compares chat_render with) has not drifted.
# Skipped loudly when python3's jinja2 or the fixtures are absent.
set -uo pipefail
cd "$(dirname "$0")/.."
fixtures=${SNIPER_FIXTURES:-../shared/fixtures}
if ! python3 -c 'import jinja2' 2>/dev/null; then
    echo "SKIP: python3 jinja2 absent: tests/chat/expected.json not re-rendered"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
if [ ! -f "$fixtures/models/tiny-qwen3moe-q8_0.gguf" ]; then
    echo "SKIP: fixtures absent: tests/chat/expected.json not re-rendered"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
python3 tests/chat/gen_expected.py --check
