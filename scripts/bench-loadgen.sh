#!/usr/bin/env bash
# The built-in load generator, and optionally AIPerf and GuideLLM beside it, against a local
# streaming server of known timing (figures: docs/benchmarks.md, "The load generator against a
# server of known timing").
#
#   scripts/bench-loadgen.sh                          # rates 50 200 400 700 req/s, 10 s each, 3 rounds
#   RATES="100 700" SECONDS_PER_RUN=5 ROUNDS=1 scripts/bench-loadgen.sh
#   BIN=target/release/rentcheck SERVER=target/release/examples/stream_server scripts/bench-loadgen.sh
#   CLIENTS="rentcheck aiperf guidellm" scripts/bench-loadgen.sh   # = scripts/bench-loadgen-peers.sh
#   KEEP=/tmp/runs scripts/bench-loadgen.sh          # keep each run's result, output and server log
#
# Builds (release) `rentcheck` and the example `stream_server`, starts the server on 127.0.0.1
# (a role-only chunk at once, then 64 tokens: the first 200 ms after the request arrives, the next
# 20 ms apart, on a fixed schedule), then for each round, rate and client (interleaved, in the
# order of CLIENTS) sends about SECONDS_PER_RUN seconds of Poisson arrivals at the rate
# (N = rate × SECONDS_PER_RUN requests of 32 prompt and 64 output tokens, streamed from
# /v1/completions), under /usr/bin/time and a sampler of the client's process tree. Each answer
# lasts 1.46 s, so a rate of R req/s keeps about 1.46 × R streams open (700 req/s: about 1,000).
#
# The peers, each pinned in a virtual environment of its own, installed from PyPI on first use:
# AIPerf 0.13.0 in $VENVS/aiperf, GuideLLM 0.8.1 in $VENVS/guidellm (VENVS: target/bench-venvs).
# Both need a tokenizer for their synthetic prompts; a small one is built offline into
# target/bench-tokenizer, and both run with HF_HUB_OFFLINE=1 (no model hub is reached).
#
# It prints per client, round and rate: the offered rate; the achieved send rate (requests sent − 1
# over the span from the first send to the last); requests sent, completed and failed; the most
# streams open at once; TTFT p50 and p99 as the client reported them, and their error (the same
# percentile of the server's own log subtracted: arrival to the first token handed to the
# connection); CPU seconds per 1,000 requests sent, from GNU time (user + system of the client and
# the children it waited for) and from the sampler (every process of the tree, summed); the
# largest single process's peak RSS (GNU time) and the tree's peak PSS summed (the sampler); and
# the processes seen; with more than one round, then the median of each column per client and rate.
# Loopback only.
set -euo pipefail

RATES=${RATES:-50 200 400 700}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-rentcheck}
PORT=${PORT:-18431}
TTFT_MS=200
GAP_MS=20
INPUT_TOKENS=32
TOKENS=64
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
if [[ -z "${BIN:-}" || -z "${SERVER:-}" ]]; then
  cargo build --release --bin rentcheck --example stream_server >&2
  BIN=${BIN:-$target/release/rentcheck}
  SERVER=${SERVER:-$target/release/examples/stream_server}
fi
VENVS=${VENVS:-$target/bench-venvs}
TOKENIZER=$target/bench-tokenizer
helper=$PWD/scripts/lib/loadgen-clients.py
[[ -x /usr/bin/time ]] || { echo "needs GNU time at /usr/bin/time" >&2; exit 2; }
# About 1,000 client sockets and as many on the server's side.
ulimit -n "$(ulimit -Hn)"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1

# A peer's virtual environment, made and filled on first use: venv NAME PIN.
venv() {
  if [[ ! -x "$VENVS/$1/bin/$1" ]]; then
    echo "installing $2 into $VENVS/$1" >&2
    python3 -m venv "$VENVS/$1"
    "$VENVS/$1/bin/pip" install -q "$2" >&2
  fi
  if [[ ! -f "$TOKENIZER/tokenizer.json" ]]; then
    "$VENVS/$1/bin/python" "$helper" tokenizer "$TOKENIZER" >&2
  fi
}
for client in $CLIENTS; do
  case $client in
    rentcheck) ;;
    aiperf) venv aiperf aiperf==0.13.0 ;;
    guidellm) venv guidellm guidellm==0.8.1 ;;
    *) echo "unknown client $client (rentcheck, aiperf, guidellm)" >&2; exit 2 ;;
  esac
done

work=$(mktemp -d)
"$SERVER" "$PORT" "$TTFT_MS" "$GAP_MS" &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 50); do
  curl -sf "http://127.0.0.1:$PORT/log" >/dev/null && break
  sleep 0.1
done

# One client's run, its result left in $work/out: run_client CLIENT RATE N SEED.
run_client() {
  local client=$1 rate=$2 n=$3 seed=$4
  # A run that cannot keep up may take longer than its schedule; past this it is cut off.
  local limit=$((SECONDS_PER_RUN * 6 + 120))
  rm -rf "$work/out"
  case $client in
    rentcheck)
      timeout "$limit" "$BIN" loadgen --base-url "http://127.0.0.1:$PORT" --model m \
        --input-len "$INPUT_TOKENS" --output-len "$TOKENS" --request-rate "$rate" \
        --num-prompts "$n" --seed "$seed" --request-timeout 120 --result-file "$work/out" ;;
    aiperf)
      # AIPerf 0.13 in offline mode looks a tokenizer up in the hub's cache only, never as a local
      # directory; without it, a local directory is loaded as is and nothing is fetched.
      env -u HF_HUB_OFFLINE -u TRANSFORMERS_OFFLINE \
        timeout "$limit" "$VENVS/aiperf/bin/aiperf" profile --model m --tokenizer "$TOKENIZER" \
        --url "http://127.0.0.1:$PORT" --endpoint-type completions --streaming \
        --request-rate "$rate" --arrival-pattern poisson --request-count "$n" \
        --isl "$INPUT_TOKENS" --isl-stddev 0 --osl "$TOKENS" --osl-stddev 0 \
        --extra-inputs ignore_eos:true --random-seed "$seed" --request-timeout-seconds 120 \
        --ui-type none --artifact-dir "$work/out" ;;
    guidellm)
      mkdir -p "$work/out"
      timeout "$limit" "$VENVS/guidellm/bin/guidellm" run \
        --backend "kind=openai_http,target=http://127.0.0.1:$PORT,model=m,request_format=/v1/completions,validate_backend=false,timeout=120" \
        --profile "kind=poisson,rate=$rate" --constraint "kind=max_requests,count=$n" \
        --tokenizer "kind=hf_auto,model=$TOKENIZER" \
        --data "kind=synthetic_text,prompt_tokens=$INPUT_TOKENS,output_tokens=$TOKENS" \
        --seed "kind=static,value=$seed" --output "kind=json,path=$work/out/benchmarks.json" \
        --disable-console ;;
  esac
}

printf '%-9s %-5s %7s %8s %6s %6s %6s %5s %8s %8s %8s %8s %8s %8s %7s %7s %5s\n' \
  client round offered achieved sent done failed open ttft_p50 err_p50 ttft_p99 err_p99 \
  cpu_s/1k tree_cpu rss_MiB pss_MiB procs
# Other work on the machine shows here: the load average as each round begins and at the end.
for round in $(seq "$ROUNDS"); do
  echo "# round $round, $(date -u +%H:%M:%S) UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  for rate in $RATES; do
    for client in $CLIENTS; do
      n=$((rate * SECONDS_PER_RUN))
      curl -sf "http://127.0.0.1:$PORT/log" >/dev/null # forget earlier requests
      /usr/bin/time -f '%U %S %M' -o "$work/time" \
        bash -c "$(declare -p work BIN VENVS TOKENIZER PORT INPUT_TOKENS TOKENS SECONDS_PER_RUN); \
                 $(declare -f run_client); run_client $client $rate $n $round" \
        >"$work/$client.log" 2>&1 &
      client_pid=$!
      python3 "$helper" usage "$client_pid" "$work/usage" &
      sampler_pid=$!
      wait "$client_pid" || true
      wait "$sampler_pid" || true
      curl -sf "http://127.0.0.1:$PORT/log" >"$work/server.json"
      python3 "$helper" row "$client" "$round" "$rate" "$n" "$work/out" "$work/server.json" \
        "$work/time" "$work/usage" | tee -a "$work/rows"
      if [[ -n "${KEEP:-}" ]]; then
        mkdir -p "$KEEP/$round-$rate-$client"
        cp -r "$work/out" "$work/$client.log" "$work/server.json" "$KEEP/$round-$rate-$client/" 2>/dev/null || true
      fi
    done
  done
done
echo "# end, $(date -u +%H:%M:%S) UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)"
if ((ROUNDS > 1)); then
  python3 "$helper" medians "$work/rows"
fi
