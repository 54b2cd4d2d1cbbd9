#!/usr/bin/env bash
# Schemathesis (PyPI) against /api/openapi.json with a valid engineer token (issue 9; results in
# docs/reliability.md).
#
#   python3 -m venv /tmp/st-venv && /tmp/st-venv/bin/pip install schemathesis
#   ST=/tmp/st-venv/bin/st scripts/schemathesis.sh
#   ST=... MAX_EXAMPLES=200 CHECKS=all scripts/schemathesis.sh
#
# A fresh database and the release server (scripts/lib/server-under-test.sh). Schemathesis generates
# valid and invalid requests for every documented operation (path ids are random UUIDs, so most
# reads of one item meet 404; briefs it creates are real). Default checks: no 5xx, and status
# codes, content types, response headers and response bodies as documented.
set -euo pipefail

ST=${ST:-st}
MAX_EXAMPLES=${MAX_EXAMPLES:-100}
CHECKS=${CHECKS:-not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance}
PORT=${PORT:-18096}
command -v "$ST" >/dev/null || { echo "set ST to a schemathesis executable (pip install schemathesis)" >&2; exit 2; }
# Schemathesis is not a load test: some of what it sends is meant to fail, keep the log quiet.
export RUST_LOG=${RUST_LOG:-error}
# shellcheck source=lib/server-under-test.sh
source "$(dirname "$0")/lib/server-under-test.sh"
sut_setup
sut_start_server

"$ST" --version
"$ST" run "http://127.0.0.1:$PORT/api/openapi.json" \
    --header "Authorization: Bearer $READ_TOKEN" \
    --checks "$CHECKS" \
    --max-examples "$MAX_EXAMPLES" \
    --workers 2 \
    --seed "${SEED:-20261129}" \
    --suppress-health-check all \
    "$@"
echo "server log: $(grep -c ' ERROR ' "$WORK/server.log" || true) errors, $(grep -ci panic "$WORK/server.log" || true) panics"
