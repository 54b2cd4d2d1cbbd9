#!/usr/bin/env bash
# Sustained mixed load (issue 9; results in docs/reliability.md).
#
#   scripts/soak.sh                      # 10 minutes, 16 connections
#   DURATION=120 CONNECTIONS=8 scripts/soak.sh
#
# A fresh database and the release server (scripts/lib/server-under-test.sh), then one `wrk` run of
# $DURATION seconds mixing what agents and people do at once, by request:
#   70 %  POST 2 KB metrics evidence (agent token)
#   10 %  GET  /api/v1/briefs/{id}/review     (engineer token; card, ledger and decision)
#   10 %  GET  /api/v1/briefs/{id}/evidence   (engineer token; newest page of the list)
#    5 %  GET  /briefs/{id}/review            (signed-in session; the HTML review page)
#    5 %  GET  /briefs/{id}                   (signed-in session; the brief page)
# Every 60 s it samples the server's RSS, and at the end prints the samples, p50/p99/max latency,
# non-2xx answers and the evidence stored. Memory is flat when the last samples stop rising.
set -euo pipefail

DURATION=${DURATION:-600}
CONNECTIONS=${CONNECTIONS:-16}
THREADS=${THREADS:-2}
PORT=${PORT:-18094}
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

cat >"$WORK/mixed.lua" <<LUA
local f = assert(io.open("$WORK/metrics.json", "rb"))
local body = f:read("*a")
f:close()
local post = { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer $TOKEN" }
local api = { ["Authorization"] = "Bearer $READ_TOKEN" }
local page = { ["Cookie"] = "rentcheck_session=$SESSION" }
local n = 0
request = function()
    n = n + 1
    local r = n % 20
    if r < 14 then return wrk.format("POST", "/api/v1/briefs/$BRIEF/evidence", post, body)
    elseif r < 16 then return wrk.format("GET", "/api/v1/briefs/$BRIEF/review", api)
    elseif r < 18 then return wrk.format("GET", "/api/v1/briefs/$BRIEF/evidence", api)
    elseif r < 19 then return wrk.format("GET", "/briefs/$BRIEF/review", page)
    else return wrk.format("GET", "/briefs/$BRIEF", page) end
end
LUA

# Each kind answers before the load starts, so a setup error is not mistaken for load.
for path in "/api/v1/briefs/$BRIEF/review" "/api/v1/briefs/$BRIEF/evidence"; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $READ_TOKEN" "http://127.0.0.1:$PORT$path")
    [ "$code" = 200 ] || { echo "GET $path answered $code" >&2; exit 1; }
done
for path in "/briefs/$BRIEF/review" "/briefs/$BRIEF"; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -b "rentcheck_session=$SESSION" "http://127.0.0.1:$PORT$path")
    [ "$code" = 200 ] || { echo "GET $path answered $code" >&2; exit 1; }
done

echo "== soak: $CONNECTIONS connections for ${DURATION}s"
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
wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --timeout 10s --latency -s "$WORK/mixed.lua" \
    "http://127.0.0.1:$PORT" >"$WORK/wrk.txt"
kill "$SAMPLER" 2>/dev/null || true
wait "$SAMPLER" 2>/dev/null || true
echo "   end: $(sut_memory)"
sed -n '/Latency Distribution/,/requests in/p' "$WORK/wrk.txt"
echo "   max latency: $(awk '/^ +Latency/ {print $4}' "$WORK/wrk.txt")"
echo "   $(sut_wrk_summary <"$WORK/wrk.txt")"
echo "   evidence stored: $(psql -At "$DATABASE_URL" -c 'SELECT count(*) FROM evidence'), compactor backlog: $(psql -At "$DATABASE_URL" -c 'SELECT count(*) FROM evidence_metrics_pending')"
echo "   server log warnings: $(grep -c WARN "$WORK/server.log" || true); the most frequent:"
grep WARN "$WORK/server.log" | sed 's/^[^ ]* *WARN //' | cut -c1-160 | sed 's/[0-9][0-9.]*/N/g' | sort | uniq -c | sort -rn | head -n 5 || true
