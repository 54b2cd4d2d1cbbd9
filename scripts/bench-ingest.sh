#!/usr/bin/env bash
# Evidence ingest load test (targets and figures: docs/benchmarks.md).
#
#   scripts/bench-ingest.sh                  # 3 rounds, 20 s per run
#   DURATION=10 ROUNDS=5 scripts/bench-ingest.sh
#   STORE=s3 BIN=target/release/rentcheck scripts/bench-ingest.sh   # raw bytes in moto's S3
#   PARTS=single scripts/bench-ingest.sh     # only some of the runs below: single, scrape, batch, review
#
# Builds the release binary, creates a fresh database on $PGBASE (dropped at the end) with a brief
# and an agent token (scripts/lib/server-under-test.sh), starts the server on 127.0.0.1, then for
# each round, alternating so both sides of the ratio in docs/benchmarks.md meet the same machine state:
#   1. `wrk`: 2 KB JSON `metrics` evidence, 64 connections, $DURATION s;
#   2. pgbench: a durable single-row insert of a similar row (uuid, brief, 2 KB bytea + jsonb,
#      timestamps) at 64 clients, $DURATION s, in the same database; then 1. and 2. again at 16
#      connections (the ratio's target is stated at 16, its p99 at 64);
#   3. `wrk`: a ~200 KB vLLM /metrics scrape (raw body, ?kind=vllm-metrics), 16 connections;
#   4. `wrk`: batches of 100 of the 2 KB envelopes (`evidence/batch`), 16 connections;
#   5. pgbench: the same 100 rows in one INSERT per transaction, into the bare table of 2.; 100
#      rows that differ (a row number in each, so each row's jsonb is read, as for real uploads)
#      into that table; and the same 100, then 100 that differ, into `evidence` itself (indexes,
#      triggers); 16 clients each;
#   6. `wrk`: the brief's review JSON at 16 connections (an engineer's token), first quiet, then
#      while 4 more connections upload single 2 KB items to the same brief all along; it counts the
#      answers sent as current and those sent from the review before (`"refreshing": true`).
# It prints requests/s, p50/p99, errors (non-2xx and socket errors) and the server's VmHWM at start
# and end. Everything it starts is stopped on exit; every run is bounded by $DURATION.
set -euo pipefail

DURATION=${DURATION:-20}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-18089}
THREADS=${THREADS:-2}
PARTS=${PARTS:-single,scrape,batch,review}
part() { [[ ",$PARTS," == *",$1,"* ]]; }
# shellcheck source=lib/server-under-test.sh
source "$(dirname "$0")/lib/server-under-test.sh"
# shellcheck source=lib/moto.sh
source "$(dirname "$0")/lib/moto.sh"
sut_setup
# STORE=s3: raw bytes in an S3 bucket (moto's S3-protocol server on loopback) instead of PostgreSQL.
if [ "${STORE:-postgres}" = s3 ]; then
    moto_start
    echo "== raw evidence in $RENTCHECK_EVIDENCE_STORE at $AWS_ENDPOINT (moto)"
fi

# Bodies: 2 KB metrics envelope, a batch of 100, a ~200 KB vLLM scrape built from the fixture.
python3 "$ROOT/scripts/lib/ingest-bodies.py" "$WORK" "$ROOT/tests/fixtures/vllm-metrics/v1-two-models-two-engines-empty-e2e.txt"

echo "== server on 127.0.0.1:$PORT"
sut_start_server
hwm() { sut_memory; }

URL="http://127.0.0.1:$PORT/api/v1/briefs/$BRIEF/evidence"
check() { # one request first, so a setup error is not mistaken for load
    local code
    code=$(curl -s -o "$WORK/first.json" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" \
        -H "Content-Type: $2" --data-binary "@$1" "$3")
    [ "$code" = 201 ] || { echo "first POST answered $code: $(head -c 300 "$WORK/first.json")" >&2; exit 1; }
}
summary() { sut_wrk_summary; }

# pgbench's side of the ratios ($WORK/insert.sql, insert-batch.sql, insert-batch-distinct.sql,
# insert-evidence-batch.sql, insert-evidence-batch-distinct.sql).
sut_pgbench_scripts

# The compactor finishes the previous run's backlog before the next measurement starts.
settle() {
    for _ in $(seq 1 100); do
        [ "$(psql -At "$DATABASE_URL" -c 'SELECT count(*) FROM evidence_metrics_pending')" = 0 ] && return
        sleep 0.1
    done
}

# Counts the review answers sent as computed and those sent from the review before.
cat >"$WORK/review.lua" <<'LUA'
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) current = 0; refreshing = 0 end
function response(status, headers, body)
  if body:sub(-19) == ',"refreshing":true}' then refreshing = refreshing + 1 else current = current + 1 end
end
function done(summary, latency, requests)
  local c, r = 0, 0
  for _, t in ipairs(threads) do c = c + t:get("current"); r = r + t:get("refreshing") end
  io.write(string.format("answers current %d, refreshing %d\n", c, r))
end
LUA

URL2="$URL?kind=vllm-metrics&stage=3"
check "$WORK/metrics.json" application/json "$URL"
check "$WORK/scrape.txt" text/plain "$URL2"
code=$(curl -s -o "$WORK/first.json" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" \
    -H "Content-Type: application/json" --data-binary "@$WORK/batch.json" "$URL/batch")
[ "$code" = 207 ] || { echo "first batch answered $code: $(head -c 300 "$WORK/first.json")" >&2; exit 1; }
echo "server memory at start: $(hwm)"
for round in $(seq 1 "$ROUNDS"); do
    echo "== round $round of $ROUNDS"
    # Single uploads beside pgbench's single-row insert at 64 connections (where the p99 target is
    # stated), then at 16 (where the ratio's target is).
    for conns in 64 16; do
        part single || continue
        settle
        wrk -t"$THREADS" -c"$conns" -d"${DURATION}s" --timeout 10s --latency -s "$(sut_post_lua "$WORK/metrics.json" application/json)" "$URL" >"$WORK/wrk1.txt"
        echo "   2 KB JSON metrics evidence, $conns connections: $(summary <"$WORK/wrk1.txt")"
        settle
        pgbench -n -c"$conns" -j"$THREADS" -T"$DURATION" -f "$WORK/insert.sql" "$DATABASE_URL" >"$WORK/pgbench.txt" 2>&1
        echo "   pgbench single-row insert, $conns clients: $(grep -E '^tps =' "$WORK/pgbench.txt" | awk '{print $3}') tx/s, latency average $(awk '/latency average/ {print $4, $5}' "$WORK/pgbench.txt")"
    done
    if part scrape; then
        settle
        wrk -t"$THREADS" -c16 -d"${DURATION}s" --timeout 10s --latency -s "$(sut_post_lua "$WORK/scrape.txt" text/plain)" "$URL2" >"$WORK/wrk2.txt"
        echo "   ~200 KB vLLM /metrics scrape, 16 connections: $(summary <"$WORK/wrk2.txt")"
    fi
    if part review; then
        settle
        REVIEW_URL="http://127.0.0.1:$PORT/api/v1/briefs/$BRIEF/review"
        wrk -t"$THREADS" -c16 -d"${DURATION}s" --timeout 10s --latency -s "$WORK/review.lua" \
            -H "Authorization: Bearer $READ_TOKEN" "$REVIEW_URL" >"$WORK/wrk4.txt"
        echo "   review JSON, 16 connections, no writes: $(summary <"$WORK/wrk4.txt"); $(grep '^answers' "$WORK/wrk4.txt")"
        settle
        wrk -t1 -c4 -d"${DURATION}s" --timeout 10s --latency -s "$(sut_post_lua "$WORK/metrics.json" application/json)" "$URL" >"$WORK/wrk5.txt" &
        writer=$!
        wrk -t"$THREADS" -c16 -d"${DURATION}s" --timeout 10s --latency -s "$WORK/review.lua" \
            -H "Authorization: Bearer $READ_TOKEN" "$REVIEW_URL" >"$WORK/wrk4.txt"
        wait "$writer"
        echo "   review JSON, 16 connections, while written to: $(summary <"$WORK/wrk4.txt"); $(grep '^answers' "$WORK/wrk4.txt")"
        echo "   … the uploads to it meanwhile, 4 connections: $(summary <"$WORK/wrk5.txt")"
    fi
    part batch || continue
    settle
    wrk -t"$THREADS" -c16 -d"${DURATION}s" --timeout 10s --latency -s "$(sut_post_lua "$WORK/batch.json" application/json)" "$URL/batch" >"$WORK/wrk3.txt"
    echo "   batch of 100 × 2 KB items, 16 connections: $(summary <"$WORK/wrk3.txt") (items/s = 100 × req/s)"
    settle
    pgbench -n -c16 -j"$THREADS" -T"$DURATION" -f "$WORK/insert-batch.sql" "$DATABASE_URL" >"$WORK/pgbench2.txt" 2>&1
    echo "   pgbench 100-row insert into a bare table, 16 clients: $(grep -E '^tps =' "$WORK/pgbench2.txt" | awk '{print $3}') tx/s (rows/s = 100 × tx/s)"
    settle
    pgbench -n -c16 -j"$THREADS" -T"$DURATION" -f "$WORK/insert-batch-distinct.sql" "$DATABASE_URL" >"$WORK/pgbench4.txt" 2>&1
    echo "   pgbench 100 distinct rows per insert (each row's jsonb read) into the bare table, 16 clients: $(grep -E '^tps =' "$WORK/pgbench4.txt" | awk '{print $3}') tx/s"
    settle
    pgbench -n -c16 -j"$THREADS" -T"$DURATION" -f "$WORK/insert-evidence-batch.sql" "$DATABASE_URL" >"$WORK/pgbench3.txt" 2>&1
    echo "   pgbench 100-row insert into evidence (indexes, triggers), 16 clients: $(grep -E '^tps =' "$WORK/pgbench3.txt" | awk '{print $3}') tx/s"
    settle
    pgbench -n -c16 -j"$THREADS" -T"$DURATION" -f "$WORK/insert-evidence-batch-distinct.sql" "$DATABASE_URL" >"$WORK/pgbench5.txt" 2>&1
    echo "   pgbench 100 distinct rows per insert into evidence, 16 clients: $(grep -E '^tps =' "$WORK/pgbench5.txt" | awk '{print $3}') tx/s"
done
echo "server memory at end: $(hwm)"
echo "evidence rows: $(psql -At "$DATABASE_URL" -c 'SELECT count(*) FROM evidence')"
# What a non-2xx answer was, from the server's own log (RUST_LOG=warn keeps only warnings and errors).
if grep -qE 'WARN|ERROR' "$WORK/server.log"; then
    echo "server warnings and errors: $(grep -cE 'WARN|ERROR' "$WORK/server.log"); the first three:"
    grep -E 'WARN|ERROR' "$WORK/server.log" | sed -n 1,3p | cut -c 1-400
fi
