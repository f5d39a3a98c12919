#!/usr/bin/env bash
# Install Lanner on a Debian 12 / Ubuntu 22.04+ machine, or upgrade it in place: run it again.
#
#   sudo scripts/install.sh [--server-name tracker.example.com] [--listen 80] [--workers 2]
#                           [--admin-allow 203.0.113.7/32 ...]
#                           [--domain track.example.com --domain go.example.org --email ops@example.com]
#
# Each --domain (repeatable; its DNS pointed at this host, port 80 open) is added with `lanner domain
# add`: certbot (Debian's package, installed then) gets its certificate through nginx, the site serves
# it on HTTPS (--https-listen, 443) and `lanner worker` renews it daily. --email is the address the ACME
# server writes to about expiring certificates (LANNER_ACME_EMAIL). The nginx site is root's
# (/etc/nginx/sites-available/lanner.conf), rendered by root with the options the `lanner` user saved,
# checked again; `lanner domain` and the worker have it rendered again and nginx reloaded through the
# lanner-nginx-reload.path unit (the `lanner` user writes neither nginx's configuration nor signals it).
#
# The web panel and the admin API answer only the addresses --admin-allow lists (repeatable; default
# this machine: open it through an SSH tunnel, or list your office's address, or 0.0.0.0/0 and ::/0
# to put it on the internet behind its login).
#
# What it does, in order (each step is safe to repeat):
#   1. system packages (python3-venv, python3-dev, gcc, libev-dev, nginx), only the missing ones;
#   2. the `lanner` system user, /opt/lanner (code + venv), /var/lib/lanner (database, spool, queue,
#      history/: the columnar click history, the only copy of clicks older than LANNER_RAW_RETENTION),
#      /etc/lanner/lanner.env (kept on upgrade: your edits stay);
#   3. the code into /opt/lanner/app (swapped in whole), the venv and its packages;
#   4. migrations (light steps now; heavy ones run by the worker in the background), the geo file;
#   5. systemd units and the nginx site, then start — or, on an upgrade, reload the web master
#      gracefully (SIGHUP: new workers start before the old ones drain, no request is dropped)
#      and restart the worker (SIGINT: it finishes what it is doing);
#   6. a smoke click through nginx, and the keys to give networks and report clients.
#
# Cluster mode (docs/SCALING.md; README, "Cluster mode"), several hosts on one PostgreSQL and Redis:
#
#   sudo scripts/install.sh --cluster [--cluster-listen 10.0.0.1]        # the first host
#   sudo scripts/install.sh --join 'postgresql://…' --redis 'redis://…'  # each further host
#
# --cluster also installs Debian's postgresql and redis-server, makes the `lanner` role and
# database (a generated password), makes Redis require a generated password, and prints the
# command for the further hosts. Both listen on localhost only unless --cluster-listen names this
# host's private address (--listen is nginx's). --join installs Lanner only, pointed at them, and
# stops with one sentence if it cannot reach both or its node name is taken. The node's name
# (LANNER_NODE_ID) is the host name, or --node-id NAME. Passwords go into the environment file,
# which is then mode 0600; a re-run keeps them. PGHOST/PGPORT, if set, say where the first
# host's PostgreSQL is (default: the local cluster, administered as the `postgres` user).
# On every node, --bind 10.0.0.N:8080 makes `lanner serve` listen where the balancer's nginx
# reaches it (its admin worker on the next port) and --balancer ADDRESS trusts that nginx's
# X-Real-IP (the visitor's address); both go into the environment file.
#
# --root DIR installs every path under DIR and --no-packages/--no-systemd skip what needs the
# machine itself: the tests install into a temporary directory that way and start the services
# from the installed units' ExecStart lines.
set -euo pipefail

SOURCE=$(cd "$(dirname "$0")/.." && pwd)
ROOT=""
RUN_USER=lanner
LISTEN=80
SERVER_NAME=_
WORKERS=2
PACKAGES=1
SYSTEMD=1
ADMIN_ALLOW=()
PYTHON=${PYTHON:-python3}
CLUSTER=0
CLUSTER_LISTEN=""
JOIN_DATABASE=""
JOIN_REDIS=""
NODE_ID=""
BIND=""
BALANCERS=""
DOMAINS=()
EMAIL=""
HTTPS_LISTEN=443

usage() {
    sed -n '2,50p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

while [ $# -gt 0 ]; do
    case "$1" in
        --root) ROOT=$(realpath -m "$2"); shift 2 ;;
        --user) RUN_USER=$2; shift 2 ;;
        --listen) LISTEN=$2; shift 2 ;;
        --server-name) SERVER_NAME=$2; shift 2 ;;
        --workers) WORKERS=$2; shift 2 ;;
        --admin-allow) ADMIN_ALLOW+=(--admin-allow "$2"); shift 2 ;;
        --no-packages) PACKAGES=0; shift ;;
        --no-systemd) SYSTEMD=0; shift ;;
        --cluster) CLUSTER=1; shift ;;
        --cluster-listen) CLUSTER_LISTEN=$2; shift 2 ;;
        --join) JOIN_DATABASE=$2; shift 2 ;;
        --redis) JOIN_REDIS=$2; shift 2 ;;
        --node-id) NODE_ID=$2; shift 2 ;;
        --bind) BIND=$2; shift 2 ;;
        --balancer) BALANCERS="$BALANCERS,$2"; shift 2 ;;
        --domain) DOMAINS+=("$2"); shift 2 ;;
        --email) EMAIL=$2; shift 2 ;;
        --https-listen) HTTPS_LISTEN=$2; shift 2 ;;
        -h|--help) usage 0 ;;
        *) echo "install.sh: unknown option $1" >&2; usage 2 ;;
    esac
done

if [ "$CLUSTER" = 1 ] && [ -n "$JOIN_DATABASE$JOIN_REDIS" ]; then
    echo "install.sh: --cluster is for the first host, --join for the others: not both" >&2; exit 2
fi
if [ -n "$JOIN_DATABASE$JOIN_REDIS" ] && { [ -z "$JOIN_DATABASE" ] || [ -z "$JOIN_REDIS" ]; }; then
    echo "install.sh: --join needs the first host's PostgreSQL URL and --redis its Redis URL" >&2; exit 2
fi
if [ -n "$CLUSTER_LISTEN" ] && [ "$CLUSTER" = 0 ]; then
    echo "install.sh: --cluster-listen is where the first host's PostgreSQL and Redis listen: add --cluster" >&2
    exit 2
fi
case "$CLUSTER_LISTEN" in *[!0-9a-fA-F:.]*)  # It goes into PostgreSQL's and Redis's configs.
    echo "install.sh: --cluster-listen takes this host's IP address" >&2; exit 2 ;;
esac
case "$JOIN_DATABASE" in ""|postgresql://*|postgres://*) ;;
    *) echo "install.sh: --join takes the postgresql://… URL the first host printed" >&2; exit 2 ;;
esac
case "$JOIN_REDIS" in ""|redis://*|rediss://*) ;;
    *) echo "install.sh: --redis takes the redis://… URL the first host printed" >&2; exit 2 ;;
esac
JOINING=0
[ -n "$JOIN_DATABASE" ] && JOINING=1
[ -n "$NODE_ID" ] || NODE_ID=$(hostname -s 2>/dev/null || hostname)

PREFIX=$ROOT/opt/lanner
APP=$PREFIX/app
VENV=$PREFIX/venv
DATA=$ROOT/var/lib/lanner
ETC=$ROOT/etc/lanner
ENV_FILE=$ETC/lanner.env
RUN_DIR=$ROOT/run/lanner
UNIT_DIR=$ROOT/etc/systemd/system
NGINX_DIR=$ROOT/etc/nginx
ADMIN_BIND=""
if [ -n "$BIND" ]; then  # A node behind a balancer: TCP, the admin worker on the next port.
    case "$BIND" in *:[0-9]*) ;; *) echo "install.sh: --bind takes ADDRESS:PORT" >&2; exit 2 ;; esac
    ADMIN_BIND="${BIND%:*}:$((${BIND##*:} + 1))"
else
    BIND=unix:$RUN_DIR/web.sock
fi
. "$SOURCE/scripts/install-cluster.sh"  # Functions only: the environment file's, and cluster mode's.

say() { printf '\n==> %s\n' "$*"; }
as_user() {
    if [ "$(id -un)" = "$RUN_USER" ]; then "$@"; else runuser -u "$RUN_USER" -- "$@"; fi
}
lanner() {
    # Every command reads the installed env file, as the services do.
    as_user env $(grep -v '^#' "$ENV_FILE" | xargs) "$VENV/bin/lanner" "$@"
}
root_lanner() {  # As root, as lanner-nginx-reload.service runs it.
    env $(grep -v '^#' "$ENV_FILE" | xargs) "$VENV/bin/lanner" "$@"
}

UPGRADE=0
[ -d "$APP" ] && UPGRADE=1

if [ "$PACKAGES" = 1 ]; then
    say "System packages"
    missing=""
    packages="python3-venv python3-dev gcc libev-dev nginx curl"
    [ "$CLUSTER" = 1 ] && packages="$packages postgresql redis-server"
    [ ${#DOMAINS[@]} -gt 0 ] && packages="$packages certbot"
    for package in $packages; do
        dpkg -s "$package" >/dev/null 2>&1 || missing="$missing $package"
    done
    if [ -n "$missing" ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
    fi
fi

say "User and directories"
if ! id -u "$RUN_USER" >/dev/null 2>&1; then
    useradd --system --home-dir "$DATA" --shell /usr/sbin/nologin "$RUN_USER"
fi
RUN_GROUP=$(id -gn "$RUN_USER")
mkdir -p "$PREFIX" "$DATA" "$ETC" "$RUN_DIR" "$UNIT_DIR" "$NGINX_DIR/sites-available" "$NGINX_DIR/sites-enabled"
chown "$RUN_USER:$RUN_GROUP" "$DATA" "$RUN_DIR"
# Data files are owner-only (lanner's umask is 077); an upgrade tightens those an older version made.
chmod -R go-rwx "$DATA"
chmod 0750 "$DATA"
# Local landers are public static files nginx serves itself from $DATA/landers (README, "Landing
# pages"): readable by all, and nginx's user passes through $DATA as a member of its group (below).
if [ -d "$DATA/landers" ]; then chmod -R go+rX "$DATA/landers"; fi
# certbot's challenges, which nginx serves itself: nginx's user passes through $DATA as a member of
# its group (below).
mkdir -p "$DATA/acme" "$DATA/nginx"
chown "$RUN_USER:$RUN_GROUP" "$DATA/acme" "$DATA/nginx"
chmod 0755 "$DATA/acme"
# The columnar click history (docs/analytics.md): kept on upgrade (it alone holds the clicks retention
# pruned); owned again by the service user, since a `lanner analytics rebuild` or `lanner restore` run
# as root leaves root's files the worker could not open.
mkdir -p "$DATA/history"
chown -R "$RUN_USER:$RUN_GROUP" "$DATA/history"
chmod 0700 "$DATA/history"

say "Code into $APP"
rm -rf "$APP.new"
mkdir "$APP.new"
if [ -e "$SOURCE/.git" ] && command -v git >/dev/null 2>&1; then  # A file in a git worktree.
    (cd "$SOURCE" && git ls-files -z --cached --others --exclude-standard) |
        (cd "$SOURCE" && xargs -0 tar -cf - --no-recursion --ignore-failed-read) | tar -xf - -C "$APP.new"
else
    tar -cf - -C "$SOURCE" --exclude=.venv --exclude=var --exclude=.git --exclude='__pycache__' \
        --exclude=.pytest_cache --exclude=.mypy_cache --exclude=.ruff_cache . |
        tar -xf - -C "$APP.new"
fi
extras=""
[ "$CLUSTER$JOINING" != 00 ] && extras="[cluster]"  # psycopg and redis-py
# What the venv's packages and the built C extension depend on: an upgrade whose stamp is the one the
# venv was installed with keeps them (pip would rebuild the same thing: ~12 s of CPU).
packages_stamp() {
    {
        if [ -x "$VENV/bin/python" ]; then "$VENV/bin/python" --version; else "$PYTHON" --version; fi
        echo "$extras"
        cd "$1" && ls && cat pyproject.toml
        find workers/runtime/bjoern-3.2.2 -type f -print0 | sort -z | xargs -0 cat
    } 2>&1 | sha256sum | cut -d' ' -f1
}
STAMP=$(packages_stamp "$APP.new")
KEEP_PACKAGES=0
if [ -f "$VENV/.lanner-packages" ] && [ "$(cat "$VENV/.lanner-packages")" = "$STAMP" ] &&
    cp -p "$APP"/workers/runtime/_bjoern.*.so "$APP.new/workers/runtime/" 2>/dev/null; then
    KEEP_PACKAGES=1
fi
# Swap the whole tree at once; running workers keep the modules they imported until reloaded.
if [ -d "$APP" ]; then rm -rf "$APP.old"; mv "$APP" "$APP.old"; fi
mv "$APP.new" "$APP"
rm -rf "$APP.old"

say "Virtualenv $VENV"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
# pip 21.3 installs a pyproject.toml project editable (PEP 660); every Python >= 3.11 that Debian and
# Ubuntu ship has a newer one, so pip is upgraded only where it is older (an upgrade costs ~3 s a run).
if [ "$KEEP_PACKAGES" = 1 ]; then
    echo "packages and the C extension unchanged: kept"
else
    rm -f "$VENV/.lanner-packages"
    "$VENV/bin/python" -c 'import pip, sys; sys.exit(tuple(map(int, pip.__version__.split(".")[:2])) < (21, 3))' ||
        "$VENV/bin/pip" install -q --upgrade pip
    "$VENV/bin/pip" install -q -e "$APP$extras"
    echo "$STAMP" >"$VENV/.lanner-packages"
fi
# The services cannot write next to the code (ProtectSystem=strict), so without this every worker start
# (the on-demand admin worker's too) compiles the app's modules again: about a second of its cold start.
(cd "$APP" && "$VENV/bin/python" -m compileall -q app.py settings.py cli models routes workers >/dev/null)

say "Configuration $ENV_FILE"
units=$(mktemp -d)
trap 'rm -rf "$units"' EXIT
"$VENV/bin/lanner" systemd render --venv "$VENV" --env-file "$ENV_FILE" --data-dir "$DATA" \
    --user "$RUN_USER" --group "$RUN_GROUP" --bind "$BIND" --workers "$WORKERS" -o "$units" >/dev/null
if [ -f "$ENV_FILE" ]; then
    echo "kept (edit it, then: systemctl restart lanner-web lanner-worker)"
else
    cp "$units/lanner.env" "$ENV_FILE"
    chmod 0644 "$ENV_FILE"
fi

if [ -n "$ADMIN_BIND" ]; then
    set_env LANNER_BIND "$BIND"
    set_env LANNER_ADMIN_BIND "$ADMIN_BIND"
fi
[ -n "$BALANCERS" ] && set_env LANNER_TRUSTED_PROXIES "127.0.0.1,::1$BALANCERS"
set_env LANNER_ACME_WEBROOT "$DATA/acme"
# This box's own name answers campaign URLs once domains exist (the smoke click below: loopback).
[ "$SERVER_NAME" != _ ] && set_env LANNER_TRACKER_HOSTS "localhost,127.0.0.1,[::1],$(printf '%s' "$SERVER_NAME" | tr ' ' ',')"
[ -n "$EMAIL" ] && set_env LANNER_ACME_EMAIL "$EMAIL"
# The lanner user asks for a reload by writing this file; lanner-nginx-reload.path does it as root.
[ "$SYSTEMD" = 1 ] && set_env LANNER_NGINX_RELOAD "$APP/scripts/request-nginx-reload"
if [ "$CLUSTER" = 1 ]; then
    first_host
elif [ "$JOINING" = 1 ]; then
    further_host
fi

say "Database"
lanner db migrate
[ -f "$DATA/geo/country.mmdb" ] || lanner geo build
lanner db status

say "Units and nginx site"
cp "$units/lanner-web.service" "$units/lanner-worker.service" "$UNIT_DIR/"
sed "s|{{DATA_DIR}}|$DATA|g" "$SOURCE/systemd/lanner-nginx-reload.path" >"$UNIT_DIR/lanner-nginx-reload.path"
sed -e "s|{{VENV}}|$VENV|g" -e "s|{{ENV_FILE}}|$ENV_FILE|g" -e "s|{{NGINX_DIR}}|$NGINX_DIR|g" \
    "$SOURCE/systemd/lanner-nginx-reload.service" >"$UNIT_DIR/lanner-nginx-reload.service"
# The options are saved by the lanner user (DATA/nginx-site.json), then the site is rendered from them
# by root, as lanner-nginx-reload.service does each time `lanner domain` asks: nginx's configuration is
# root's file, never the web-facing user's.
lanner nginx site --upstream "$BIND" ${ADMIN_BIND:+--admin-upstream "$ADMIN_BIND"} --listen "$LISTEN" \
    --server-name "$SERVER_NAME" --https-listen "$HTTPS_LISTEN" "${ADMIN_ALLOW[@]}" --save >/dev/null
rm -f "$DATA/nginx/lanner.conf"  # An older install's site, the lanner user's: nginx reads root's now.
root_lanner nginx site --saved -o "$NGINX_DIR/sites-available/lanner.conf"
ln -sfn ../sites-available/lanner.conf "$NGINX_DIR/sites-enabled/lanner.conf"

if [ "$SYSTEMD" = 1 ]; then
    say "Services"
    if [ "$LISTEN" = 80 ] && [ -e "$NGINX_DIR/sites-enabled/default" ]; then
        rm "$NGINX_DIR/sites-enabled/default"  # It would take port 80 as the default server.
        echo "disabled nginx's default site (port 80 is Lanner's)"
    fi
    systemctl daemon-reload
    if [ "$UPGRADE" = 1 ] && [ "$ENV_CHANGED" = 1 ] && systemctl is-active --quiet lanner-web; then
        systemctl restart lanner-web lanner-worker  # The master reads its settings once: a restart.
    elif [ "$UPGRADE" = 1 ] && systemctl is-active --quiet lanner-web; then
        systemctl reload lanner-web      # Graceful: no request dropped.
        systemctl restart lanner-worker  # SIGINT: the running flush finishes first.
    else
        systemctl enable --now lanner-web lanner-worker
    fi
    if id -u www-data >/dev/null 2>&1; then usermod -aG "$RUN_GROUP" www-data; fi  # $DATA/landers, $DATA/acme
    systemctl enable --now lanner-nginx-reload.path
    nginx -t -q
    systemctl reload nginx || systemctl start nginx

    say "Smoke click"
    lanner campaign show smoke-test >/dev/null 2>&1 ||
        lanner campaign create "Install smoke test" --alias smoke-test --offer-url 'https://example.com/?subid={subid}' >/dev/null
    for _ in $(seq 50); do
        status=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$LISTEN/smoke-test?source=install" || true)
        [ "$status" = 302 ] && break
        sleep 0.2
    done
    [ "$status" = 302 ] || { echo "smoke click answered $status, expected 302" >&2; exit 1; }
    echo "http://127.0.0.1:$LISTEN/smoke-test answered 302"
else
    say "Not starting services (--no-systemd): run the ExecStart lines of $UNIT_DIR/lanner-*.service"
fi

if [ ${#DOMAINS[@]} -gt 0 ]; then
    say "Domains"
    for domain in "${DOMAINS[@]}"; do
        name=$(printf '%s' "$domain" | tr 'A-Z' 'a-z')
        if lanner domain show "$name" >/dev/null 2>&1; then
            echo "$name: kept"
            [ "$SYSTEMD" = 1 ] && lanner domain cert "$name"  # Kept if still good (certbot --keep-until-expiring).
        elif [ "$SYSTEMD" = 1 ]; then
            lanner domain add "$name"  # Its certificate through the running nginx.
        else  # No nginx running: the certificate waits for `lanner domain cert`.
            lanner domain add "$name" --no-cert
        fi
    done
    lanner domain list
fi

say "Done"
lanner postback key show
echo "report API key: $(lanner api key show)"
port=${LISTEN##*:}
host=$SERVER_NAME
if [ "$host" = _ ]; then
    case "$LISTEN" in
        *:*) host=${LISTEN%:*} ;;  # --listen ADDRESS:PORT
        *) host=$(hostname -f 2>/dev/null || hostname) ;;
    esac
fi
panel="http://$host$([ "$port" = 80 ] || echo ":$port")/panel/"
if [ ${#ADMIN_ALLOW[@]} = 0 ]; then
    echo "panel: $panel (from this machine only: ssh -L 8080:127.0.0.1:$port $host, then http://127.0.0.1:8080/panel/; or install again with --admin-allow YOUR.ADDRESS/32)"
else
    echo "panel: $panel (from the --admin-allow addresses)"
fi
lanner user first-admin  # Prints the admin's password on the first install only.
[ "$CLUSTER" = 1 ] && print_join_command
[ "$UPGRADE" = 1 ] && echo "upgraded in place" || echo "installed"
