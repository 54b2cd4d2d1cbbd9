#!/usr/bin/env bash
# What an `evidence` row costs PostgreSQL beside a bare row (figures in docs/benchmarks.md).
#
#   scripts/evidence-row-cost.sh
#   DURATION=20 BIN=target/release/rentcheck scripts/evidence-row-cost.sh
#
# On a fresh migrated database (scripts/lib/server-under-test.sh), pgbench alone inserts the
# bench-ingest batch rows, 100 per statement at 16 clients: into the bare table, then into
# `evidence` itself, $DURATION s each, and prints the ratio. First with no server, then with the
# server running beside it (its compactor taking the metrics queue), then with parts of `evidence`
# taken away one after the other: its statement triggers (the metrics queue and the change marks),
# its foreign keys, its secondary indexes. The database is dropped at the end.
set -euo pipefail

DURATION=${DURATION:-10}
THREADS=${THREADS:-2}
PORT=${PORT:-18090}
SUT_TOOLS="pgbench psql python3 curl"
# shellcheck source=lib/server-under-test.sh
source "$(dirname "$0")/lib/server-under-test.sh"
sut_setup
python3 "$ROOT/scripts/lib/ingest-bodies.py" "$WORK" "$ROOT/tests/fixtures/vllm-metrics/v1-two-models-two-engines-empty-e2e.txt"
sut_pgbench_scripts

rows() { # rows/s of one pgbench script of 100-row inserts
    pgbench -n -c16 -j"$THREADS" -T"$DURATION" -f "$1" "$DATABASE_URL" 2>&1 | awk '/^tps =/ {printf "%d", $3 * 100}'
}
compare() {
    local bare evidence
    bare=$(rows "$WORK/insert-batch.sql")
    evidence=$(rows "$WORK/insert-evidence-batch.sql")
    echo "   $1: bare $bare rows/s, evidence $evidence rows/s, ratio $(python3 -c "print(round($evidence / $bare, 2))")"
}
sql() { psql -q -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "$1" >/dev/null; }

echo "== 100 rows per INSERT, 16 clients, $DURATION s each"
compare "evidence as migrated, no server"
sut_start_server
compare "evidence as migrated, the server (its compactor) running"
sut_stop_server
compare "evidence as migrated, no server again"
sql "ALTER TABLE evidence DISABLE TRIGGER USER"
compare "without its statement triggers (metrics queue, change marks)"
sql "ALTER TABLE evidence DISABLE TRIGGER ALL"
compare "and without its foreign keys"
for index in $(psql -At "$DATABASE_URL" -c "SELECT indexrelid::regclass FROM pg_index WHERE indrelid = 'evidence'::regclass AND NOT indisprimary"); do
    sql "DROP INDEX $index"
done
compare "and without its secondary indexes (primary key only)"
