#!/usr/bin/env bash
# macos.sh - the macOS code that cannot run here, compiled for it: the OS layer's macOS files
# (common/os/*_darwin.c and the portable ones macOS builds) and the NEON kernels, with clang
# -target arm64-apple-macos and the project's warning flags, against the SDK stand-in of
# tests/macos/sdk (declarations only: no Apple SDK on Debian). One pass per file compiled. What
# this does not check: that Apple's headers declare the same (a build on a Mac does), linking, and
# running. Skips where clang is missing (scripts/deps.sh installs it).
set -uo pipefail
cd "$(dirname "$0")/.."
CLANG=${CLANG:-clang}
FILES=(common/os/io_darwin.c common/os/mem_darwin.c common/os/cpu_darwin.c common/os/pages_posix.c
       common/os/ring_none.c common/quant_neon.c common/quant_neondot.c common/quant_i8mm.c
       common/quant_iq_neon.c common/quant_iq_neondot.c common/quant_iq_i8mm.c)
if ! command -v "$CLANG" >/dev/null; then
    echo "SKIP macos: no $CLANG: the macOS files NOT compiled"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
out=$(mktemp -d)
p=0 f=0
for src in "${FILES[@]}"; do
    flags=()
    case $src in
        *_neondot.c) flags=(-march=armv8.2-a+dotprod) ;;
        *_i8mm.c) flags=(-march=armv8.2-a+dotprod+i8mm) ;;
    esac
    if "$CLANG" -target arm64-apple-macos13 -ffreestanding -nostdlibinc -isystem tests/macos/sdk \
            -std=c11 -O2 -Wall -Wextra -Werror -Wshadow -Wvla -ffp-contract=off -Icommon \
            "${flags[@]}" -c "$src" -o "$out/$(basename "$src" .c).o" 2>"$out/err"; then
        echo "ok     $src (arm64-apple-macos)"
        p=$((p + 1))
    else
        cat "$out/err"
        echo "not ok $src (arm64-apple-macos)"
        f=$((f + 1))
    fi
done
rm -rf "$out"
echo "$p passed, $f failed, 0 skipped"
[ "$f" -eq 0 ]
