#!/usr/bin/env bash
# Wall time of the integration test binary `it` (tests/it/), run as the README's test command
# runs it: through scripts/test.sh, so with the same PostgreSQL, S3 stand-in and test threads, and
# in its two passes (every test but the timed ones, then the `timed` modules on their own).
# Figures: docs/benchmarks.md, "The integration suite's wall time".
#
#   scripts/bench-integration.sh                  # build the binary once, then time 3 runs of it
#   RUNS=5 scripts/bench-integration.sh           # 5 runs
#   BIN=/path/to/it-<hash> scripts/bench-integration.sh
#                                                 # time a binary built before (another commit's),
#                                                 # for a before/after on the same machine
#   RUST_TEST_THREADS=2 scripts/bench-integration.sh
#                                                 # another number of tests at a time in pass 1
#   WHOLE=1 scripts/bench-integration.sh          # one pass over every test (libtest's default
#                                                 # threads unless RUST_TEST_THREADS), as commits
#                                                 # before the two passes ran it
#
# The "before" of docs/benchmarks.md is commit b38249f's binary run as its own scripts/test.sh ran
# it: whole, one test per core (libtest's default), on the machine's PostgreSQL:
#
#   git worktree add /tmp/rentcheck-b38249f b38249f
#   cd /tmp/rentcheck-b38249f && cargo test --locked --test it --no-run   # prints its path
#   scripts/test.sh --run bash -c 'time <that path> -q'                  # b38249f's own test.sh
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
WHOLE=${WHOLE:-}
export BIN RUNS WHOLE
scripts/test.sh --run bash -c '
  set -u
  times=()
  failed=0
  for run in $(seq 1 "$RUNS"); do
    load_before=$(cut -d" " -f1-3 /proc/loadavg)
    start=$(date +%s.%N)
    if [ -n "${WHOLE:-}" ]; then
      threads=${RUST_TEST_THREADS:-libtest default}
      "$BIN" -q >/tmp/bench-integration.$$.log 2>&1 && result="all passed" || { result="FAILED"; failed=1; }
    else
      threads="$RENTCHECK_UNTIMED_THREADS, then the timed tests $RENTCHECK_TIMED_THREADS"
      { RUST_TEST_THREADS=$RENTCHECK_UNTIMED_THREADS "$BIN" -q --skip ::timed:: &&
        RUST_TEST_THREADS=$RENTCHECK_TIMED_THREADS "$BIN" -q ::timed::; } >/tmp/bench-integration.$$.log 2>&1 &&
        result="all passed" || { result="FAILED"; failed=1; }
    fi
    end=$(date +%s.%N)
    seconds=$(echo "$end - $start" | bc)
    times+=("$seconds")
    printf "run %d: %7.1f s  %s  (%s tests at a time; load average %s before, %s after)\n" \
      "$run" "$seconds" "$result" "$threads" "$load_before" \
      "$(cut -d" " -f1-3 /proc/loadavg)"
    [ "$result" = "all passed" ] || grep -E "^(test .* FAILED|failures:|    [a-z_:]+$)" /tmp/bench-integration.$$.log | head -20
  done
  rm -f /tmp/bench-integration.$$.log
  printf "%s\n" "${times[@]}" | sort -n | awk "{ t[NR] = \$1 } END { m = (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2; printf \"median of %d runs: %.1f s\n\", NR, m }"
  exit "$failed"
'
