# Raw evidence in an S3 bucket for the load scripts: `moto_start` runs moto's S3-protocol server
# (PyPI `moto[server]`, installed when missing) on a free loopback port, creates a bucket and
# exports RENTCHECK_EVIDENCE_STORE and the AWS_* variables, so a server started afterwards keeps
# raw bytes there. moto here runs without authentication (its default); the integration tests are
# where signatures and the bucket policy are checked. `moto_stop` ends it. Needs WORK (a scratch
# directory).

MOTO_PID=""

moto_start() {
    python3 -c 'import moto.server' 2>/dev/null || python3 -m pip install --quiet 'moto[server]==5.2.1'
    local port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    python3 -m moto.server -H 127.0.0.1 -p "$port" >"$WORK/moto.log" 2>&1 &
    MOTO_PID=$!
    for _ in $(seq 1 100); do
        curl -fsS -o /dev/null "http://127.0.0.1:$port/moto-api/" 2>/dev/null && break
        sleep 0.2
    done
    curl -fsS -o /dev/null -X PUT "http://127.0.0.1:$port/rentcheck-evidence" \
        || { echo "moto did not start: $(tail -n 5 "$WORK/moto.log")" >&2; exit 1; }
    export RENTCHECK_EVIDENCE_STORE="s3://rentcheck-evidence/bench"
    export AWS_ENDPOINT="http://127.0.0.1:$port" AWS_ALLOW_HTTP=true AWS_REGION=us-east-1
    export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench
}

moto_stop() {
    if [ -n "$MOTO_PID" ]; then
        kill "$MOTO_PID" 2>/dev/null || true
        wait "$MOTO_PID" 2>/dev/null || true
    fi
    MOTO_PID=""
}
