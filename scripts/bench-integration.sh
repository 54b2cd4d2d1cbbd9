#!/usr/bin/env bash
# Wall time of the integration test binary `it` (tests/it/), run whole as the README's test command
# runs it: through scripts/test.sh, so with the same PostgreSQL, S3 stand-in and test threads.
# Figures: docs/benchmarks.md, "The integration suite's wall time".
#
#   scripts/bench-integration.sh                  # build the binary once, then time 3 runs of it
#   RUNS=5 scripts/bench-integration.sh           # 5 runs
#   BIN=/path/to/it-<hash> scripts/bench-integration.sh
#                                                 # time a binary built before (another commit's),
#                                                 # for a before/after on the same machine
#   RUST_TEST_THREADS=2 scripts/bench-integration.sh
#                                                 # another number of tests at a time
#
# The "before" of docs/benchmarks.md is commit b38249f's binary run as its scripts/test.sh ran it,
# one test per core (libtest's default) and so on a 2-core machine:
#
#   git worktree add /tmp/rentcheck-b38249f b38249f
#   (cd /tmp/rentcheck-b38249f && cargo test --locked --test it --no-run)   # prints its path
#   RUST_TEST_THREADS=$(nproc) BIN=<that path> scripts/bench-integration.sh
#
# (That binary reads its fixtures from the worktree it was built in: keep the worktree meanwhile.)
#
# Prints each run's wall time, whether every test passed, and the load average before and after
# (other work on the machine lengthens every figure: compare runs made back to back), then the
# median. A failing run is timed and reported like the others, and makes the script exit 1.
set -euo pipefail
cd "${0%/*}/.."

RUNS=${RUNS:-3}
if [ -z "${BIN:-}" ]; then
  echo "== build (cargo test --locked --test it --no-run)"
  BIN=$(cargo test --locked --test it --no-run 2>&1 | tee /dev/stderr |
    sed -n 's/^ *Executable tests\/it\/main.rs (\(.*\))$/\1/p' | tail -1)
  [ -n "$BIN" ] || { echo "bench-integration: no integration binary in cargo's output" >&2; exit 1; }
fi
[ -x "$BIN" ] || { echo "bench-integration: $BIN is not an executable" >&2; exit 1; }
echo "== $BIN, $RUNS runs, $(nproc) CPUs"

# The timing runs inside scripts/test.sh --run, which sets up the services and the environment
# (RUST_TEST_THREADS among them) exactly as for `scripts/test.sh`.
export BIN RUNS
scripts/test.sh --run bash -c '
  set -u
  times=()
  failed=0
  for run in $(seq 1 "$RUNS"); do
    load_before=$(cut -d" " -f1-3 /proc/loadavg)
    start=$(date +%s.%N)
    if "$BIN" -q >/tmp/bench-integration.$$.log 2>&1; then result="all passed"; else result="FAILED"; failed=1; fi
    end=$(date +%s.%N)
    seconds=$(echo "$end - $start" | bc)
    times+=("$seconds")
    printf "run %d: %7.1f s  %s  (%s tests at a time; load average %s before, %s after)\n" \
      "$run" "$seconds" "$result" "${RUST_TEST_THREADS:-libtest default}" "$load_before" \
      "$(cut -d" " -f1-3 /proc/loadavg)"
    [ "$result" = "all passed" ] || grep -E "^(test .* FAILED|failures:|    [a-z_:]+$)" /tmp/bench-integration.$$.log | head -20
  done
  rm -f /tmp/bench-integration.$$.log
  printf "%s\n" "${times[@]}" | sort -n | awk "{ t[NR] = \$1 } END { m = (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2; printf \"median of %d runs: %.1f s\n\", NR, m }"
  exit "$failed"
'
