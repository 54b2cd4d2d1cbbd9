#!/usr/bin/env bash
# Evidence ingest load test (docs/perf.md, ../shared/docs/perf.md).
#
#   scripts/bench-ingest.sh            # 20 s per run
#   DURATION=10 scripts/bench-ingest.sh
#
# Builds the release binary, creates a fresh database on $PGBASE (dropped at the end), migrates it,
# adds a user, a brief (one SQL insert: there is no CLI for briefs) and an agent token, starts the
# server on 127.0.0.1, then with `wrk` (Debian package `wrk`):
#   1. 2 KB JSON `metrics` evidence, 64 connections, $DURATION s;
#   2. a ~200 KB vLLM /metrics scrape (raw body, ?kind=vllm-metrics), 16 connections, $DURATION s;
# printing requests/s, p50/p99 latency, errors (non-2xx and socket errors) and the server's VmHWM
# before and after. Then pgbench: a single-row insert of a similar row (uuid, brief, 2 KB jsonb,
# timestamps) at 64 clients for $DURATION s, in the same database, for the ratio in perf.md.
# Everything it starts is stopped on exit; every run is bounded by $DURATION.
set -euo pipefail

DURATION=${DURATION:-20}
PGBASE=${PGBASE:-postgres://postgres@127.0.0.1:5432}
PORT=${PORT:-18089}
THREADS=${THREADS:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DB="rentcheck_bench_$$"
WORK=$(mktemp -d /tmp/rentcheck-bench.XXXXXX)
SERVER_PID=""

for tool in wrk pgbench psql python3 curl; do
    command -v "$tool" >/dev/null || { echo "bench-ingest: needs $tool (apt-get install wrk postgresql-client python3 curl)" >&2; exit 2; }
done

cleanup() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    psql -q "$PGBASE/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

echo "== build (release)"
(cd "$ROOT" && cargo build --release --quiet --bin rentcheck)
BIN="$ROOT/target/release/rentcheck"

echo "== database $DB on $PGBASE"
psql -q "$PGBASE/postgres" -c "CREATE DATABASE $DB" >/dev/null
export DATABASE_URL="$PGBASE/$DB"
export RENTCHECK_DATA_DIR="$WORK/data"
export RENTCHECK_ADDR="127.0.0.1:$PORT"
export RENTCHECK_JWT_SECRET
RENTCHECK_JWT_SECRET=$(head -c 48 /dev/urandom | base64 | tr -d '\n/+=' | head -c 48)
# Request logging at info would measure the terminal; warnings and errors still show.
export RUST_LOG=${RUST_LOG:-warn}

"$BIN" migrate >/dev/null
BRIEF=$(cat /proc/sys/kernel/random/uuid)
psql -q -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<SQL
INSERT INTO briefs (id, name, owner, workload_kind, model_name, params_b, precision, context_length,
                    concurrency, data_boundary, allocation_boundary)
VALUES ('$BRIEF', 'ingest benchmark', 'bench@example.com', 'realtime-inference',
        'meta-llama/Llama-3.1-8B-Instruct', 8, 'bf16', 8192, 64, 'shared-ok', 'vm');
SQL
"$BIN" user add --email bench@example.com --role engineer >/dev/null
TOKEN=$("$BIN" token mint --email bench@example.com --brief "$BRIEF" --role agent --ttl 2h 2>/dev/null | tail -n 1)

# Bodies: 2 KB metrics envelope; ~200 KB vLLM scrape built from the fixture (distinct model names).
python3 - "$WORK" "$ROOT/tests/fixtures/vllm-metrics/v1-two-models-two-engines-empty-e2e.txt" <<'PY'
import json, sys
work, fixture = sys.argv[1], sys.argv[2]
metrics = {}
i = 0
while len(json.dumps({"kind": "metrics", "stage": 3, "data": {"metrics": metrics}})) < 2048 - 40:
    metrics[f"bench.metric_{i:03d}_value"] = round(1000.0 / (i + 1), 6)
    i += 1
body = json.dumps({"kind": "metrics", "stage": 3, "data": {"metrics": metrics}})
open(f"{work}/metrics.json", "w").write(body)
src = open(fixture).read().splitlines()
out, copy = [], 0
size = lambda: sum(len(l) + 1 for l in out)
headers = [l for l in src if l.startswith("#")]
samples = [l for l in src if l and not l.startswith("#")]
out.extend(headers)
while size() < 200 * 1024:
    for l in samples:
        out.append(l.replace('model_name="', f'model_name="m{copy}-', 1))
    copy += 1
open(f"{work}/scrape.txt", "w").write("\n".join(out) + "\n")
print(f"bodies: metrics envelope {len(body)} B, vLLM scrape {size()} B")
PY

lua_script() { # $1 body file, $2 content type
    cat >"$WORK/post-$(basename "$1").lua" <<LUA
local f = assert(io.open("$1", "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "$2"
wrk.headers["Authorization"] = "Bearer $TOKEN"
LUA
    echo "$WORK/post-$(basename "$1").lua"
}

echo "== server on 127.0.0.1:$PORT"
"$BIN" serve >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null

hwm() { awk '/^VmHWM|^VmRSS/ {printf "%s %s %s  ", $1, $2, $3} END {print ""}' "/proc/$SERVER_PID/status"; }

URL="http://127.0.0.1:$PORT/api/v1/briefs/$BRIEF/evidence"
check() { # one request first, so a setup error is not mistaken for load
    local code
    code=$(curl -s -o "$WORK/first.json" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" \
        -H "Content-Type: $2" --data-binary "@$1" "$3")
    [ "$code" = 201 ] || { echo "first POST answered $code: $(head -c 300 "$WORK/first.json")" >&2; exit 1; }
}
summary() { # wrk output on stdin → the figures
    awk '
        /Requests\/sec/ {rps=$2}
        /^ +50%/ {p50=$2} /^ +99%/ {p99=$2}
        /Non-2xx/ {non2xx=$NF}
        /Socket errors/ {sock=$0}
        /requests in/ {total=$1}
        END {printf "requests %s, %s req/s, p50 %s, p99 %s, non-2xx %s, %s\n", total, rps, p50, p99, (non2xx==""?0:non2xx), (sock==""?"no socket errors":sock)}'
}

echo "== run 1: 2 KB JSON metrics evidence, 64 connections, ${DURATION}s"
check "$WORK/metrics.json" application/json "$URL"
echo "server before: $(hwm)"
wrk -t"$THREADS" -c64 -d"${DURATION}s" --timeout 10s --latency -s "$(lua_script "$WORK/metrics.json" application/json)" "$URL" >"$WORK/wrk1.txt"
echo "server after:  $(hwm)"
sed -n '/Latency Distribution/,/requests in/p' "$WORK/wrk1.txt"
summary <"$WORK/wrk1.txt"

echo "== run 2: ~200 KB vLLM /metrics scrape, 16 connections, ${DURATION}s"
URL2="$URL?kind=vllm-metrics&stage=3"
check "$WORK/scrape.txt" text/plain "$URL2"
echo "server before: $(hwm)"
wrk -t"$THREADS" -c16 -d"${DURATION}s" --timeout 10s --latency -s "$(lua_script "$WORK/scrape.txt" text/plain)" "$URL2" >"$WORK/wrk2.txt"
echo "server after:  $(hwm)"
summary <"$WORK/wrk2.txt"
echo "evidence rows: $(psql -At "$DATABASE_URL" -c 'SELECT count(*) FROM evidence')"

kill "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""

echo "== pgbench: durable single-row insert of a similar row (2 KB jsonb), 64 clients, ${DURATION}s"
psql -q -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<'SQL'
CREATE TABLE bench_rows (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    brief_id uuid NOT NULL,
    kind text NOT NULL,
    stage smallint NOT NULL,
    raw bytea NOT NULL,
    sha256 text NOT NULL,
    metrics jsonb NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX bench_rows_brief_idx ON bench_rows (brief_id, received_at DESC, id DESC);
SQL
METRICS_SQL=$(python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))['data']['metrics']).replace(\"'\", \"''\"))" "$WORK/metrics.json")
cat >"$WORK/insert.sql" <<SQL
INSERT INTO bench_rows (brief_id, kind, stage, raw, sha256, metrics) VALUES ('$BRIEF', 'metrics', 3, convert_to('$METRICS_SQL', 'UTF8'), md5(random()::text), '$METRICS_SQL'::jsonb);
SQL
pgbench -n -c64 -j"$THREADS" -T"$DURATION" -f "$WORK/insert.sql" "$DATABASE_URL" 2>&1 | grep -E 'number of transactions actually processed|latency average|tps ='
