#!/usr/bin/env bash
# Regenerates `.sqlx/`, the data sqlx's query macros check every SQL statement against at build time
# (`SQLX_OFFLINE=true` in .cargo/config.toml), or with --check fails when it is out of date (CI).
#
#   scripts/sqlx-prepare.sh           # after changing a statement or a migration; commit .sqlx/
#   scripts/sqlx-prepare.sh --check   # what .ci/run runs
#
# It makes a scratch database on the PostgreSQL server at $ADMIN_URL (default: the local one the
# tests use), applies every migration, runs `cargo sqlx prepare` against it and drops it again.
# Needs sqlx-cli of the same minor version as the sqlx crate:
#   cargo install sqlx-cli --version 0.8.6 --no-default-features --features postgres,rustls --locked
set -euo pipefail
cd "$(dirname "$0")/.."

admin_url=${ADMIN_URL:-${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}}
scratch="rentcheck_sqlx_$$"
base=${admin_url%/*}
export DATABASE_URL="$base/$scratch"

command -v cargo-sqlx >/dev/null || { echo "sqlx-prepare: sqlx-cli is not installed (see the top of this script)" >&2; exit 2; }
cleanup() { sqlx database drop -y -D "$DATABASE_URL" >/dev/null 2>&1 || true; }
trap cleanup EXIT
sqlx database create -D "$DATABASE_URL"
sqlx migrate run --source migrations -D "$DATABASE_URL" >/dev/null
# Only the library and the binary hold checked statements; tests set up data with plain queries.
if [ "${1:-}" = "--check" ]; then
  cargo sqlx prepare --check -- --lib --bins
else
  cargo sqlx prepare -- --lib --bins
  echo "sqlx-prepare: .sqlx/ regenerated; commit it with the change"
fi
