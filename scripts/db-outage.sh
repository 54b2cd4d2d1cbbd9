#!/usr/bin/env bash
# Database outage under ingest load (results in docs/reliability.md).
#
#   scripts/db-outage.sh                 # 40 s of load, PostgreSQL stopped from t=10 s to t=20 s
#   LOAD=60 DOWN_AT=15 DOWN_FOR=20 WORKERS=32 scripts/db-outage.sh
#   MODE=batch BATCH=100 scripts/db-outage.sh   # the same with batches (evidence/batch)
#   KEYS=0 scripts/db-outage.sh          # single uploads without an Idempotency-Key
#   BIN=target/release/rentcheck scripts/db-outage.sh   # without building first
#
# Starts a PostgreSQL cluster of its own (initdb in a temporary directory, so stopping it harms no
# one), the release server on it, and $WORKERS harness threads that each post small metrics uploads
# one after another. Every upload carries an Idempotency-Key and a label with that key; a harness
# retries an upload (same key, same body) on 503, on a connection error and on a timeout, after
# Retry-After, until it is acknowledged (201, or 200 for a replay). Meanwhile the script stops
# PostgreSQL (`pg_ctl stop -m fast`), waits, and starts it again. With MODE=batch each harness
# posts $BATCH uploads at a time to `evidence/batch`, each item with its own idempotency_key; a
# whole-batch 503 or connection error sends the batch again, and an item answered with anything but
# 200/201 is sent again in the harness's next batch. Afterwards it prints:
#   requests by answer, the slowest answer while the database was down, acknowledged uploads,
#   stored uploads (distinct keys in the database), duplicated keys (stored more than once),
#   lost uploads (acknowledged but not stored), and whether the server recovered by itself.
# With KEYS=0 the single uploads carry no Idempotency-Key (the label still names each one): that
# is the path where uploads arriving together share one INSERT. A retry then cannot be told from a
# new upload, so an upload whose statement committed but whose answer was lost on the way would be
# stored twice; the drill counts such duplicates and fails on them as well.
# Exit status 1 when nothing was acknowledged, anything was lost or duplicated, or the server did
# not recover.
set -euo pipefail

LOAD=${LOAD:-40}
DOWN_AT=${DOWN_AT:-10}
DOWN_FOR=${DOWN_FOR:-10}
WORKERS=${WORKERS:-16}
MODE=${MODE:-single}
BATCH=${BATCH:-100}
KEYS=${KEYS:-1}
case "$MODE" in single|batch) ;; *) echo "MODE is single or batch" >&2; exit 2 ;; esac
PORT=${PORT:-18093}
# The shared set-up of the load scripts, on a PostgreSQL cluster of the drill's own (so stopping it
# harms nothing else): the release server, a brief with its first trial, an agent token.
OWN_POSTGRES=1
# shellcheck source=lib/server-under-test.sh
source "$(dirname "$0")/lib/server-under-test.sh"
sut_setup
sut_start_server

echo "== load ($MODE, keys $([ "$KEYS" = 0 ] && echo off || echo on)): $WORKERS harnesses for ${LOAD}s; PostgreSQL down from t=${DOWN_AT}s for ${DOWN_FOR}s"
(
    sleep "$DOWN_AT"
    echo "   t=${DOWN_AT}s: pg_ctl stop -m fast"
    own_pg_stop fast
    sleep "$DOWN_FOR"
    echo "   t=$((DOWN_AT + DOWN_FOR))s: pg_ctl start"
    own_pg_start
) &
OUTAGE_PID=$!

python3 - "$PORT" "$BRIEF" "$TOKEN" "$LOAD" "$WORKERS" "$DOWN_AT" "$DOWN_FOR" "$WORK/acked.txt" "$MODE" "$BATCH" "$KEYS" <<'PY'
import http.client, json, sys, threading, time, collections
port, brief, token, load, workers, down_at, down_for, acked_path, mode, batch, keys = sys.argv[1:]
load, workers, down_at, down_for, batch = float(load), int(workers), float(down_at), float(down_for), int(batch)
path = f"/api/v1/briefs/{brief}/evidence"
start = time.monotonic()
stop_new_at = start + load
give_up_at = stop_new_at + 60  # an unacknowledged upload is retried at most this long
lock = threading.Lock()
answers = collections.Counter()
acked = {}
slowest_down = 0.0
slowest_up = 0.0

def send(conn, url, body, headers):
    """POSTs once: (conn, status, Retry-After, body), or (None, None, None, None) after counting a
    connection error (refused, reset, timeout) and waiting half a second."""
    global slowest_down, slowest_up
    sent = time.monotonic()
    try:
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
        conn.request("POST", url, body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
    except Exception as e:
        if conn is not None:
            conn.close()
        with lock: answers[type(e).__name__] += 1
        time.sleep(0.5)
        return None, None, None, None
    took, t = time.monotonic() - sent, sent - start
    with lock:
        if down_at - 1 <= t <= down_at + down_for + 1:
            slowest_down = max(slowest_down, took)
        else:
            slowest_up = max(slowest_up, took)
    return conn, r.status, r.getheader("Retry-After"), data

def worker(w):
    conn = None
    n = 0
    while time.monotonic() < stop_new_at:
        key = f"w{w}-{n}"
        n += 1
        body = json.dumps({"kind": "metrics", "stage": 3, "labels": {"upload_key": key},
                           "data": {"metrics": {"drill.worker": w, "drill.sequence": n}}})
        while True:
            if time.monotonic() > give_up_at:
                with lock: answers["gave up"] += 1
                break
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            if keys != "0":
                headers["Idempotency-Key"] = key
            conn, status, retry_after, data = send(conn, path, body, headers)
            if status is None:
                continue
            with lock: answers[str(status)] += 1
            if status in (200, 201):
                with lock: acked[key] = json.loads(data)["id"]
                break
            if status == 503:
                time.sleep(float(retry_after or 1) / 5)  # a fifth of Retry-After: keep the drill short
                continue
            print(f"unexpected {status}: {data[:200]!r}", file=sys.stderr)
            break

def batch_worker(w):
    """Sends $BATCH items at a time; items not yet acknowledged go out again in the next batch."""
    conn = None
    n = 0
    pending = []  # (key, item) not yet acknowledged
    while time.monotonic() < stop_new_at or pending:
        if time.monotonic() > give_up_at:
            with lock: answers["gave up"] += len(pending)
            break
        while len(pending) < batch and time.monotonic() < stop_new_at:
            key = f"w{w}-{n}"
            n += 1
            pending.append((key, {"kind": "metrics", "stage": 3, "labels": {"upload_key": key},
                                  "idempotency_key": key,
                                  "data": {"metrics": {"drill.worker": w, "drill.sequence": n}}}))
        body = json.dumps({"items": [item for _, item in pending]})
        conn, status, retry_after, data = send(conn, path + "/batch", body, {
            "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        if status is None:
            continue
        with lock: answers[f"batch {status}"] += 1
        if status == 503:
            time.sleep(float(retry_after or 1) / 5)
            continue
        if status != 207:
            print(f"unexpected {status}: {data[:200]!r}", file=sys.stderr)
            with lock: answers["gave up"] += len(pending)
            break
        still = []
        for (key, item), answer in zip(pending, json.loads(data)["items"]):
            with lock:
                answers[f"item {answer['status']}"] += 1
                if answer["status"] in (200, 201):
                    acked[key] = answer["id"]
                else:
                    still.append((key, item))
        pending = still

target = batch_worker if mode == "batch" else worker
threads = [threading.Thread(target=target, args=(w,)) for w in range(workers)]
for t in threads: t.start()
for t in threads: t.join()
print("   answers: " + ", ".join(f"{k} × {v}" for k, v in sorted(answers.items())))
print(f"   slowest answer while the database was down: {slowest_down * 1000:.0f} ms; otherwise {slowest_up * 1000:.0f} ms")
with open(acked_path, "w") as f:
    for key, eid in acked.items():
        f.write(f"{key}\t{eid}\n")
PY
wait "$OUTAGE_PID"

READY=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/readyz")
ALIVE=no; kill -0 "$SERVER_PID" 2>/dev/null && ALIVE=yes

"$PG_BIN/psql" -q -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<SQL
CREATE TEMP TABLE acked (key text, evidence_id uuid);
\copy acked FROM '$WORK/acked.txt'
CREATE TABLE drill_result AS
SELECT (SELECT count(*) FROM acked) AS acknowledged,
       (SELECT count(DISTINCT labels ->> 'upload_key') FROM evidence) AS stored,
       (SELECT count(*) FROM (SELECT 1 FROM evidence GROUP BY labels ->> 'upload_key' HAVING count(*) > 1) d) AS duplicated,
       (SELECT count(*) FROM acked a WHERE NOT EXISTS (SELECT 1 FROM evidence e WHERE e.id = a.evidence_id)) AS lost,
       (SELECT count(*) FROM evidence e WHERE NOT EXISTS (SELECT 1 FROM acked a WHERE a.key = e.labels ->> 'upload_key')) AS stored_unacknowledged;
SQL
read -r ACKED STORED DUPS LOST UNACKED < <("$PG_BIN/psql" -At -F ' ' "$DATABASE_URL" -c 'SELECT * FROM drill_result')
echo "== result"
echo "   acknowledged $ACKED, stored $STORED, duplicated $DUPS, lost $LOST, stored but never acknowledged $UNACKED"
echo "   server still running: $ALIVE; /readyz after the outage: $READY"
echo "   server log: $(grep -c 'database unavailable' "$WORK/server.log" || true) 'database unavailable' warnings, $(grep -ci 'panic' "$WORK/server.log" || true) panics"
[ "$ACKED" -gt 0 ] && [ "$LOST" = 0 ] && [ "$DUPS" = 0 ] && [ "$ALIVE" = yes ] && [ "$READY" = 200 ]
