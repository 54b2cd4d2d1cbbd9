#!/usr/bin/env bash
# Sustained mixed load (results in docs/reliability.md).
#
#   scripts/soak.sh                      # the run in docs/reliability.md: 10 minutes, 500 uploads/s
#   DURATION=120 INGEST_RATE=1000 scripts/soak.sh
#   OWN_POSTGRES=0 scripts/soak.sh       # on the PostgreSQL at $PGBASE instead of a cluster of its own
#
# By default it runs a PostgreSQL cluster of its own (scripts/lib/own-postgres.sh) with the settings
# docs/operations.md recommends for steady ingest ($PG_SETTINGS), then a fresh database and the
# release server (scripts/lib/server-under-test.sh), then $DURATION seconds of what agents and people
# do at once, one `oha` (cargo install oha) per kind of request, each at a fixed rate (open loop, with
# latency correction: a request that should have been sent while the server was stalled counts from
# when it was due), so each kind has its own latency figures:
#   POST 2 KB metrics evidence (agent token)             $INGEST_RATE/s over 64 connections
#   GET  /api/v1/briefs/{id}/review   (engineer token)    $READ_RATE/s over 2 connections
#   GET  /api/v1/briefs/{id}/evidence (engineer token)    $READ_RATE/s over 2 connections
#   GET  /briefs/{id}/review          (signed-in session) $READ_RATE/s over 2 connections
#   GET  /briefs/{id}                 (signed-in session) $READ_RATE/s over 2 connections
# The ingest target (docs/benchmarks.md) is 2,000/s at 64 connections; on a 2-core machine that the load tool and
# PostgreSQL share, 500/s leaves room (docs/reliability.md has both). Every 60 s it samples the
# server's RSS; at the end it prints the samples and, per kind, the rate reached, p50/p95/p99/max
# latency and answers other than 2xx, then the evidence stored. Memory is flat when the last samples
# stop rising. Set PACED=0 for closed-loop load instead (every connection sends as fast as answers
# come back: a throughput test, where latency is queueing by construction).
set -euo pipefail

DURATION=${DURATION:-600}
INGEST_RATE=${INGEST_RATE:-500}
INGEST_CONNECTIONS=${INGEST_CONNECTIONS:-64}
READ_RATE=${READ_RATE:-10}
PACED=${PACED:-1}
PORT=${PORT:-18094}
OWN_POSTGRES=${OWN_POSTGRES:-1}
PG_SETTINGS=${PG_SETTINGS:--c shared_buffers=1GB -c max_wal_size=8GB -c checkpoint_completion_target=0.9 -c wal_compression=lz4}
command -v oha >/dev/null || { echo "needs oha (cargo install oha --locked)" >&2; exit 2; }
# shellcheck source=lib/server-under-test.sh
source "$(dirname "$0")/lib/server-under-test.sh"
sut_setup
sut_start_server
sut_sign_in

python3 - "$WORK/metrics.json" <<'PY'
import json, sys
metrics, i = {}, 0
while len(json.dumps({"kind": "metrics", "stage": 3, "data": {"metrics": metrics}})) < 2048 - 40:
    metrics[f"soak.metric_{i:03d}_value"] = round(1000.0 / (i + 1), 6)
    i += 1
open(sys.argv[1], "w").write(json.dumps({"kind": "metrics", "stage": 3, "data": {"metrics": metrics}}))
PY

# Each kind answers before the load starts, so a setup error is not mistaken for load.
for path in "/api/v1/briefs/$BRIEF/review" "/api/v1/briefs/$BRIEF/evidence"; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $READ_TOKEN" "http://127.0.0.1:$PORT$path")
    [ "$code" = 200 ] || { echo "GET $path answered $code" >&2; exit 1; }
done
for path in "/briefs/$BRIEF/review" "/briefs/$BRIEF"; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -b "rentcheck_session=$SESSION" "http://127.0.0.1:$PORT$path")
    [ "$code" = 200 ] || { echo "GET $path answered $code" >&2; exit 1; }
done

echo "== soak: ${DURATION}s; uploads ${INGEST_RATE}/s over $INGEST_CONNECTIONS connections, each read ${READ_RATE}/s over 2$([ "$PACED" = 1 ] || echo '; closed loop, rates ignored')"
echo "   t=0s: $(sut_memory)"
(
    elapsed=0
    while [ "$elapsed" -lt "$DURATION" ]; do
        sleep 60
        elapsed=$((elapsed + 60))
        [ "$elapsed" -le "$DURATION" ] && echo "   t=${elapsed}s: $(sut_memory)"
    done
) &
SAMPLER=$!
url="http://127.0.0.1:$PORT"
# A time line besides the totals: one more upload five times a second, timed by curl; the end report
# shows the slowest of each minute, so a stall can be placed in time.
(
    end=$((SECONDS + DURATION))
    while [ "$SECONDS" -lt "$end" ]; do
        echo "$SECONDS $(curl -s -o /dev/null -w '%{time_total}' -H 'Content-Type: application/json' \
            -H "Authorization: Bearer $TOKEN" --data-binary @"$WORK/metrics.json" "$url/api/v1/briefs/$BRIEF/evidence")"
        sleep 0.2
    done
) >"$WORK/timeline.txt" &
TIMELINE=$!
# load KIND CONNECTIONS RATE oha-arguments…: one oha in the background, its JSON report in $WORK.
LOADS=""
load() {
    local kind=$1 connections=$2 rate=$3
    shift 3
    local pace=(-q "$rate" --latency-correction)
    [ "$PACED" = 1 ] || pace=()
    oha --no-tui --output-format json -z "${DURATION}s" -c "$connections" "${pace[@]}" "$@" >"$WORK/oha-$kind.json" &
    LOADS="$LOADS $!"
}
load ingest "$INGEST_CONNECTIONS" "$INGEST_RATE" -m POST -T application/json -D "$WORK/metrics.json" \
    -H "Authorization: Bearer $TOKEN" "$url/api/v1/briefs/$BRIEF/evidence"
load api-review 2 "$READ_RATE" -H "Authorization: Bearer $READ_TOKEN" "$url/api/v1/briefs/$BRIEF/review"
load api-evidence 2 "$READ_RATE" -H "Authorization: Bearer $READ_TOKEN" "$url/api/v1/briefs/$BRIEF/evidence"
load page-review 2 "$READ_RATE" -H "Cookie: rentcheck_session=$SESSION" "$url/briefs/$BRIEF/review"
load page-brief 2 "$READ_RATE" -H "Cookie: rentcheck_session=$SESSION" "$url/briefs/$BRIEF"
# shellcheck disable=SC2086 # a list of process ids
wait $LOADS
kill "$SAMPLER" "$TIMELINE" 2>/dev/null || true
wait "$SAMPLER" "$TIMELINE" 2>/dev/null || true
echo "   end: $(sut_memory)"
python3 - "$WORK" <<'PY'
import json, sys
print(f"   {'kind':<13} {'requests':>9} {'req/s':>8} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} {'max ms':>7}  other answers")
for kind in ["ingest", "api-review", "api-evidence", "page-review", "page-brief"]:
    r = json.load(open(f"{sys.argv[1]}/oha-{kind}.json"))
    s, p = r["summary"], r["latencyPercentiles"]
    codes = r.get("statusCodeDistribution", {})
    errors = r.get("errorDistribution", {})
    total = sum(codes.values()) + sum(errors.values())
    # oha cuts the requests still in flight when the time is up; they are not answers.
    cut = errors.pop("aborted due to deadline", 0)
    total -= cut
    other = {k: v for k, v in codes.items() if not k.startswith("2")} | errors
    ms = lambda x: f"{x * 1000:7.1f}" if x is not None else "      -"
    print(f"   {kind:<13} {total:>9} {s['requestsPerSec']:8.1f} {ms(p['p50'])} {ms(p['p95'])} {ms(p['p99'])} {ms(s['slowest'])}  {other or 'none'}")
worst = {}
start = None
for line in open(f"{sys.argv[1]}/timeline.txt"):
    t, took = line.split()
    start = int(t) if start is None else start
    minute = (int(t) - start) // 60
    worst[minute] = max(worst.get(minute, 0.0), float(took) * 1000)
print("   slowest timed upload per minute (ms): " + ", ".join(f"{m + 1}: {w:.0f}" for m, w in sorted(worst.items())))
PY
echo "   evidence stored: $(psql -At "$DATABASE_URL" -c 'SELECT count(*) FROM evidence'), compactor backlog: $(psql -At "$DATABASE_URL" -c 'SELECT count(*) FROM evidence_metrics_pending')"
echo "   server log warnings: $(grep -c WARN "$WORK/server.log" || true); the most frequent:"
grep WARN "$WORK/server.log" | sed 's/^[^ ]* *WARN //' | cut -c1-160 | sed 's/[0-9][0-9.]*/N/g' | sort | uniq -c | sort -rn | head -n 5 || true
