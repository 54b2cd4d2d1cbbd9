# Shared by the load scripts (bench-ingest.sh, soak.sh, profile-ingest.sh): a fresh database with one brief, an agent
# token for it, an engineer token and a signed-in engineer's session cookie, and the release server.
# Source it, then call `sut_setup`; `sut_cleanup` runs on exit. Reads PGBASE, PORT, and OWN_POSTGRES:
# 1 runs a PostgreSQL cluster of the script's own instead (scripts/lib/own-postgres.sh; PG_SETTINGS
# tunes it). BIN: a rentcheck binary to use instead of building the release one. Sets BIN, WORK,
# DATABASE_URL, BRIEF, TOKEN (agent), READ_TOKEN (engineer), SESSION (cookie value), SERVER_PID. SUT_TOOLS:
# the commands to check for (default: wrk pgbench psql python3 curl).

PGBASE=${PGBASE:-postgres://postgres@127.0.0.1:5432}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DB="rentcheck_load_$$"
WORK=$(mktemp -d /tmp/rentcheck-load.XXXXXX)
SERVER_PID=""
OWN_POSTGRES=${OWN_POSTGRES:-0}
if [ "$OWN_POSTGRES" = 1 ]; then
    # shellcheck source=own-postgres.sh
    source "$ROOT/scripts/lib/own-postgres.sh"
fi

sut_cleanup() {
    sut_stop_server
    if declare -F moto_stop >/dev/null; then moto_stop; fi
    if [ "$OWN_POSTGRES" = 1 ]; then
        own_pg_stop immediate 2>/dev/null || true
    else
        psql -q "$PGBASE/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
    fi
    rm -rf "$WORK"
}

sut_stop_server() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    SERVER_PID=""
}

sut_setup() {
    # SUT_TOOLS: what the sourcing script needs (the load scripts: all of them).
    for tool in ${SUT_TOOLS:-wrk pgbench psql python3 curl}; do
        command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install wrk postgresql-client python3 curl)" >&2; exit 2; }
    done
    trap sut_cleanup EXIT INT TERM
    if [ -z "${BIN:-}" ]; then
        echo "== build (release)"
        (cd "$ROOT" && cargo build --release --quiet --bin rentcheck)
        BIN="$ROOT/target/release/rentcheck"
    fi

    if [ "$OWN_POSTGRES" = 1 ]; then
        echo "== PostgreSQL of its own on 127.0.0.1:$PG_PORT${PG_SETTINGS:+ with $PG_SETTINGS}"
        own_pg_init
        own_pg_start
    fi
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
VALUES ('$BRIEF', 'load test', 'load@example.com', 'realtime-inference',
        'meta-llama/Llama-3.1-8B-Instruct', 8, 'bf16', 8192, 64, 'shared-ok', 'vm');
-- Every brief has a first trial (the API makes it with the brief); evidence lands in it.
INSERT INTO trials (id, brief_id, position, name, allocation_boundary)
VALUES (gen_random_uuid(), '$BRIEF', 1, 'Trial 1', 'vm');
SQL
    PASSWORD="load-test-password-$$"
    echo "$PASSWORD" | "$BIN" user add --email load@example.com --role engineer --password-stdin >/dev/null
    TOKEN=$("$BIN" token mint --email load@example.com --brief "$BRIEF" --role agent --ttl 2h 2>/dev/null | tail -n 1)
    READ_TOKEN=$("$BIN" token mint --email load@example.com --role engineer --ttl 2h 2>/dev/null | tail -n 1)
}

sut_start_server() {
    "$BIN" serve >"$WORK/server.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 100); do
        curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
        sleep 0.1
    done
    curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null
}

# Signs in through the login form (its CSRF double-submit included) and sets SESSION.
sut_sign_in() {
    local jar="$WORK/cookies.txt" csrf
    csrf=$(curl -fsS -c "$jar" "http://127.0.0.1:$PORT/login" | sed -n 's/.*name="csrf_token" value="\([^"]*\)".*/\1/p' | head -n 1)
    curl -fsS -o /dev/null -b "$jar" -c "$jar" --data-urlencode "email=load@example.com" \
        --data-urlencode "password=$PASSWORD" --data-urlencode "csrf_token=$csrf" "http://127.0.0.1:$PORT/login"
    SESSION=$(awk '$6 == "rentcheck_session" {print $7}' "$jar")
    [ -n "$SESSION" ] || { echo "sign-in failed" >&2; exit 1; }
}

# A wrk Lua script that POSTs the file $1 as $2 with the agent token; prints the script's path.
sut_post_lua() {
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

# VmHWM (peak) and VmRSS (now) of the server.
sut_memory() { awk '/^VmHWM|^VmRSS/ {printf "%s %s %s  ", $1, $2, $3} END {print ""}' "/proc/$SERVER_PID/status"; }

# wrk's report on stdin → one line of figures.
sut_wrk_summary() {
    awk '
        /Requests\/sec/ {rps=$2}
        /^ +50%/ {p50=$2} /^ +99%/ {p99=$2}
        /Non-2xx/ {non2xx=$NF}
        /Socket errors/ {sock=$0}
        /requests in/ {total=$1}
        END {printf "requests %s, %s req/s, p50 %s, p99 %s, non-2xx %s, %s\n", total, rps, p50, p99, (non2xx==""?0:non2xx), (sock==""?"no socket errors":sock)}'
}

# pgbench's side of the ratios. A table of its own, bench_rows, for a row like an upload (uuid, brief,
# the 2 KB envelope's metrics as bytea and as jsonb, a hash, an index on (brief, time)), and four
# pgbench scripts in $WORK: insert.sql, one durable single-row INSERT per transaction;
# insert-batch.sql, the same 100 rows in one INSERT; insert-batch-distinct.sql, 100 rows that differ
# in one INSERT (each row's jsonb read); insert-evidence-batch.sql, the same 100 rows into
# `evidence` itself (its indexes and statement triggers: the metrics queue and the summary marks).
# Needs $WORK/metrics.json (scripts/lib/ingest-bodies.py).
sut_pgbench_scripts() {
    local metrics_sql trial
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
    metrics_sql=$(python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))['data']['metrics']).replace(\"'\", \"''\"))" "$WORK/metrics.json")
    trial=$(psql -At "$DATABASE_URL" -c "SELECT id FROM trials WHERE brief_id = '$BRIEF' AND position = 1")
    cat >"$WORK/insert.sql" <<SQL
INSERT INTO bench_rows (brief_id, kind, stage, raw, sha256, metrics) VALUES ('$BRIEF', 'metrics', 3, convert_to('$metrics_sql', 'UTF8'), md5(random()::text), '$metrics_sql'::jsonb);
SQL
    cat >"$WORK/insert-batch.sql" <<SQL
INSERT INTO bench_rows (brief_id, kind, stage, raw, sha256, metrics)
SELECT '$BRIEF', 'metrics', 3, convert_to('$metrics_sql', 'UTF8'), md5(random()::text), '$metrics_sql'::jsonb
FROM generate_series(1, 100);
SQL
    # The same 100 rows, but each its own: a row number put in front of the metrics, so
    # PostgreSQL reads each row's jsonb (in insert-batch.sql the one literal is read once per
    # statement, as no real upload of 100 different items can be).
    cat >"$WORK/insert-batch-distinct.sql" <<SQL
INSERT INTO bench_rows (brief_id, kind, stage, raw, sha256, metrics)
SELECT '$BRIEF', 'metrics', 3, convert_to(t, 'UTF8'), md5(random()::text), t::jsonb
FROM (SELECT '{"row": ' || g || ', ' || substr('$metrics_sql', 2) AS t FROM generate_series(1, 100) AS g) AS rows;
SQL
    cat >"$WORK/insert-evidence-batch.sql" <<SQL
INSERT INTO evidence (id, brief_id, trial_id, kind, stage, content_type, raw, sha256, size_bytes, metrics,
                      parse_status, parser_version, labels, collected_at, received_at, uploaded_by)
SELECT gen_random_uuid(), '$BRIEF', '$trial', 'metrics', 3, 'application/json', r.raw,
       encode(sha256(r.raw || convert_to(g::text || random()::text, 'UTF8')), 'hex'), octet_length(r.raw),
       '$metrics_sql'::jsonb, 'ok', 'pgbench', '{}', now(), now(), 'pgbench'
FROM (SELECT convert_to('$metrics_sql', 'UTF8') AS raw) AS r, generate_series(1, 100) AS g;
SQL
    # Rows that differ into `evidence`, as insert-batch-distinct.sql into the bare table: what
    # PostgreSQL alone does with 100 different items, the most a server's batch can reach.
    cat >"$WORK/insert-evidence-batch-distinct.sql" <<SQL
INSERT INTO evidence (id, brief_id, trial_id, kind, stage, content_type, raw, sha256, size_bytes, metrics,
                      parse_status, parser_version, labels, collected_at, received_at, uploaded_by)
SELECT gen_random_uuid(), '$BRIEF', '$trial', 'metrics', 3, 'application/json', convert_to(t, 'UTF8'),
       encode(sha256(convert_to(t || random()::text, 'UTF8')), 'hex'), octet_length(convert_to(t, 'UTF8')),
       t::jsonb, 'ok', 'pgbench', '{}', now(), now(), 'pgbench'
FROM (SELECT '{"row": ' || g || ', ' || substr('$metrics_sql', 2) AS t FROM generate_series(1, 100) AS g) AS rows;
SQL
}
