#!/usr/bin/env bash
# s3.sh - the S3 client (build/tests/test_s3 --live) against a real local moto_server: an IAM user
# and key are made with boto3 while moto still answers unsigned requests
# (INITIAL_NO_AUTH_ACTION_COUNT), after which every request must be signed right. Without
# moto_server or boto3 (CI) it skips loudly and never fails.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
skip() {
    echo "************************************************************************"
    echo "* SKIP: $* "
    echo "************************************************************************"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
}
command -v moto_server >/dev/null 2>&1 || skip "moto_server is not installed: S3 client untested"
python3 -c 'import boto3' 2>/dev/null || skip "python3 boto3 is missing: S3 client untested"
[ -x "$BUILD/tests/test_s3" ] || { echo "s3.sh: $BUILD/tests/test_s3 missing"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }

work=$(mktemp -d)
. tests/s3/moto.sh
cleanup() { moto_stop; rm -rf "$work"; }
trap cleanup EXIT
moto_start "$work" ||
    { cat "$work/moto.log"; echo "s3.sh: setting moto up failed"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
port=${MOTO_URL##*:} ak=$MOTO_AK sk=$MOTO_SK

unset R2_ENDPOINT R2_BUCKET R2_ACCESS_KEY R2_SECRET_KEY
SNIPER_S3_ENDPOINT="http://127.0.0.1:$port" SNIPER_S3_BUCKET=sniper-contexts \
SNIPER_S3_ACCESS_KEY="$ak" SNIPER_S3_SECRET_KEY="$sk" SNIPER_S3_REGION=us-east-1 \
    "$BUILD/tests/test_s3" --live
