#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need, when one is missing.
# As root it runs apt-get; otherwise it prints the one command to run and fails.
set -euo pipefail
pkgs=(gcc make pkg-config libpcre2-dev libjansson-dev libcurl4-openssl-dev libmicrohttpd-dev
      libuv1-dev liburing-dev libzstd-dev libedit-dev libxml2-dev libssl-dev python3 python3-jinja2
      curl chromium haproxy tmux libvulkan-dev glslc mesa-vulkan-drivers)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
cmd="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing packages: ${missing[*]}" >&2
    echo "deps: run as root: $cmd" >&2
    exit 1
fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
