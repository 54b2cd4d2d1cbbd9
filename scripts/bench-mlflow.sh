#!/usr/bin/env bash
# rentcheck ingest beside the MLflow tracking server's log-batch, on the same PostgreSQL, in
# alternating rounds (the target: rentcheck ingests at least 20 × MLflow's rate; figures in docs/benchmarks.md).
#
#   python3 -m venv /tmp/mlflow-venv && /tmp/mlflow-venv/bin/pip install mlflow psycopg2-binary
#   MLFLOW=/tmp/mlflow-venv/bin/mlflow scripts/bench-mlflow.sh
#   DURATION=20 ROUNDS=3 MLFLOW=... scripts/bench-mlflow.sh
#
# Both sides take the same payload, 55 numeric metrics (about 2 KB of JSON), at 64 connections:
#   rentcheck: POST /api/v1/briefs/{id}/evidence, a `metrics` envelope (agent token);
#   MLflow:    POST /api/2.0/mlflow/runs/log-batch, 55 metrics of one run, the step advancing on
#              every request so that each one writes new rows.
# MLflow runs with its defaults (`mlflow server`, its own worker count) and its own database on
# $PGBASE, created and dropped here.
set -euo pipefail

DURATION=${DURATION:-20}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
PORT=${PORT:-18095}
MLFLOW_PORT=${MLFLOW_PORT:-15055}
MLFLOW=${MLFLOW:-mlflow}
command -v "$MLFLOW" >/dev/null || { echo "set MLFLOW to an mlflow executable (pip install mlflow psycopg2-binary)" >&2; exit 2; }
# shellcheck source=lib/server-under-test.sh
source "$(dirname "$0")/lib/server-under-test.sh"
sut_setup
MLFLOW_DB="mlflow_bench_$$"
MLFLOW_PID=""
cleanup_all() {
    if [ -n "$MLFLOW_PID" ]; then
        kill -- -"$MLFLOW_PID" 2>/dev/null || kill "$MLFLOW_PID" 2>/dev/null || true
        wait "$MLFLOW_PID" 2>/dev/null || true
    fi
    psql -q "$PGBASE/postgres" -c "DROP DATABASE IF EXISTS $MLFLOW_DB WITH (FORCE)" >/dev/null 2>&1 || true
    sut_cleanup
}
trap cleanup_all EXIT INT TERM
sut_start_server

echo "== MLflow $("$MLFLOW" --version | awk '{print $NF}') on 127.0.0.1:$MLFLOW_PORT, database $MLFLOW_DB"
psql -q "$PGBASE/postgres" -c "CREATE DATABASE $MLFLOW_DB" >/dev/null
setsid "$MLFLOW" server --backend-store-uri "postgresql+psycopg2://${PGBASE#*://}/$MLFLOW_DB" --default-artifact-root "$WORK/mlruns" \
    --host 127.0.0.1 --port "$MLFLOW_PORT" >"$WORK/mlflow.log" 2>&1 &
MLFLOW_PID=$!
for _ in $(seq 1 600); do
    curl -fsS "http://127.0.0.1:$MLFLOW_PORT/health" >/dev/null 2>&1 && break
    sleep 0.2
done
curl -fsS "http://127.0.0.1:$MLFLOW_PORT/health" >/dev/null
EXPERIMENT=$(curl -fsS -X POST -H 'Content-Type: application/json' -d '{"name": "rentcheck-comparison"}' \
    "http://127.0.0.1:$MLFLOW_PORT/api/2.0/mlflow/experiments/create" | python3 -c 'import json,sys; print(json.load(sys.stdin)["experiment_id"])')
RUN=$(curl -fsS -X POST -H 'Content-Type: application/json' -d "{\"experiment_id\": \"$EXPERIMENT\"}" \
    "http://127.0.0.1:$MLFLOW_PORT/api/2.0/mlflow/runs/create" | python3 -c 'import json,sys; print(json.load(sys.stdin)["run"]["info"]["run_id"])')

python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
metrics = {f"bench.metric_{i:03d}_value": round(1000.0 / (i + 1), 6) for i in range(55)}
open(f"{work}/metrics.json", "w").write(json.dumps({"kind": "metrics", "stage": 3, "data": {"metrics": metrics}}))
# Lua source for the log-batch body, all but the step (filled per request).
items = ",".join('{"key":"%s","value":%s,"timestamp":1764450000000,"step":STEP}' % (k, v) for k, v in metrics.items())
open(f"{work}/mlflow-items.txt", "w").write(items)
PY

RENTCHECK_LUA=$(sut_post_lua "$WORK/metrics.json" application/json)
cat >"$WORK/mlflow.lua" <<LUA
local f = assert(io.open("$WORK/mlflow-items.txt", "rb"))
local items = f:read("*a")
f:close()
local step = 0
local headers = { ["Content-Type"] = "application/json" }
request = function()
    step = step + 1
    local body = '{"run_id":"$RUN","metrics":[' .. string.gsub(items, "STEP", tostring(step)) .. ']}'
    return wrk.format("POST", "/api/2.0/mlflow/runs/log-batch", headers, body)
end
LUA
# wrk counts each thread's steps from 1; a second thread would repeat the first one's steps.
code=$(curl -s -o "$WORK/first.json" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    -d "{\"run_id\":\"$RUN\",\"metrics\":[{\"key\":\"probe\",\"value\":1,\"timestamp\":1,\"step\":0}]}" \
    "http://127.0.0.1:$MLFLOW_PORT/api/2.0/mlflow/runs/log-batch")
[ "$code" = 200 ] || { echo "MLflow log-batch answered $code: $(head -c 300 "$WORK/first.json")" >&2; exit 1; }

for round in $(seq 1 "$ROUNDS"); do
    echo "== round $round of $ROUNDS"
    wrk -t"$THREADS" -c64 -d"${DURATION}s" --timeout 10s --latency -s "$RENTCHECK_LUA" \
        "http://127.0.0.1:$PORT/api/v1/briefs/$BRIEF/evidence" >"$WORK/wrk-rentcheck.txt"
    echo "   rentcheck evidence:  $(sut_wrk_summary <"$WORK/wrk-rentcheck.txt")"
    wrk -t1 -c64 -d"${DURATION}s" --timeout 10s --latency -s "$WORK/mlflow.lua" \
        "http://127.0.0.1:$MLFLOW_PORT" >"$WORK/wrk-mlflow.txt"
    echo "   MLflow log-batch:    $(sut_wrk_summary <"$WORK/wrk-mlflow.txt")"
done
echo "MLflow metric rows: $(psql -At "$PGBASE/$MLFLOW_DB" -c 'SELECT count(*) FROM metrics')"
