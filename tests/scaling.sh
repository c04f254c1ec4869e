#!/usr/bin/env bash
# Two sniperd replicas behind Debian's HAProxy running deploy/haproxy.cfg as it is, sharing the
# moto S3 server as their context store when moto is installed (tests/scaling/scaling_test.py).
# Skips loudly when haproxy is not installed.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
if ! command -v haproxy >/dev/null 2>&1; then
    echo "************************************************************************"
    echo "* SKIP: haproxy is not installed: replicas behind a balancer NOT checked *"
    echo "************************************************************************"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
TMP=$(mktemp -d /tmp/sniper-scaling.XXXXXX)
. tests/s3/moto.sh
cleanup() { moto_stop; rm -rf "$TMP"; }
trap cleanup EXIT
moto_start "$TMP" && export MOTO_URL MOTO_AK MOTO_SK
python3 tests/scaling/scaling_test.py "$BUILD" "$TMP"
