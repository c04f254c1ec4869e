#!/usr/bin/env bash
# /v1/context end to end (tests/contexts/contexts_test.py) against the real sniperd; with a local
# moto_server (and boto3) also upload and download, else that part is skipped loudly.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TMP=$(mktemp -d /tmp/sniper-ctx.XXXXXX)
. tests/s3/moto.sh
cleanup() { moto_stop; rm -rf "$TMP"; }
trap cleanup EXIT
s3=()
moto_start "$TMP" && s3=("$MOTO_URL" sniper-contexts "$MOTO_AK" "$MOTO_SK")
unset SNIPER_S3_ENDPOINT SNIPER_S3_BUCKET SNIPER_S3_ACCESS_KEY SNIPER_S3_SECRET_KEY R2_ENDPOINT \
    R2_BUCKET R2_ACCESS_KEY R2_SECRET_KEY
python3 tests/contexts/contexts_test.py "$BUILD" "$TMP" "${s3[@]}"
