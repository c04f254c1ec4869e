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
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
INITIAL_NO_AUTH_ACTION_COUNT=3 moto_server -H 127.0.0.1 -p "$port" >"$work/moto.log" 2>&1 &
moto_pid=$!
cleanup() { kill "$moto_pid" 2>/dev/null; wait "$moto_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 1 100); do   # a TCP connect, not a request: requests count against the 3
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
done

keys=$(python3 - "$port" <<'PY'
import json, sys, boto3
url = "http://127.0.0.1:%s" % sys.argv[1]
iam = boto3.client("iam", endpoint_url=url, region_name="us-east-1",
                   aws_access_key_id="setup", aws_secret_access_key="setup")
iam.create_user(UserName="sniper")
iam.put_user_policy(UserName="sniper", PolicyName="all", PolicyDocument=json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
k = iam.create_access_key(UserName="sniper")["AccessKey"]
s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1",
                  aws_access_key_id=k["AccessKeyId"], aws_secret_access_key=k["SecretAccessKey"])
s3.create_bucket(Bucket="sniper-contexts")
print(k["AccessKeyId"], k["SecretAccessKey"])
PY
) || { cat "$work/moto.log"; echo "s3.sh: setting moto up failed"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
read -r ak sk <<<"$keys"

unset R2_ENDPOINT R2_BUCKET R2_ACCESS_KEY R2_SECRET_KEY
SNIPER_S3_ENDPOINT="http://127.0.0.1:$port" SNIPER_S3_BUCKET=sniper-contexts \
SNIPER_S3_ACCESS_KEY="$ak" SNIPER_S3_SECRET_KEY="$sk" SNIPER_S3_REGION=us-east-1 \
    "$BUILD/tests/test_s3" --live
