# A PostgreSQL cluster of a script's own: initdb in "$WORK/pg" (trust auth, TCP only, on
# 127.0.0.1:$PG_PORT), so a drill may stop it or tune it without touching anyone else's database.
# Source it after setting WORK; reads PG_PORT, PG_BIN and PG_SETTINGS (extra server options, e.g.
# "-c max_wal_size=4GB"); sets PGBASE. Call own_pg_init once, then own_pg_start / own_pg_stop MODE;
# own_pg_stop immediate in the caller's cleanup.

PG_PORT=${PG_PORT:-55439}
PG_BIN=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
PG_SETTINGS=${PG_SETTINGS:-}
PGBASE="postgres://postgres@127.0.0.1:$PG_PORT"

# initdb refuses to run as root: run the cluster as the postgres user then.
own_pg_as_owner() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
own_pg_ctl() { own_pg_as_owner "$PG_BIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pg.log" -w "$@" >/dev/null; }

own_pg_init() {
    [ -x "$PG_BIN/pg_ctl" ] || { echo "no PostgreSQL binaries (set PG_BIN)" >&2; exit 2; }
    chmod 755 "$WORK"
    mkdir -p "$WORK/pg" && touch "$WORK/pg.log"
    if [ "$(id -u)" = 0 ]; then chown postgres "$WORK/pg" "$WORK/pg.log"; fi
    own_pg_as_owner "$PG_BIN/initdb" -D "$WORK/pg" -U postgres --auth=trust >/dev/null
}

own_pg_start() {
    # shellcheck disable=SC2086 # PG_SETTINGS is a list of options
    own_pg_ctl start -o "-c listen_addresses=127.0.0.1 -c port=$PG_PORT -c unix_socket_directories='' $PG_SETTINGS"
}

own_pg_stop() { own_pg_ctl stop -m "${1:-fast}"; }
