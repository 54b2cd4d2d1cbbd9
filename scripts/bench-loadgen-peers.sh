#!/usr/bin/env bash
# rentcheck loadgen, AIPerf 0.13 and GuideLLM 0.8 interleaved against one local streaming server of
# known timing: scripts/bench-loadgen.sh with CLIENTS="rentcheck aiperf guidellm" (its header says
# what is run, measured and printed; the same RATES, SECONDS_PER_RUN, ROUNDS, BIN, SERVER apply).
#
#   scripts/bench-loadgen-peers.sh                    # rates 50 200 400 700 req/s, 10 s each, 3 rounds
#   RATES="100 700" SECONDS_PER_RUN=5 ROUNDS=1 scripts/bench-loadgen-peers.sh
#   KEEP=/tmp/runs scripts/bench-loadgen-peers.sh     # keep each run's result files there
set -euo pipefail
CLIENTS=${CLIENTS:-rentcheck aiperf guidellm} exec "$(dirname "$0")/bench-loadgen.sh" "$@"
