#!/usr/bin/env bash
# Speed of the commitments portfolio on a team's data at scale (target and figures:
# docs/benchmarks.md): the same method as scripts/bench-pages.sh, on the same database.
#
#   scripts/bench-commitments.sh                          # 10,000 briefs, 2,000 commitments
#   BRIEFS=200 REQUESTS=40 scripts/bench-commitments.sh   # a small run of the same shape
#   REQUESTS=8 WARMUPS=1 scripts/bench-commitments.sh     # when a list takes seconds
#
# Builds the release binary (BIN=<a rentcheck binary> skips the build), seeds the database
# `rentcheck_pages_<BRIEFS>` on $PGBASE with scripts/seed-scale.sh unless it already holds that
# many briefs (it must then hold the seed's commitments too), migrates it, starts the server, waits
# until the review summaries are current, then for each page sends $REQUESTS requests from 4
# concurrent clients after $WARMUPS warm-ups per client (20 in all by default), as a signed-in
# manager, and prints p50 / p95 / max in ms and the answer's size: the portfolio `/commitments` (all, and filtered by
# state), its CSV, `GET /api/v1/commitments` (all, and one state), and one commitment's page and
# JSON. Then how many statements one request of each list runs (PostgreSQL's committed
# transactions of the database before and after it, nothing else sending), the states of the
# commitments, and the server's VmHWM.
set -euo pipefail

BRIEFS=${BRIEFS:-10000}
REQUESTS=${REQUESTS:-200}
WARMUPS=${WARMUPS:-5}
WAIT=${WAIT:-900}
PORT=${PORT:-18091}
PGBASE=${PGBASE:-postgres://postgres@127.0.0.1:5432}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DB="rentcheck_pages_$BRIEFS"
WORK=$(mktemp -d /tmp/rentcheck-commitments.XXXXXX)
SERVER_PID=""
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
for tool in psql python3 curl; do
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
commitments=$(psql -q -At "$DATABASE_URL" -c "SELECT count(*) FROM commitments")
[ "$commitments" -gt 0 ] || { echo "$DB holds no commitments: seed a fresh database with scripts/seed-scale.sh" >&2; exit 2; }
echo "== $DB: $(psql -q -At "$DATABASE_URL" -c "SELECT format('%s briefs, %s ledger lines, %s commitments', (SELECT count(*) FROM briefs), (SELECT count(*) FROM ledger_lines), (SELECT count(*) FROM commitments))")"
PASSWORD="commitments-bench-password-$$"
psql -q "$DATABASE_URL" -c "DELETE FROM users WHERE email = 'commitments@example.com'"
echo "$PASSWORD" | "$BIN" user add --email commitments@example.com --role manager --password-stdin >/dev/null
TOKEN=$("$BIN" token mint --email commitments@example.com --role manager --ttl 2h 2>/dev/null | tail -n 1)

"$BIN" serve >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
echo "== waiting (at most $WAIT s) for the review summaries: the watcher remakes every brief's after a start"
for _ in $(seq 1 50); do
    [ "$(psql -q -At "$DATABASE_URL" -c "SELECT count(*) FROM review_changes")" -gt 0 ] && break
    sleep 0.1
done
start=$(date +%s)
while [ "$(psql -q -At "$DATABASE_URL" -c "SELECT count(*) FROM review_changes")" -gt 0 ] && [ $(( $(date +%s) - start )) -lt "$WAIT" ]; do sleep 5; done
echo "   after $(( $(date +%s) - start )) s: $(psql -q -At "$DATABASE_URL" -c "SELECT count(*) FROM review_changes") briefs still queued"

jar="$WORK/cookies.txt"
csrf=$(curl -fsS -c "$jar" "http://127.0.0.1:$PORT/login" | sed -n 's/.*name="csrf_token" value="\([^"]*\)".*/\1/p' | head -n 1)
curl -fsS -o /dev/null -b "$jar" -c "$jar" --data-urlencode "email=commitments@example.com" \
    --data-urlencode "password=$PASSWORD" --data-urlencode "csrf_token=$csrf" "http://127.0.0.1:$PORT/login"
SESSION=$(awk '$6 == "rentcheck_session" {print $7}' "$jar")
# One running commitment from the middle of the list.
CID=$(psql -q -At "$DATABASE_URL" -c "SELECT id FROM commitments WHERE state = 'active' ORDER BY start_date DESC, id DESC OFFSET (SELECT count(*) / 4 FROM commitments) LIMIT 1")
echo "   states now: $(psql -q -At "$DATABASE_URL" -c "SELECT string_agg(state || ' ' || n, ', ' ORDER BY state) FROM (SELECT state, count(*) AS n FROM commitments GROUP BY state) s")"

echo "== pages: $REQUESTS requests each, 4 clients, after $WARMUPS warm-ups per client (ms)"
python3 - "$PORT" "$SESSION" "$TOKEN" "$CID" "$REQUESTS" "$WARMUPS" <<'PY'
import http.client, statistics, sys, threading, time
port, session, token, cid, n, warm = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
pages = [
    ("portfolio /commitments", "/commitments", "cookie"),
    ("portfolio, state active", "/commitments?state=active", "cookie"),
    ("portfolio, state renewal-due", "/commitments?state=renewal-due", "cookie"),
    ("portfolio CSV", "/commitments.csv", "cookie"),
    ("API list", "/api/v1/commitments", "bearer"),
    ("API list, state renewal-due", "/api/v1/commitments?state=renewal-due", "bearer"),
    ("commitment page", f"/commitments/{cid}", "cookie"),
    ("commitment JSON", f"/api/v1/commitments/{cid}", "bearer"),
]
def get(conn, path, auth):
    headers = {"Cookie": f"rentcheck_session={session}"} if auth == "cookie" else {"Authorization": f"Bearer {token}"}
    for attempt in range(2):
        t = time.perf_counter()
        try:
            conn.request("GET", path, headers=headers)
            r = conn.getresponse(); body = r.read()
            break
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            # The server closed a connection that sat idle; open it again (not timed).
            conn.close()
            if attempt:
                raise
    if r.status != 200:
        raise SystemExit(f"{path}: {r.status}")
    return (time.perf_counter() - t) * 1000, len(body)
print(f"   {'page':<30} {'p50':>7} {'p95':>7} {'max':>7} {'bytes':>9}")
for name, path, auth in pages:
    conns = [http.client.HTTPConnection("127.0.0.1", int(port), timeout=600) for _ in range(4)]
    size = 0
    for c in conns:
        for _ in range(warm): size = get(c, path, auth)[1]
    times, lock = [], threading.Lock()
    def worker(c, k):
        for _ in range(k):
            ms, _ = get(c, path, auth)
            with lock: times.append(ms)
    threads = [threading.Thread(target=worker, args=(c, n // 4)) for c in conns]
    for t in threads: t.start()
    for t in threads: t.join()
    times.sort()
    print(f"   {name:<30} {statistics.median(times):7.1f} {times[int(len(times) * 0.95) - 1]:7.1f} {times[-1]:7.1f} {size:9d}", flush=True)
PY

echo "== statements per request (committed transactions of $DB around one request; the server's background tasks may add a few)"
xacts() { sleep 1.5; psql -q -At "$DATABASE_URL" -c "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"; }
for page in "/commitments" "/api/v1/commitments" "/commitments/$CID"; do
    case "$page" in /api/*) auth=(-H "Authorization: Bearer $TOKEN") ;; *) auth=(-b "rentcheck_session=$SESSION") ;; esac
    before=$(xacts)
    curl -fsS -o /dev/null "${auth[@]}" "http://127.0.0.1:$PORT$page"
    after=$(xacts)
    # Each psql reading the count is one transaction itself.
    echo "   $page: $(( after - before - 1 ))"
done
echo "== server memory"
awk '/^VmHWM|^VmRSS/ {printf "   %s %s %s\n", $1, $2, $3}' "/proc/$SERVER_PID/status"
