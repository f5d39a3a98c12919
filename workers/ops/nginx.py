"""Render the nginx templates in nginx/ for a Lanner install: `lanner nginx site` and `lanner nginx main`.

The templates hold `{{NAME}}` placeholders; every value is checked before it goes in, so a
rendered file is either valid for `nginx -t` or not written at all.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from models.errors import LannerError
from workers.ops.templates import render_template
from workers.runtime.server import parse_bind

LISTEN_BACKLOG = 4096
WORKER_CONNECTIONS = 8192
_SERVER_NAME = re.compile(r"^[A-Za-z0-9_.*~^$\\-]+( [A-Za-z0-9_.*~^$\\-]+)*$")
_HEADER = re.compile(r"^[A-Za-z0-9-]+$")
_LISTEN = re.compile(r"^(\[[0-9a-fA-F:]+\]:|[0-9.]+:)?[0-9]{1,5}$")


class NginxConfigError(LannerError, ValueError):
    """A value that cannot go into an nginx config; the message says which and why."""


@dataclass(frozen=True)
class SiteOptions:
    upstream: str  # Lanner's bind: HOST:PORT or unix:/PATH.
    admin_upstream: str = ""  # The admin worker's bind; empty: the web workers answer /api/ too.
    listen: str = "80"
    server_name: str = "_"
    trusted_proxies: tuple[str, ...] = ()  # CIDRs whose `real_ip_header` is believed (a CDN).
    real_ip_header: str = "X-Forwarded-For"
    admin_allow: tuple[str, ...] = ("127.0.0.1", "::1")


def _cidrs(values: tuple[str, ...], what: str) -> list[str]:
    cidrs = []
    for value in values:
        try:
            cidrs.append(str(ipaddress.ip_network(value, strict=False)))
        except ValueError:
            raise NginxConfigError(f"{what} {value!r} is not an IP address or CIDR range.") from None
    return cidrs


def _upstream(bind: str) -> str:
    try:
        where = parse_bind(bind)
    except ValueError as exc:
        raise NginxConfigError(str(exc)) from None
    if where[0] == "tcp" and where[2] == 0:
        raise NginxConfigError(f"upstream {bind!r} has port 0; nginx needs the port Lanner listens on.")
    return f"unix:{where[1]}" if where[0] == "unix" else f"{where[1]}:{where[2]}"


def render_site(options: SiteOptions) -> str:
    """The server block proxying campaign URLs, postbacks and the API to Lanner's workers."""
    upstream = _upstream(options.upstream)
    admin_upstream = _upstream(options.admin_upstream) if options.admin_upstream else upstream
    if not _LISTEN.match(options.listen):
        raise NginxConfigError(f"listen {options.listen!r} must be PORT or ADDRESS:PORT.")
    if not _SERVER_NAME.match(options.server_name):
        raise NginxConfigError(f"server name {options.server_name!r} has characters nginx would misread.")
    if not _HEADER.match(options.real_ip_header):
        raise NginxConfigError(f"real IP header {options.real_ip_header!r} is not a header name.")
    trusted = _cidrs(options.trusted_proxies, "Trusted proxy")
    admin = _cidrs(options.admin_allow, "Admin address")
    values = {
        "UPSTREAM": upstream,
        "ADMIN_UPSTREAM": admin_upstream,
        "LISTEN": f"{options.listen} backlog={LISTEN_BACKLOG}",
        "SERVER_NAME": options.server_name,
        "REAL_IP_HEADER": options.real_ip_header,
        "SET_REAL_IP_FROM": "\n".join(f"    set_real_ip_from {cidr};" for cidr in trusted)
        or "    # No trusted proxy: the TCP peer is the visitor.",
        "ADMIN_ALLOW": "\n".join(f"        allow {cidr};" for cidr in admin),
    }
    return render_template("nginx/lanner-site.conf", values)


def render_main(*, sites: str, pid_path: str, error_log: str, temp_dir: str) -> str:
    """A main nginx.conf sized for a tracker (connections, backlog) including `sites`."""
    for value in (sites, pid_path, error_log, temp_dir):
        if not value.startswith("/") or any(char in value for char in " ;{}\"'\n"):
            raise NginxConfigError(f"{value!r} must be an absolute path without spaces or quotes.")
    values = {
        "WORKER_CONNECTIONS": str(WORKER_CONNECTIONS),
        "RLIMIT_NOFILE": str(WORKER_CONNECTIONS * 2 + 1024),
        "PID_PATH": pid_path,
        "ERROR_LOG": error_log,
        "TEMP_DIR": temp_dir,
        "SITES": sites,
    }
    return render_template("nginx/nginx.conf", values)
