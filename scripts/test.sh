#!/usr/bin/env bash
# The test command. It makes sure that what the test suite needs is on this machine, installing
# what is missing, then runs the whole suite (`cargo test --workspace --locked`: the server and the
# engine crate), against a throwaway PostgreSQL of its own (below).
#
#   scripts/test.sh                   # set up what is missing, then the whole suite in two passes
#   scripts/test.sh --test it demo    # set up, then cargo test --workspace --locked with these arguments
#   scripts/test.sh --check           # only say what is present and what would be installed
#   scripts/test.sh --setup-only      # set up what is missing, run nothing
#   scripts/test.sh --run CMD [ARG…]  # set up, then run CMD instead of cargo test (.ci/run does)
#
# The whole suite runs in two passes (docs/benchmarks.md has the figures):
#   1. every test but the timed ones, two per core up to 16 (RUST_TEST_THREADS, when set, says
#      otherwise): many tests wait on the processes, clusters and fake servers they start, and one
#      per core left the cores idle a quarter of the run;
#   2. the timed tests, those in a module named `timed` (a bound in milliseconds or seconds on work
#      a busy machine slows: the load generator's TPOT to ±1 ms, the compactor's round bound), one
#      per core, with none of the first pass's tests beside them.
# With arguments it is one pass, as cargo test runs it.
#
# What the suite needs, each part skipped when it is present:
#   rust        cargo and rustc at least the rust-version of Cargo.toml; never installed here
#               (https://rustup.rs says how).
#   postgresql  PostgreSQL's programs: RENTCHECK_PG_BIN_DIR when set, else on PATH or in
#               /usr/lib/postgresql/*/bin (Debian: postgresql).
#   chromium    a browser and its WebDriver for the browser tests: CHROME and CHROMEDRIVER when
#               set, else chromium and chromedriver on PATH (Debian: chromium, chromium-driver).
#   curl        the token page's curl line is run as written (Debian: curl).
#   moto        an S3-protocol server for the object-store tests: RENTCHECK_TEST_S3_ENDPOINT when
#               set, else a Python that has moto's server (RENTCHECK_TEST_PYTHON, the virtual
#               environment below, or python3), else `moto[server]` installed into the virtual
#               environment RENTCHECK_TEST_VENV (default ~/.cache/rentcheck/test-venv): Debian's
#               python3 refuses `pip install` outside one (Debian: python3, python3-venv).
# Debian packages are installed with apt-get when this runs as root; as another user it prints the
# one apt-get line to run as root and stops, having changed nothing. The virtual environment needs
# no root and is made by whoever runs this.
#
# Before the tests: a throwaway PostgreSQL cluster of its own on a free port (trust, loopback only),
# its files in memory (/dev/shm) when that has room, stopped and removed when this script ends.
# TEST_DATABASE_URL names another server to use instead (its user let in without a password),
# e.g. TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres for the machine's own.
set -euo pipefail
cd "${0%/*}/.."

MOTO='moto[server]==5.2.1'
mode=test
run=()
case "${1:-}" in
  --check) mode=check; shift ;;
  --setup-only) mode=setup; shift ;;
  --run) mode=run; shift; run=("$@"); set -- ;;
esac
[ "$mode" = run ] && [ ${#run[@]} -eq 0 ] && { echo "test.sh: --run needs a command" >&2; exit 2; }

say() { echo "test.sh: $*"; }
is_root() { [ "$(id -u)" = 0 ]; }
venv=${RENTCHECK_TEST_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/rentcheck/test-venv}

# --- What is here ---------------------------------------------------------------------------------
# Each `have_*` succeeds when its part is present and leaves where in `found`.
found=

have_rust() {
  command -v cargo >/dev/null && command -v rustc >/dev/null || return 1
  local need have
  need=$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' Cargo.toml)
  have=$(rustc --version | sed -n 's/^rustc \([0-9]*\.[0-9]*\).*/\1/p')
  found="rustc $have"
  # Compared as major.minor numbers.
  [ "${have%%.*}" -gt "${need%%.*}" ] || { [ "${have%%.*}" -eq "${need%%.*}" ] && [ "${have#*.}" -ge "${need#*.}" ]; }
}

pg_tools_in() { [ -x "$1/initdb" ] && [ -x "$1/pg_ctl" ] && [ -x "$1/psql" ] && [ -x "$1/createdb" ]; }
have_postgresql() {
  if [ -n "${RENTCHECK_PG_BIN_DIR:-}" ]; then
    pg_tools_in "$RENTCHECK_PG_BIN_DIR" && found=$RENTCHECK_PG_BIN_DIR
    return
  fi
  local initdb dir
  if initdb=$(command -v initdb) && pg_tools_in "${initdb%/*}"; then
    found=${initdb%/*}
    return 0
  fi
  # Debian keeps them off PATH: the newest version's directory.
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V); do
    pg_tools_in "$dir" && found=$dir
  done
  [ -n "$found" ]
}

have_chromium() {
  local browser driver
  browser=${CHROME:-$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)}
  driver=${CHROMEDRIVER:-$(command -v chromedriver || true)}
  [ -n "$browser" ] && [ -x "$browser" ] && [ -n "$driver" ] && [ -x "$driver" ] && found="$browser, $driver"
}

have_curl() { found=$(command -v curl); }

# The Python the tests start moto with: RENTCHECK_TEST_PYTHON, else the virtual environment, else
# python3 — whichever first has moto's server.
test_python=
have_moto() {
  if [ -n "${RENTCHECK_TEST_S3_ENDPOINT:-}" ]; then
    found="the S3 server at $RENTCHECK_TEST_S3_ENDPOINT"
    return 0
  fi
  local python
  for python in "${RENTCHECK_TEST_PYTHON:-}" "$venv/bin/python3" "$(command -v python3 || true)"; do
    if [ -n "$python" ] && [ -x "$python" ] && "$python" -c 'import moto.server' 2>/dev/null; then
      test_python=$python
      found="moto in $python"
      return 0
    fi
  done
  return 1
}
# Debian's python3 makes a virtual environment only with python3-venv (its ensurepip).
have_venv_module() { command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null; }

parts=(rust postgresql chromium curl moto)
declare -A packages=(
  [postgresql]="postgresql"
  [chromium]="chromium chromium-driver"
  [curl]="curl"
)

# --- Look, and say what is missing ---------------------------------------------------------------
will=will
[ "$mode" = check ] && will=would
missing=()
wanted=()
for part in "${parts[@]}"; do
  found=
  if "have_$part"; then
    say "$part: present ($found)"
    continue
  fi
  missing+=("$part")
  case "$part" in
    rust)
      say "rust: missing or too old (${found:-no cargo/rustc on PATH}); Cargo.toml asks for" \
          "$(sed -n 's/^rust-version *= *"\(.*\)".*/\1/p' Cargo.toml) or newer"
      ;;
    moto)
      if have_venv_module; then
        say "moto: missing; $MOTO $will be installed into $venv"
      else
        wanted+=(python3 python3-venv)
        say "moto: missing; needs python3 and python3-venv (Debian), then $MOTO $will be installed into $venv"
      fi
      ;;
    *)
      read -r -a pkgs <<<"${packages[$part]}"
      wanted+=("${pkgs[@]}")
      say "$part: missing (Debian: ${packages[$part]})"
      ;;
  esac
done

if [ ${#missing[@]} -eq 0 ]; then
  say "nothing to install"
fi
if [ "$mode" = check ]; then
  [ ${#missing[@]} -eq 0 ]
  exit
fi

if [[ " ${missing[*]} " == *" rust "* ]]; then
  say "install Rust with rustup (https://rustup.rs), then run scripts/test.sh again" >&2
  exit 1
fi

# --- Install what is missing -------------------------------------------------------------------
if [ ${#wanted[@]} -gt 0 ]; then
  if ! is_root || ! command -v apt-get >/dev/null; then
    if command -v apt-get >/dev/null; then
      say "as root (e.g. with sudo), install what is missing, then run scripts/test.sh again:" >&2
    else
      say "install these Debian packages' equivalents, then run scripts/test.sh again:" >&2
    fi
    echo "  apt-get install -y ${wanted[*]}" >&2
    exit 1
  fi
  say "installing ${wanted[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${wanted[@]}" >/dev/null
fi
if [[ " ${missing[*]} " == *" moto "* ]]; then
  say "installing $MOTO into $venv"
  python3 -m venv "$venv"
  "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check "$MOTO"
fi
# Everything must be there now.
for part in "${missing[@]}"; do
  found=
  "have_$part" || { say "$part: still missing after installing it" >&2; exit 1; }
  say "$part: installed ($found)"
done
[ "$mode" = setup ] && exit 0

# --- Services ----------------------------------------------------------------------------------
found=
have_postgresql
pg_bin=$found
on_exit=()
trap 'for stop in "${on_exit[@]}"; do eval "$stop"; done' EXIT

lets_postgres_in() { PGCONNECT_TIMEOUT=5 "$pg_bin/psql" -w -Atqc 'SELECT 1' -d "$1" >/dev/null 2>&1; }
# PostgreSQL refuses to run as root: as root the cluster runs as postgres.
as_pg() { if is_root; then runuser -u postgres -- "$@"; else "$@"; fi; }

# Where a throwaway cluster's files go: memory when /dev/shm has 2 GiB free (a run keeps well
# under 1 GiB there), else /tmp. The suite makes and drops some 320 databases; on disk (ext4, as
# on these machines) finding an inode for each new file slows as the deleted ones pile up, and the
# cluster then spent about 40 % of its CPU on that search (docs/benchmarks.md).
cluster_parent() {
  local free_kib
  free_kib=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }')
  if [ -d /dev/shm ] && [ -w /dev/shm ] && [ "${free_kib:-0}" -ge $((2 * 1024 * 1024)) ]; then
    echo /dev/shm
  else
    echo "${TMPDIR:-/tmp}"
  fi
}

# Clusters left by runs that were killed before they could tidy up (memory is not given back
# until they are removed): each directory names the script that made it.
remove_abandoned_clusters() {
  local dir owner
  for dir in "$1"/rentcheck-test-pg.*; do
    [ -d "$dir" ] || continue
    owner=$(cat "$dir/owner" 2>/dev/null || true)
    # ps, not kill -0: another user's live run must count as live.
    [ -n "$owner" ] && ps -p "$owner" >/dev/null 2>&1 && continue
    [ -f "$dir/data/postmaster.pid" ] &&
      as_pg "$pg_bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir" 2>/dev/null || true
  done
}

if [ -n "${TEST_DATABASE_URL:-}" ]; then
  if ! lets_postgres_in "$TEST_DATABASE_URL"; then
    say "TEST_DATABASE_URL=$TEST_DATABASE_URL does not let its user in without a password" >&2
    exit 1
  fi
  say "PostgreSQL: $TEST_DATABASE_URL"
else
  parent=$(cluster_parent)
  remove_abandoned_clusters "$parent"
  pg_dir=$(mktemp -d "$parent/rentcheck-test-pg.XXXXXX")
  echo $$ >"$pg_dir/owner"
  on_exit+=('as_pg "$pg_bin/pg_ctl" -D "$pg_dir/data" -m fast stop >/dev/null 2>&1; rm -rf "$pg_dir"')
  is_root && chown postgres "$pg_dir"
  as_pg "$pg_bin/initdb" -D "$pg_dir/data" -U postgres -A trust --no-instructions >/dev/null
  # The first port that nothing answers on and that PostgreSQL can bind: these ports lie in the
  # kernel's range for outgoing connections, so one may be held by a client socket (or linger in
  # TIME_WAIT after one) that a connect does not find.
  port=
  for candidate in $(seq 55432 55532); do
    (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null && continue
    as_pg rm -f "$pg_dir/log"
    # fsync off: the cluster is thrown away at the end, so nothing in it must outlive a crash.
    if as_pg "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/log" -w -o \
      "-c listen_addresses=127.0.0.1 -c port=$candidate -c unix_socket_directories='' -c max_connections=200 -c fsync=off" \
      start >/dev/null 2>&1; then
      port=$candidate
      break
    fi
    grep -q "Address already in use" "$pg_dir/log" 2>/dev/null || { cat "$pg_dir/log" >&2; exit 1; }
  done
  [ -n "$port" ] || { say "no free port for a test PostgreSQL in 55432-55532" >&2; exit 1; }
  say "started a throwaway PostgreSQL on port $port ($pg_dir)"
  export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres"
fi
# The tests start moto with this Python (tests/it/common/s3.rs).
[ -n "$test_python" ] && export RENTCHECK_TEST_PYTHON=$test_python

# The two passes' test threads (below), exported for --run commands that run the suite the same
# way (scripts/bench-integration.sh).
cores=$(nproc 2>/dev/null || echo 2)
export RENTCHECK_UNTIMED_THREADS=${RUST_TEST_THREADS:-$((2 * cores < 16 ? 2 * cores : 16))}
export RENTCHECK_TIMED_THREADS=$cores

if [ "$mode" = run ]; then
  "${run[@]}"
elif [ $# -gt 0 ]; then
  cargo test --workspace --locked "$@"
else
  # Both passes run, so that a failure in one does not hide the other's.
  failed=0
  say "pass 1 of 2: every test but the timed ones, $RENTCHECK_UNTIMED_THREADS at a time"
  RUST_TEST_THREADS=$RENTCHECK_UNTIMED_THREADS cargo test --workspace --locked -- --skip ::timed:: || failed=1
  say "pass 2 of 2: the timed tests, on their own"
  # --workspace again, as in pass 1: `--test it` alone would unify other features and build anew.
  RUST_TEST_THREADS=$RENTCHECK_TIMED_THREADS cargo test --workspace --locked -- ::timed:: || failed=1
  exit $failed
fi
