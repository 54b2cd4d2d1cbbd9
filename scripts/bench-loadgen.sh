#!/usr/bin/env bash
# The built-in load generator against a local streaming server of known timing (figures:
# docs/benchmarks.md, "The load generator is never the bottleneck").
#
#   scripts/bench-loadgen.sh                          # rates 50 200 400 700 req/s, 10 s each, 3 rounds
#   RATES="100 700" SECONDS_PER_RUN=5 ROUNDS=1 scripts/bench-loadgen.sh
#   BIN=target/release/rentcheck SERVER=target/release/examples/stream_server scripts/bench-loadgen.sh
#
# Builds (release) `rentcheck` and the example `stream_server`, starts the server on 127.0.0.1
# (a role-only chunk at once, then 64 tokens: the first 200 ms after the request arrives, the next
# 20 ms apart, on a fixed schedule), then for each round and rate runs `rentcheck loadgen` for
# about SECONDS_PER_RUN seconds of Poisson arrivals, under /usr/bin/time. Each answer lasts 1.46 s,
# so a rate of R req/s keeps about 1.46 × R streams open (700 req/s: about 1,000).
# It prints per rate: the offered rate; the achieved send rate (requests ÷ the last send's time);
# completed and failed; the most streams open at once; TTFT p50 and p99 as the generator measured
# them, less the same percentiles of the server's own log (arrival to the first token handed to the
# connection); the generator's CPU seconds (user + system) per 1,000 requests; its peak RSS.
# AIPerf and GuideLLM are not run by this script (see docs/benchmarks.md). Loopback only.
set -euo pipefail

RATES=${RATES:-50 200 400 700}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-18431}
TTFT_MS=200
GAP_MS=20
TOKENS=64
cd "$(dirname "$0")/.."
if [[ -z "${BIN:-}" || -z "${SERVER:-}" ]]; then
  cargo build --release --bin rentcheck --example stream_server >&2
  target=${CARGO_TARGET_DIR:-target}
  BIN=${BIN:-$target/release/rentcheck}
  SERVER=${SERVER:-$target/release/examples/stream_server}
fi
[[ -x /usr/bin/time ]] || { echo "needs GNU time at /usr/bin/time" >&2; exit 2; }
# About 1,000 client sockets and as many on the server's side.
ulimit -n "$(ulimit -Hn)"

work=$(mktemp -d)
"$SERVER" "$PORT" "$TTFT_MS" "$GAP_MS" &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 50); do
  curl -sf "http://127.0.0.1:$PORT/log" >/dev/null && break
  sleep 0.1
done

printf '%-6s %-5s %8s %8s %6s %6s %6s %9s %9s %9s %9s %8s %8s\n' \
  round rate offered achieved done failed open ttft_p50 err_p50 ttft_p99 err_p99 cpu_s/1k rss_MiB
for round in $(seq "$ROUNDS"); do
  for rate in $RATES; do
    n=$((rate * SECONDS_PER_RUN))
    curl -sf "http://127.0.0.1:$PORT/log" >/dev/null # forget earlier requests
    /usr/bin/time -f '%U %S %M' -o "$work/time" \
      "$BIN" loadgen --base-url "http://127.0.0.1:$PORT" --model m --input-len 32 \
      --output-len "$TOKENS" --request-rate "$rate" --num-prompts "$n" --seed "$round" \
      --request-timeout 120 --result-file "$work/result.json" 2>/dev/null || true
    curl -sf "http://127.0.0.1:$PORT/log" >"$work/server.json"
    python3 - "$round" "$rate" "$n" "$work/result.json" "$work/server.json" "$work/time" <<'EOF'
import json, sys

round_, rate, n, result, server, timing = sys.argv[1:]
r = json.load(open(result))
log = sorted(json.load(open(server)))
user, system, rss_kib = open(timing).read().split()[:3]

def pct(xs, p):
    # numpy's linear percentile, as the generator computes its own
    if not xs:
        return float("nan")
    k = p / 100 * (len(xs) - 1)
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)

last_send = max(r["start_times"]) or float("nan")
achieved = int(n) / last_send
cpu_per_1k = (float(user) + float(system)) / int(n) * 1000
print(f'{round_:<6} {rate:<5} {float(rate):8.1f} {achieved:8.1f} {r["completed"]:6d} {r["failed"]:6d} '
      f'{r["max_concurrent_requests"]:6d} {r["median_ttft_ms"]:9.2f} {r["median_ttft_ms"] - pct(log, 50):9.2f} '
      f'{r["p99_ttft_ms"]:9.2f} {r["p99_ttft_ms"] - pct(log, 99):9.2f} {cpu_per_1k:8.3f} {int(rss_kib) / 1024:8.1f}')
EOF
  done
done
