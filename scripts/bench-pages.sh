#!/usr/bin/env bash
# Page speed on a team's data at scale (targets and figures: docs/benchmarks.md).
#
#   scripts/bench-pages.sh                    # 10,000 briefs (seeded once, kept for the next run)
#   BRIEFS=1000 REQUESTS=100 scripts/bench-pages.sh
#
# Builds the release binary, seeds a database `rentcheck_pages_<BRIEFS>` on $PGBASE with
# scripts/seed-scale.sh unless it already holds that many briefs, starts the server, waits until the
# review summaries are current, then for each page sends $REQUESTS requests from 4 concurrent
# clients after 20 warm-ups, as a signed-in manager, and prints p50 / p95 / max:
#   the dashboard (`/`), its second page, a search, the needs-approval, stale, failing and team
#   filters, the API list (plain, stale, owner + search), one brief page, its review (HTML) and the
#   review JSON. Then `wrk` on the review JSON at 16 connections for $DURATION s (requests/s, p50,
#   p99), on one brief and on 1,000 briefs in turn (cold, then warm), beside pgbench's primary-key
#   read of one brief on the same database; the plans of the list statement for each filter
#   (EXPLAIN ANALYZE); the server's VmHWM. BIN=<a rentcheck binary> skips the build (a smoke run with a debug build).
set -euo pipefail

BRIEFS=${BRIEFS:-10000}
REQUESTS=${REQUESTS:-200}
DURATION=${DURATION:-15}
WAIT=${WAIT:-900}
PORT=${PORT:-18090}
PGBASE=${PGBASE:-postgres://postgres@127.0.0.1:5432}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DB="rentcheck_pages_$BRIEFS"
WORK=$(mktemp -d /tmp/rentcheck-pages.XXXXXX)
SERVER_PID=""
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
for tool in wrk pgbench psql python3 curl; do
    command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }
done

if [ -z "${BIN:-}" ]; then
    echo "== build (release)"
    (cd "$ROOT" && cargo build --release --quiet --bin rentcheck)
    BIN="$ROOT/target/release/rentcheck"
fi
export DATABASE_URL="$PGBASE/$DB" RENTCHECK_DATA_DIR="$WORK/data" RENTCHECK_ADDR="127.0.0.1:$PORT" RUST_LOG=warn
export RENTCHECK_JWT_SECRET
RENTCHECK_JWT_SECRET=$(head -c 48 /dev/urandom | base64 | tr -d '\n/+=' | head -c 48)

if ! psql -q "$PGBASE/postgres" -Atc "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1; then
    psql -q "$PGBASE/postgres" -c "CREATE DATABASE $DB"
fi
"$BIN" migrate >/dev/null
have=$(psql -q -At "$DATABASE_URL" -c "SELECT count(*) FROM briefs")
if [ "$have" -lt "$BRIEFS" ]; then
    echo "== seed $BRIEFS briefs"
    BRIEFS=$BRIEFS "$ROOT/scripts/seed-scale.sh"
fi
PASSWORD="pages-bench-password-$$"
psql -q "$DATABASE_URL" -c "DELETE FROM users WHERE email = 'pages@example.com'"
echo "$PASSWORD" | "$BIN" user add --email pages@example.com --role manager --password-stdin >/dev/null
TOKEN=$("$BIN" token mint --email pages@example.com --role manager --ttl 2h 2>/dev/null | tail -n 1)

"$BIN" serve >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
echo "== waiting (at most $WAIT s) for the review summaries: the watcher remakes every brief's after a start"
# The watcher queues every brief once when it starts, just after /readyz answers: wait for that.
for _ in $(seq 1 50); do
    [ "$(psql -q -At "$DATABASE_URL" -c "SELECT count(*) FROM review_changes")" -gt 0 ] && break
    sleep 0.1
done
start=$(date +%s)
summaries() { psql -q -At "$DATABASE_URL" -c "SELECT (SELECT count(*) FROM review_summaries) || ' of ' || (SELECT count(*) FROM briefs) || ' made, ' || (SELECT count(DISTINCT brief_id) FROM review_changes) || ' briefs queued'"; }
while [ "$(psql -q -At "$DATABASE_URL" -c "SELECT count(*) FROM review_changes")" -gt 0 ] && [ $(( $(date +%s) - start )) -lt "$WAIT" ]; do sleep 5; done
echo "   after $(( $(date +%s) - start )) s: $(summaries) (a page remakes any it shows that are still queued)"

jar="$WORK/cookies.txt"
csrf=$(curl -fsS -c "$jar" "http://127.0.0.1:$PORT/login" | sed -n 's/.*name="csrf_token" value="\([^"]*\)".*/\1/p' | head -n 1)
curl -fsS -o /dev/null -b "$jar" -c "$jar" --data-urlencode "email=pages@example.com" \
    --data-urlencode "password=$PASSWORD" --data-urlencode "csrf_token=$csrf" "http://127.0.0.1:$PORT/login"
SESSION=$(awk '$6 == "rentcheck_session" {print $7}' "$jar")
BRIEF=$(psql -q -At "$DATABASE_URL" -c "SELECT id FROM briefs ORDER BY created_at DESC, id DESC OFFSET $((BRIEFS / 2)) LIMIT 1")

echo "== pages: $REQUESTS requests each, 4 clients, after 20 warm-ups (ms)"
python3 - "$PORT" "$SESSION" "$TOKEN" "$BRIEF" "$REQUESTS" <<'PY'
import http.client, statistics, sys, threading, time
port, session, token, brief, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
# The dashboard's second page: the "next" link the first page wrote.
import re
c = http.client.HTTPConnection("127.0.0.1", int(port))
c.request("GET", "/", headers={"Cookie": f"rentcheck_session={session}"})
first = c.getresponse().read().decode()
found = re.search(r'href="(/\?after=[^"]+)"', first)
if not found:
    raise SystemExit("the dashboard's first page has no next link")
page2 = found.group(1).replace("&amp;", "&")
pages = [
    ("dashboard", "/", "cookie"),
    ("dashboard, search", "/?q=Summariser", "cookie"),
    ("dashboard, rare search", "/?q=00042", "cookie"),
    ("dashboard, needs approval", "/?show=needs-approval", "cookie"),
    ("dashboard, stale", "/?show=stale", "cookie"),
    ("dashboard, failing", "/?show=failing", "cookie"),
    ("dashboard, team", "/?team=Serving", "cookie"),
    ("dashboard, page 2", page2, "cookie"),
    ("API list", "/api/v1/briefs", "bearer"),
    ("API list, stale", "/api/v1/briefs?stale=true&limit=50", "bearer"),
    ("API list, owner, search", "/api/v1/briefs?owner=team-7@example.com&q=Summariser", "bearer"),
    ("brief page", f"/briefs/{brief}", "cookie"),
    ("review (HTML)", f"/briefs/{brief}/review", "cookie"),
    ("review (JSON)", f"/api/v1/briefs/{brief}/review", "bearer"),
]
def get(conn, path, auth):
    headers = {"Cookie": f"rentcheck_session={session}"} if auth == "cookie" else {"Authorization": f"Bearer {token}"}
    for attempt in range(2):
        t = time.perf_counter()
        try:
            conn.request("GET", path, headers=headers)
            r = conn.getresponse(); r.read()
            break
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            # The server closed a connection that sat idle; open it again (not timed).
            conn.close()
            if attempt:
                raise
    if r.status != 200:
        raise SystemExit(f"{path}: {r.status}")
    return (time.perf_counter() - t) * 1000
print(f"   {'page':<28} {'p50':>7} {'p95':>7} {'max':>7}")
for name, path, auth in pages:
    conns = [http.client.HTTPConnection("127.0.0.1", int(port)) for _ in range(4)]
    for c in conns:
        for _ in range(5): get(c, path, auth)
    times, lock = [], threading.Lock()
    def worker(c, k):
        for _ in range(k):
            ms = get(c, path, auth)
            with lock: times.append(ms)
    threads = [threading.Thread(target=worker, args=(c, n // 4)) for c in conns]
    for t in threads: t.start()
    for t in threads: t.join()
    times.sort()
    print(f"   {name:<28} {statistics.median(times):7.1f} {times[int(len(times) * 0.95) - 1]:7.1f} {times[-1]:7.1f}")
PY

wrk_summary() { awk '/Requests\/sec/ {rps=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} /Non-2xx/ {bad=$0} END {printf "   %s req/s, p50 %s, p99 %s %s\n", rps, p50, p99, bad}'; }
echo "== review JSON under wrk: 16 connections, $DURATION s, one brief"
wrk -t2 -c16 -d"${DURATION}s" --latency -H "Authorization: Bearer $TOKEN" \
    "http://127.0.0.1:$PORT/api/v1/briefs/$BRIEF/review" | wrk_summary
# The same over 1,000 different briefs in turn: each review is computed once, then served from
# the cache until its brief changes (a cold start first, then warm).
psql -q -At "$DATABASE_URL" -c "SELECT id FROM briefs ORDER BY created_at DESC LIMIT 1000" >"$WORK/briefs.txt"
cat >"$WORK/rotate.lua" <<'LUA'
local ids = {}
for line in io.lines(os.getenv("BRIEFS_FILE")) do ids[#ids + 1] = line end
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/api/v1/briefs/" .. ids[(n % #ids) + 1] .. "/review")
end
LUA
for round in cold warm; do
    echo "== review JSON under wrk: 16 connections, $DURATION s, 1,000 briefs in turn ($round)"
    BRIEFS_FILE="$WORK/briefs.txt" wrk -t2 -c16 -d"${DURATION}s" --latency -s "$WORK/rotate.lua" \
        -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT" | wrk_summary
done
echo "== beside it, PostgreSQL's own primary-key read of one brief (pgbench, 16 clients, $DURATION s)"
cat >"$WORK/read.sql" <<SQL
\set k random(1, $BRIEFS)
SELECT * FROM briefs WHERE id = md5('seed-brief-' || :k)::uuid;
SQL
pgbench -n -f "$WORK/read.sql" -c 16 -j 2 -T "$DURATION" "$DATABASE_URL" 2>/dev/null | awk '/^tps/ {print "   " $0}'
echo "== summaries at the end: $(summaries)"
echo "== the list statement's plans (EXPLAIN ANALYZE, first page of 51 rows; the app's statement, server/briefs/repo.rs list_filtered)"
python3 - "$ROOT/server/briefs/repo.rs" >"$WORK/list.sql" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
fn = src[src.index("pub async fn list_filtered"):]
sql = re.search(r'r#"(SELECT .*?)"#', fn, re.S).group(1)
sql = re.sub(r' AS "[^"]*"', "", sql)  # sqlx's column annotations
print("PREPARE list_filtered(text, bool, timestamptz, uuid, bigint, uuid, uuid, text[], bool, uuid) AS " + sql + ";")
PY
team=$(psql -q -At "$DATABASE_URL" -c "SELECT id FROM teams WHERE name = 'Serving'")
owner=$(psql -q -At "$DATABASE_URL" -c "SELECT id FROM users WHERE email = 'team-7@example.com'")
explain() {
    echo "-- $1"
    { cat "$WORK/list.sql"; echo "EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) EXECUTE list_filtered($2);"; } |
        psql -q -At "$DATABASE_URL" | sed 's/^/   /'
}
explain "every brief" "NULL, NULL, NULL, NULL, 51, NULL, NULL, NULL, NULL, NULL"
explain "search 'Summariser'" "'%Summariser%', NULL, NULL, NULL, 51, NULL, NULL, NULL, NULL, NULL"
explain "search '00042' (one brief)" "'%00042%', NULL, NULL, NULL, 51, NULL, NULL, NULL, NULL, NULL"
explain "state stale" "NULL, NULL, NULL, NULL, 51, NULL, NULL, '{stale}', NULL, NULL"
explain "failing" "NULL, NULL, NULL, NULL, 51, NULL, NULL, NULL, true, NULL"
explain "team Serving" "NULL, NULL, NULL, NULL, 51, NULL, '$team', NULL, NULL, NULL"
explain "owner team-7, search 'Summariser'" "'%Summariser%', NULL, NULL, NULL, 51, '$owner', NULL, NULL, NULL, NULL"
echo "== server memory"
awk '/^VmHWM|^VmRSS/ {printf "   %s %s %s\n", $1, $2, $3}' "/proc/$SERVER_PID/status"
