#!/usr/bin/env bash
# Installs the packages the build and the tests need, when one is missing. On Debian as root it
# runs apt-get (arm64 multiarch added for tests/arm64.sh: the cross compiler, qemu-user and the
# arm64 libraries); otherwise it prints the one command to run and fails. On macOS it asks
# Homebrew (brew), which needs no root.
set -euo pipefail
if [ "$(uname -s)" = Darwin ]; then
    brew_pkgs=(pkg-config libmicrohttpd pcre2 jansson curl zstd libxml2 libuv libedit openssl python3)
    missing=()
    for p in "${brew_pkgs[@]}"; do
        brew list --versions "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && exit 0
    if ! command -v brew >/dev/null; then
        echo "deps: Homebrew (https://brew.sh) is needed for: ${missing[*]}" >&2
        exit 1
    fi
    echo "deps: brew install ${missing[*]}" >&2
    brew install "${missing[@]}"
    exit 0
fi
pkgs=(gcc make pkg-config libpcre2-dev libjansson-dev libcurl4-openssl-dev libmicrohttpd-dev
      libuv1-dev liburing-dev libzstd-dev libedit-dev libxml2-dev libssl-dev python3 python3-jinja2
      curl chromium haproxy tmux clang libvulkan-dev glslc mesa-vulkan-drivers)
# tests/arm64.sh: the linux-arm64 cross build of the CPU's tests, run under qemu-user
arm64_pkgs=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user libc6:arm64
            libmicrohttpd-dev:arm64 libpcre2-dev:arm64 libjansson-dev:arm64 libcurl4-openssl-dev:arm64
            libxml2-dev:arm64 libzstd-dev:arm64 liburing-dev:arm64 libssl-dev:arm64)
if [ "$(dpkg --print-architecture)" = amd64 ]; then
    pkgs+=("${arm64_pkgs[@]}")
fi
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
multiarch=
case " ${missing[*]}" in *:arm64*) dpkg --print-foreign-architectures | grep -qx arm64 ||
    multiarch="dpkg --add-architecture arm64 && " ;; esac
cmd="${multiarch}apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing packages: ${missing[*]}" >&2
    echo "deps: run as root: $cmd" >&2
    exit 1
fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
[ -n "$multiarch" ] && dpkg --add-architecture arm64
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
