# moto.sh - sourced by tests/s3.sh and tests/contexts.sh: moto_start DIR starts a local
# moto_server that checks signatures after its first 3 requests, makes an IAM user with a key and
# the bucket sniper-contexts (boto3, unsigned while moto still allows it), and sets MOTO_URL,
# MOTO_AK, MOTO_SK and MOTO_PID. Returns non-zero (setting nothing) when moto_server or boto3 is
# missing or the setup failed (its log stays in DIR/moto.log). moto_stop ends it.
moto_start() {
    local dir=$1 port keys
    command -v moto_server >/dev/null 2>&1 && python3 -c 'import boto3' 2>/dev/null || return 1
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    INITIAL_NO_AUTH_ACTION_COUNT=3 moto_server -H 127.0.0.1 -p "$port" >"$dir/moto.log" 2>&1 &
    MOTO_PID=$!
    for _ in $(seq 1 100); do # a TCP connect, not a request: requests count against the 3
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
    ) || { moto_stop; return 1; }
    read -r MOTO_AK MOTO_SK <<<"$keys"
    MOTO_URL="http://127.0.0.1:$port"
}

moto_stop() {
    [ -n "${MOTO_PID:-}" ] && kill "$MOTO_PID" 2>/dev/null && wait "$MOTO_PID" 2>/dev/null
    MOTO_PID=
}
