#!/usr/bin/env bash
# Peak memory of the server while it takes one large raw upload (16 MiB, the default cap), with the
# raw bytes kept in PostgreSQL and in an S3 bucket (moto's S3-protocol server, scripts/lib/moto.sh;
# above 8 MiB the bytes go up as a multipart upload). Figures: docs/benchmarks.md.
#
#   scripts/rss-upload.sh                              # builds the release binary
#   BIN=target/debug/rentcheck RUNS=5 scripts/rss-upload.sh
#
# For each store, RUNS times: start a server, send a 1 KB upload (so lazily built state exists),
# reset the peak (`echo 5 > /proc/PID/clear_refs` sets VmHWM to the current RSS), POST the body
# with curl, and read VmRSS before and VmHWM after from /proc/PID/status. The growth of the peak
# over the resident size before the upload is what one such upload costs.
set -euo pipefail

PORT=${PORT:-18091}
SIZE=${SIZE:-16777216}
RUNS=${RUNS:-3}
# shellcheck source=lib/server-under-test.sh
source "$(dirname "$0")/lib/server-under-test.sh"
# shellcheck source=lib/moto.sh
source "$(dirname "$0")/lib/moto.sh"
sut_setup

python3 - "$WORK/big.log" "$SIZE" <<'PY'
import sys
path, size = sys.argv[1], int(sys.argv[2])
with open(path, "w") as f:
    n, written = 0, 0
    while written < size:
        line = f"{n:016x} step ok loss=0.{n % 9973:04d}\n"
        line = line[: size - written]
        f.write(line)
        written += len(line)
        n += 1
PY
head -c 1024 "$WORK/big.log" >"$WORK/small.log"
URL="http://127.0.0.1:$PORT/api/v1/briefs/$BRIEF/evidence?kind=log&stage=1"
post() {
    curl -s -o "$WORK/answer.json" -w '%{http_code} %{time_total}\n' -X POST -H "Authorization: Bearer $TOKEN" \
        -H "Content-Type: text/plain" --data-binary "@$1" "$URL"
}
kib() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$SERVER_PID/status"; }

measure() {
    echo "== raw bytes in $1 ($(stat -c %s "$WORK/big.log") B body, binary $BIN)"
    for run in $(seq 1 "$RUNS"); do
        # A fresh server each run: memory a previous upload freed stays resident in the allocator
        # and would hide the next upload's peak.
        sut_start_server
        local before code seconds peak
        read -r code _ < <(post "$WORK/small.log")
        [ "$code" = 201 ] || { echo "warm-up answered $code: $(head -c 300 "$WORK/answer.json")" >&2; exit 1; }
        echo 5 >"/proc/$SERVER_PID/clear_refs"
        before=$(kib VmRSS)
        read -r code seconds < <(post "$WORK/big.log")
        [ "$code" = 201 ] || { echo "upload answered $code: $(head -c 300 "$WORK/answer.json")" >&2; exit 1; }
        peak=$(kib VmHWM)
        awk -v run="$run" -v before="$before" -v peak="$peak" -v s="$seconds" 'BEGIN {
            printf "   run %d: RSS before %6.1f MiB, peak during %6.1f MiB, growth %5.1f MiB, %.2f s\n",
                run, before / 1024, peak / 1024, (peak - before) / 1024, s }'
        sut_stop_server
    done
}

unset RENTCHECK_EVIDENCE_STORE
measure "PostgreSQL (evidence.raw)"
moto_start
measure "an S3 bucket ($RENTCHECK_EVIDENCE_STORE via moto)"
