#!/usr/bin/env bash
# Where evidence ingest spends its time (figures: docs/benchmarks.md, "Profile of ingest").
#
#   scripts/profile-ingest.sh                 # single 2 KB uploads, 16 connections, 15 s
#   MODE=batch scripts/profile-ingest.sh      # batches of 100 such uploads, 16 connections
#   BIN=target/release/rentcheck DURATION=20 scripts/profile-ingest.sh
#
# Runs the release server on a PostgreSQL cluster of its own with pg_stat_statements loaded
# (scripts/lib/own-postgres.sh), drives it with wrk, and meanwhile samples the whole machine with
# `perf record -a` (software cpu-clock: no hardware counters needed). Prints the rate, then
#   1. the CPU time of the run by process (server, PostgreSQL, wrk, the kernel's own threads),
#   2. the server's hottest functions, and PostgreSQL's,
#   3. the statements by total execution time (calls, mean and share), from pg_stat_statements,
# and for comparison pgbench's durable single-row insert of a similar row at the same clients.
set -euo pipefail

MODE=${MODE:-single}
DURATION=${DURATION:-15}
CONNECTIONS=${CONNECTIONS:-16}
PORT=${PORT:-18094}
THREADS=${THREADS:-2}
OWN_POSTGRES=1
PG_SETTINGS="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all -c max_connections=200"
case "$MODE" in single|batch) ;; *) echo "MODE is single or batch" >&2; exit 2 ;; esac
command -v perf >/dev/null || { echo "needs perf (apt-get install linux-perf)" >&2; exit 2; }
# shellcheck source=lib/server-under-test.sh
source "$(dirname "$0")/lib/server-under-test.sh"
sut_setup

python3 "$ROOT/scripts/lib/ingest-bodies.py" "$WORK" >/dev/null
sut_start_server
URL="http://127.0.0.1:$PORT/api/v1/briefs/$BRIEF/evidence"
if [ "$MODE" = batch ]; then BODY="$WORK/batch.json"; URL="$URL/batch"; else BODY="$WORK/metrics.json"; fi
psql -q "$DATABASE_URL" -c "CREATE EXTENSION pg_stat_statements"

echo "== warm-up (3 s), then $DURATION s of $MODE uploads at $CONNECTIONS connections under perf record -a"
wrk -t"$THREADS" -c"$CONNECTIONS" -d3s -s "$(sut_post_lua "$BODY" application/json)" "$URL" >/dev/null
psql -q "$DATABASE_URL" -c "SELECT pg_stat_statements_reset()" >/dev/null
perf record -a -e cpu-clock -F 499 -o "$WORK/perf.data" -- sleep "$DURATION" 2>"$WORK/perf.log" &
PERF_PID=$!
wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --timeout 10s --latency \
    -s "$(sut_post_lua "$BODY" application/json)" "$URL" >"$WORK/wrk.txt"
wait "$PERF_PID" || true
echo "   $(sut_wrk_summary <"$WORK/wrk.txt")$([ "$MODE" = batch ] && echo ' (items/s = 100 × req/s)')"
echo "   server memory: $(sut_memory)"

echo "== CPU samples by process (share of all samples on both cores; idle is the rest)"
perf report -i "$WORK/perf.data" --stdio --sort comm --percent-limit 1 2>/dev/null |
    grep -E '^ +[0-9]' | head -n 12 | sed 's/^/   /'
echo "== the server's samples by library (the kernel's share is its socket and scheduling work)"
perf report -i "$WORK/perf.data" --stdio --pid "$SERVER_PID" --sort dso --percent-limit 0.5 2>/dev/null |
    grep -E '^ +[0-9]' | head -n 8 | sed 's/^/   /'
echo "== the server's hottest functions (share of all samples)"
perf report -i "$WORK/perf.data" --stdio --pid "$SERVER_PID" --sort dso,symbol --percent-limit 0.4 2>/dev/null |
    grep -E '^ +[0-9]' | head -n 30 | cut -c 1-150 | sed 's/^/   /'
echo "== PostgreSQL's hottest functions (share of all samples)"
perf report -i "$WORK/perf.data" --stdio --comm postgres --sort dso,symbol --percent-limit 0.4 2>/dev/null |
    grep -E '^ +[0-9]' | head -n 20 | cut -c 1-150 | sed 's/^/   /'

echo "== statements by total execution time (pg_stat_statements)"
psql -q "$DATABASE_URL" -P pager=off -c "
    SELECT calls, round(mean_exec_time::numeric, 3) AS mean_ms,
           round((100 * total_exec_time / sum(total_exec_time) OVER ())::numeric, 1) AS pct,
           left(regexp_replace(query, '\s+', ' ', 'g'), 110) AS statement
    FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
    ORDER BY total_exec_time DESC LIMIT 15" | sed 's/^/   /'
psql -q -At "$DATABASE_URL" -c "SELECT format('   %s statements, %s ms of execution in all, %s ms per request',
    sum(calls), round(sum(total_exec_time)::numeric), round((sum(total_exec_time) / $(awk '/requests in/ {print $1}' "$WORK/wrk.txt"))::numeric, 3))
    FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"

echo "== beside it: pgbench's durable single-row insert of a similar row, $CONNECTIONS clients, $DURATION s"
sut_pgbench_scripts
pgbench -n -c"$CONNECTIONS" -j"$THREADS" -T"$DURATION" -f "$WORK/insert.sql" "$DATABASE_URL" 2>&1 |
    awk '/^tps =/ {printf "   %s tx/s\n", $3}'
