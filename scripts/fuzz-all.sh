#!/usr/bin/env bash
# Runs every parser's cargo-fuzz target for SECONDS each (default 600), PARALLEL at a time
# (default 2), seeded with the fixtures of its kind (tests/fixtures/<kind>, real outputs with their
# provenance), and prints a Markdown table row per target:
# executions, exec/s, seed files, corpus size after, peak RSS, crashes. See docs/fuzzing.md.
#
#   cargo install cargo-fuzz --locked
#   scripts/fuzz-all.sh                      # 17 targets × 10 min / 2
#   SECONDS_PER_TARGET=60 PARALLEL=1 scripts/fuzz-all.sh
set -euo pipefail
SECONDS_PER_TARGET=${SECONDS_PER_TARGET:-600}
PARALLEL=${PARALLEL:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT/fuzz"
export RUSTC_BOOTSTRAP=1   # the stable toolchain, with -Zsanitizer=address allowed
cargo fuzz build >/dev/null 2>&1 || cargo fuzz build
LOGS=$(mktemp -d /tmp/rentcheck-fuzz.XXXXXX)

# Fixture folder(s) seeding each target.
seeds_for() {
    case "$1" in
        parse_vllm_window) echo vllm-metrics ;;
        parse_dcgm_exporter_window) echo dcgm-exporter ;;
        parse_bench_serving_slo) echo bench-serving ;;
        # prefixed and plain nccl-tests logs: mpirun, srun, Ray and kubectl shapes
        strip_launcher_prefixes) echo nccl-tests ;;
        *) echo "${1#parse_}" | tr '_' '-' ;;
    esac
}

run_one() {
    local target=$1 kind dir n
    kind=$(seeds_for "$target")
    mkdir -p "corpus/$target"
    find "$ROOT/tests/fixtures/$kind" -maxdepth 1 -type f -size -200k ! -name PROVENANCE.md \
        -exec cp {} "corpus/$target/" \;
    n=$(find "corpus/$target" -type f | wc -l)
    cargo fuzz run "$target" -- -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 \
        >"$LOGS/$target.log" 2>&1 || true
    awk -v t="$target" -v seeds="$n" -v corpus="$(find "corpus/$target" -type f | wc -l)" \
        -v crashes="$(find "artifacts/$target" -type f 2>/dev/null | wc -l)" '
        /stat::number_of_executed_units/ {execs=$2}
        /stat::average_exec_per_sec/ {rate=$2}
        /stat::peak_rss_mb/ {rss=$2}
        END {printf "| `%s` | %s | %s | %s | %s | %s | %s |\n", t, execs, rate, seeds, corpus, rss, crashes}' \
        "$LOGS/$target.log"
}

echo "| target | executions | exec/s | seed files | corpus after | peak RSS (MB) | crashes |"
echo "|---|---|---|---|---|---|---|"
for target in $(cargo fuzz list); do
    while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do sleep 1; done
    run_one "$target" &
done
wait
echo "logs: $LOGS"
