#!/usr/bin/env bash
# /v1/context end to end (tests/contexts/contexts_test.py) against the real sniperd; with a local
# moto_server (and boto3) also upload and download, else that part is skipped loudly.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TMP=$(mktemp -d /tmp/sniper-ctx.XXXXXX)
moto_pid=
cleanup() { [ -n "$moto_pid" ] && kill "$moto_pid" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
s3=()
if command -v moto_server >/dev/null 2>&1 && python3 -c 'import boto3' 2>/dev/null; then
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    INITIAL_NO_AUTH_ACTION_COUNT=3 moto_server -H 127.0.0.1 -p "$port" >"$TMP/moto.log" 2>&1 &
    moto_pid=$!
    for _ in $(seq 1 100); do
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
boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id=k["AccessKeyId"],
             aws_secret_access_key=k["SecretAccessKey"]).create_bucket(Bucket="sniper-contexts")
print(k["AccessKeyId"], k["SecretAccessKey"])
PY
    ) && { read -r ak sk <<<"$keys"; s3=("http://127.0.0.1:$port" sniper-contexts "$ak" "$sk"); }
fi
unset SNIPER_S3_ENDPOINT SNIPER_S3_BUCKET SNIPER_S3_ACCESS_KEY SNIPER_S3_SECRET_KEY R2_ENDPOINT \
    R2_BUCKET R2_ACCESS_KEY R2_SECRET_KEY
python3 tests/contexts/contexts_test.py "$BUILD" "$TMP" "${s3[@]}"
