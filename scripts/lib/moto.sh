# Raw evidence in an S3 bucket for the load scripts: `moto_start` runs moto's S3-protocol server
# (PyPI `moto[server]`: the Python that has it — RENTCHECK_TEST_PYTHON, the virtual environment
# scripts/test.sh makes, or python3 — else installed into that virtual environment, since Debian's
# python3 refuses `pip install` outside one) on a free loopback port, creates a bucket and
# exports RENTCHECK_EVIDENCE_STORE and the AWS_* variables, so a server started afterwards keeps
# raw bytes there. moto here runs without authentication (its default); the integration tests are
# where signatures and the bucket policy are checked. `moto_stop` ends it. Needs WORK (a scratch
# directory).

MOTO_PID=""

moto_start() {
    local venv=${RENTCHECK_TEST_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/rentcheck/test-venv}
    local python="" candidate port
    for candidate in "${RENTCHECK_TEST_PYTHON:-}" "$venv/bin/python3" "$(command -v python3 || true)"; do
        if [ -n "$candidate" ] && "$candidate" -c 'import moto.server' 2>/dev/null; then
            python=$candidate
            break
        fi
    done
    if [ -z "$python" ]; then
        python3 -m venv "$venv" && "$venv/bin/python3" -m pip install --quiet 'moto[server]==5.2.1'
        python=$venv/bin/python3
    fi
    port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$python" -m moto.server -H 127.0.0.1 -p "$port" >"$WORK/moto.log" 2>&1 &
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
