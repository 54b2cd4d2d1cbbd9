#!/usr/bin/env bash
# Schemathesis (PyPI) against /api/openapi.json with a valid engineer token (results in
# docs/reliability.md). CI runs it after the test suite (.ci/run) against the debug binary the suite
# built:
#
#   BIN=target/debug/rentcheck scripts/schemathesis.sh          # what CI runs
#   scripts/schemathesis.sh                                     # builds and runs the release server
#   MAX_EXAMPLES=300 CHECKS=all scripts/schemathesis.sh         # a longer, stricter run
#
# Schemathesis itself: ST names an executable; without it the pinned version (SCHEMATHESIS_VERSION)
# is installed into a virtual environment of its own (ST_VENV, default target/schemathesis-venv)
# the first time, from PyPI. A fresh database and the server (scripts/lib/server-under-test.sh;
# BIN: a rentcheck binary, else the release one is built). Schemathesis generates valid and
# invalid requests for every documented operation (path ids are random UUIDs, so most reads of one
# item meet 404; briefs it creates are real). Default checks: no 5xx, and status codes, content
# types, response headers and response bodies as documented. Any failure exits non-zero, and so
# does an ERROR or a panic in the server's log.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SCHEMATHESIS_VERSION=${SCHEMATHESIS_VERSION:-4.32.5}
ST_VENV=${ST_VENV:-$ROOT/target/schemathesis-venv}
MAX_EXAMPLES=${MAX_EXAMPLES:-25}
CHECKS=${CHECKS:-not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance}
PORT=${PORT:-18096}
# One worker: CPython 3.11 before 3.11.9 keeps the AST constructor's recursion depth in
# interpreter-wide state (CPython gh-106905), so Hypothesis parsing lambda sources in two
# threads at once can die with "AST constructor recursion depth mismatch"; it did in CI.
WORKERS=${WORKERS:-1}

if [ -z "${ST:-}" ]; then
    ST="$ST_VENV/bin/st"
    if ! "$ST" --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION"; then
        echo "== schemathesis $SCHEMATHESIS_VERSION into $ST_VENV"
        python3 -m venv "$ST_VENV"
        "$ST_VENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION" "hypothesis==${HYPOTHESIS_VERSION:-6.170.27}"
    fi
fi
command -v "$ST" >/dev/null || { echo "set ST to a schemathesis executable (pip install schemathesis)" >&2; exit 2; }
# Schemathesis is not a load test: some of what it sends is meant to fail, keep the log quiet.
export RUST_LOG=${RUST_LOG:-error}
SUT_TOOLS="psql python3 curl"
# shellcheck source=lib/server-under-test.sh
source "$ROOT/scripts/lib/server-under-test.sh"
sut_setup
sut_start_server

"$ST" --version
status=0
"$ST" run "http://127.0.0.1:$PORT/api/openapi.json" \
    --header "Authorization: Bearer $READ_TOKEN" \
    --checks "$CHECKS" \
    --max-examples "$MAX_EXAMPLES" \
    --workers "$WORKERS" \
    --seed "${SEED:-20261129}" \
    --suppress-health-check all \
    "$@" || status=$?
errors=$(grep -c ' ERROR ' "$WORK/server.log" || true)
panics=$(grep -ci panic "$WORK/server.log" || true)
echo "server log: $errors errors, $panics panics"
if [ "$errors" != 0 ] || [ "$panics" != 0 ]; then
    grep -i ' ERROR \|panic' "$WORK/server.log" | head -n 20 >&2
    [ "$status" != 0 ] || status=1
fi
exit "$status"
