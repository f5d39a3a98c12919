# Cluster mode's part of scripts/install.sh (sourced by it; its functions run after the environment
# file exists and before the migrations): the first host's PostgreSQL and Redis, or a further host
# pointed at them, and the environment file's own helpers.
# Every step reads what is there first, so a re-run changes nothing and keeps the passwords.

DB_NAME=lanner  # The PostgreSQL role and database.
REDIS_DIR=$ROOT/etc/redis
ENV_CHANGED=0  # Set when a setting changed: the services then restart instead of reloading.

env_value() {  # The value of KEY in the environment file, or nothing.
    sed -n "s/^$1=//p" "$ENV_FILE" | tail -n 1
}

set_env() {  # KEY VALUE: written into the environment file, replacing KEY's line if it differs.
    local current
    if grep -q "^$1=" "$ENV_FILE"; then
        current=$(env_value "$1")
        [ "$current" = "$2" ] && return 0
        awk -v key="$1" -v value="$2" 'index($0, key "=") == 1 { print key "=" value; next } { print }' \
            "$ENV_FILE" >"$ENV_FILE.new"
        cat "$ENV_FILE.new" >"$ENV_FILE"  # In place: the file keeps its owner and mode.
        rm -f "$ENV_FILE.new"
        echo "$1 changed"
        ENV_CHANGED=1
    else
        printf '%s=%s\n' "$1" "$2" >>"$ENV_FILE"
        echo "$1 set"
        ENV_CHANGED=1
    fi
}

keep_or_set_env() {  # KEY VALUE: written only if the file has no KEY yet (generated values).
    grep -q "^$1=" "$ENV_FILE" || set_env "$1" "$2"
}

secret_env_file() {
    # It holds the database's and Redis's passwords now. systemd reads it as root before it drops
    # to the service user; the installer's own `lanner` calls read it as root too.
    chmod 0600 "$ENV_FILE"
}

new_password() {
    od -An -N24 -tx1 /dev/urandom | tr -d ' \n'  # 48 hex digits: nothing a URL or a config quotes.
}

url_password() {  # The password of scheme://user:password@host… (empty if none).
    printf '%s' "$1" | sed -n 's|^[a-z]*://[^:/@]*:\([^@]*\)@.*|\1|p'
}

as_postgres() {
    # The local cluster's superuser, by peer authentication over its socket.
    if [ "$(id -un)" = postgres ]; then "$@"; else runuser -u postgres -- "$@"; fi
}

psql_admin() {
    as_postgres psql -X -q -v ON_ERROR_STOP=1 -d postgres "$@"
}

setup_postgres() {
    local password url role database
    url=$(env_value LANNER_DATABASE_URL)
    password=$(url_password "$url")
    [ -n "$password" ] || password=$(new_password)
    role=$(psql_admin -tAc "SELECT 1 FROM pg_roles WHERE rolname = '$DB_NAME'")
    if [ -z "$role" ]; then
        psql_admin -c "CREATE ROLE $DB_NAME LOGIN PASSWORD '$password'"
        echo "role $DB_NAME created"
    fi
    database=$(psql_admin -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'")
    if [ -z "$database" ]; then
        # Collation "C", as SQLite compares text (byte order); the schema makes its own ICU
        # collation for what must ignore case (user names).
        psql_admin -c "CREATE DATABASE $DB_NAME OWNER $DB_NAME ENCODING 'UTF8' LOCALE 'C' TEMPLATE template0"
        echo "database $DB_NAME created"
    fi
    local host=${PGHOST:-localhost}
    case "$host" in
        /*) url="postgresql://$DB_NAME:$password@/$DB_NAME?host=$host" ;;  # A socket directory.
        *) url="postgresql://$DB_NAME:$password@$host:${PGPORT:-5432}/$DB_NAME" ;;
    esac
    keep_or_set_env LANNER_DATABASE_URL "$url"
    DB_PASSWORD=$password
    [ -n "$CLUSTER_LISTEN" ] && postgres_listen
    return 0
}

postgres_listen() {
    # The other hosts reach PostgreSQL on this host's private address, with the role's password,
    # from the networks this host is on (pg_hba's `samenet`: narrow it to the nodes' addresses).
    local wanted current hba line
    wanted="localhost,$CLUSTER_LISTEN"
    current=$(psql_admin -tAc "SHOW listen_addresses")
    if [ "$current" != "$wanted" ]; then
        psql_admin -c "ALTER SYSTEM SET listen_addresses = '$wanted'"
        POSTGRES_RESTART=1  # listen_addresses needs a restart, not a reload.
        echo "PostgreSQL listens on $wanted (after its restart)"
    fi
    hba=$(psql_admin -tAc "SHOW hba_file")
    line="host $DB_NAME $DB_NAME samenet scram-sha-256"
    if ! grep -qxF "$line" "$hba"; then
        printf '# Lanner cluster mode (scripts/install.sh --cluster-listen)\n%s\n' "$line" >>"$hba"
        psql_admin -c "SELECT pg_reload_conf()" >/dev/null
        echo "pg_hba.conf: the $DB_NAME role may connect from this host's networks"
    fi
}

setup_redis() {
    # Debian's redis.conf is left as it is but for one `include` of Lanner's file at its end,
    # whose directives win (Redis takes a directive's last value).
    local conf=$REDIS_DIR/redis.conf own=$REDIS_DIR/lanner.conf password port bind text
    [ -f "$conf" ] || { echo "no $conf: is redis-server installed?" >&2; exit 1; }
    password=$(url_password "$(env_value LANNER_REDIS_URL)")
    [ -n "$password" ] || password=$(sed -n 's/^requirepass //p' "$own" 2>/dev/null || true)
    [ -n "$password" ] || password=$(new_password)
    port=$(sed -n 's/^port \([0-9]*\).*/\1/p' "$conf" | tail -n 1)
    bind="127.0.0.1 -::1${CLUSTER_LISTEN:+ $CLUSTER_LISTEN}"
    text=$(printf '%s\n' "# Written by Lanner's scripts/install.sh --cluster (run it again rather than editing)." \
        "bind $bind" "requirepass $password" \
        "# Lanner's counters and uniqueness keys must not be evicted (docs/SCALING.md, Memory)." \
        "maxmemory-policy noeviction")
    if [ ! -f "$own" ] || [ "$(cat "$own")" != "$text" ]; then
        (umask 077 && printf '%s\n' "$text" >"$own")
        id -u redis >/dev/null 2>&1 && chown redis:redis "$own"
        REDIS_RESTART=1
        echo "$own written (Redis listens on $bind, with a password)"
    fi
    grep -qxF "include $own" "$conf" || { printf '\ninclude %s\n' "$own" >>"$conf"; REDIS_RESTART=1; }
    keep_or_set_env LANNER_REDIS_URL "redis://:$password@127.0.0.1:${port:-6379}/0"
    REDIS_PASSWORD=$password
    REDIS_PORT=${port:-6379}
}

refuse_sqlite_data() {
    # An install already running on its SQLite file would be pointed at an empty database: its
    # clicks and settings stay behind, and its spool would land again from the start.
    case "$(env_value LANNER_DATABASE_URL)" in postgresql://*|postgres://*) return 0 ;; esac
    if [ -f "$DATA/lanner.db" ]; then
        echo "This host already runs Lanner on SQLite ($DATA/lanner.db): move it to PostgreSQL first" \
            "(README, \"Moving an install to PostgreSQL\"), then run install.sh $1 again." >&2
        exit 1
    fi
}

first_host() {
    refuse_sqlite_data --cluster
    say "PostgreSQL and Redis (cluster mode)"
    POSTGRES_RESTART=0
    REDIS_RESTART=0
    secret_env_file
    if [ "$SYSTEMD" = 1 ]; then systemctl enable --now postgresql redis-server; fi
    setup_postgres
    setup_redis
    keep_or_set_env LANNER_NODE_ID "$NODE_ID"
    if [ "$SYSTEMD" = 1 ]; then
        [ "$POSTGRES_RESTART" = 1 ] && systemctl restart postgresql
        [ "$REDIS_RESTART" = 1 ] && systemctl restart redis-server
    fi
    return 0
}

further_host() {
    refuse_sqlite_data --join
    say "Joining the cluster"
    secret_env_file
    set_env LANNER_DATABASE_URL "$JOIN_DATABASE"
    set_env LANNER_REDIS_URL "$JOIN_REDIS"
    keep_or_set_env LANNER_NODE_ID "$NODE_ID"
    lanner cluster check
}

print_join_command() {
    local address=${CLUSTER_LISTEN:-ADDRESS}
    echo
    echo "Cluster: on each further host, from its own copy of this code:"
    echo "  sudo scripts/install.sh --join 'postgresql://$DB_NAME:$DB_PASSWORD@$address:${PGPORT:-5432}/$DB_NAME'" \
        "--redis 'redis://:$REDIS_PASSWORD@$address:$REDIS_PORT/0'"
    if [ -z "$CLUSTER_LISTEN" ]; then
        echo "  (PostgreSQL and Redis listen on localhost only: install again here with --cluster-listen" \
            "THIS.HOST'S.PRIVATE.ADDRESS first, and put that address in place of ADDRESS.)"
    fi
    echo "  Then put every node in nginx's upstream (README, \"Cluster mode\")."
}
