"""Render the nginx templates in nginx/ for a Lanner install: `lanner nginx site` and `lanner nginx main`.

The templates hold `{{NAME}}` placeholders; every value is checked before it goes in, so a
rendered file is either valid for `nginx -t` or not written at all. The checks are whitelists matched
whole: what the `lanner` user controls (domain names, the saved options root's reload service renders
with) can never carry a newline, `;`, `{`, a quote or a backslash into nginx's configuration.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from models.admin.lander_sandbox import SANDBOX
from models.errors import LannerError
from workers.ops.templates import render_template
from workers.runtime.server import parse_bind

LISTEN_BACKLOG = 4096
WORKER_CONNECTIONS = 8192
# All matched with fullmatch (a `$` would let a trailing newline through). A backslash escapes the
# next character for nginx, `;` included: in a server name only before a letter, digit or `.`.
_NAME_PART = r"(?:[A-Za-z0-9_.*~^$-]|\\[A-Za-z0-9.])+"
_SERVER_NAME = re.compile(rf"{_NAME_PART}( {_NAME_PART})*")
_HEADER = re.compile(r"[A-Za-z0-9-]+")
_DOMAIN = re.compile(r"[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?")
_LISTEN = re.compile(r"(\[[0-9a-fA-F:]+\]:|[0-9.]+:)?[0-9]{1,5}")
_PATH = re.compile(r"/[A-Za-z0-9._/@+~-]*")
_HOST = re.compile(r"[A-Za-z0-9.-]+")


class NginxConfigError(LannerError, ValueError):
    """A value that cannot go into an nginx config; the message says which and why."""


# Passive health of a node in cluster mode: none. nginx's passive check takes a node out for
# fail_timeout after max_fails failed requests, and once every node is out it answers 502 "no live
# upstreams" without asking any; under overload every node fails at once (timeouts), so the check
# turned overload into errors (issue 33: 6,753 of them at 1,000 clicks/s on two nodes), and kept
# answering 502 for fail_timeout after the nodes had caught up. With max_fails=0 no node is ever
# taken out: an overloaded node's request waits in its listen backlog (LISTEN_BACKLOG), which is
# latency, and a dead node costs a refused connection (microseconds) and the retry on the next node
# (proxy_next_upstream in nginx/lanner-server.conf). Only a host that drops packets costs more: the
# connect timeout (1 s) for each request sent to it, until it is removed from the upstream or its
# balancer's active check (`/readyz`) takes it out.
MAX_FAILS = 0


@dataclass(frozen=True)
class SiteDomain:
    """A domain as the site serves it: HTTPS with its certificate, if certbot has one. The certificate's
    paths are not kept here: they are made from `SiteOptions.certificates_dir` and the checked name."""

    name: str
    is_certified: bool = False  # False: no certificate yet, plain HTTP only.
    redirect_http: bool = False  # Plain HTTP answers 301 to HTTPS (only with a certificate).


@dataclass(frozen=True)
class SiteOptions:
    upstream: str | tuple[str, ...]  # Lanner's bind (HOST:PORT or unix:/PATH), or one a node.
    admin_upstream: str | tuple[str, ...] = ""  # The admin worker's (one a node); empty: the web workers'.
    # The admin worker of the node keeping the columnar history (LANNER_HISTORY_NODE): the panel and the
    # report APIs go there, the other admin upstreams standing by. Empty: the admin upstreams alike.
    report_upstream: str = ""
    listen: str = "80"
    server_name: str = "_"
    trusted_proxies: tuple[str, ...] = ()  # CIDRs whose `real_ip_header` is believed (a CDN).
    real_ip_header: str = "X-Forwarded-For"
    admin_allow: tuple[str, ...] = ("127.0.0.1", "::1")
    landers_dir: str = "/var/lib/lanner/landers"  # settings.landers_dir: local landers, served by nginx.
    lander_upload_bytes: int = 20 * 1024 * 1024  # settings.lander_max_bytes: a lander's zip upload.
    domains: tuple[SiteDomain, ...] = ()
    https_listen: str = "443"  # PORT or ADDRESS:PORT the domains with a certificate are served on.
    acme_webroot: str = "/var/lib/lanner/acme"  # Where certbot's webroot mode writes its challenges.
    certificates_dir: str = "/var/lib/lanner/certbot/config"  # certbot's config dir: live/<domain>/*.pem.


# What `lanner nginx site -o` saves for `--saved` (the command line's options): the rest is this host's
# settings, read again by whoever renders.
SAVED_FIELDS = {
    "upstream": tuple,
    "admin_upstream": tuple,
    "report_upstream": str,
    "listen": str,
    "server_name": str,
    "trusted_proxies": tuple,
    "real_ip_header": str,
    "admin_allow": tuple,
    "https_listen": str,
}


def saved_options(fields: object, **settings_fields) -> SiteOptions:
    """SiteOptions from saved JSON (written by the `lanner` user: trusted for nothing), each value of the
    type it must have; render_site checks their text. NginxConfigError for anything else."""
    if not isinstance(fields, dict) or not set(fields) <= set(SAVED_FIELDS):
        fields_named = ", ".join(SAVED_FIELDS)
        raise NginxConfigError(f"The saved nginx site options must be an object of {fields_named}.")
    options = {}
    for name, value in fields.items():
        if isinstance(value, str) and SAVED_FIELDS[name] is tuple:
            value = (value,) if value else ()
        elif isinstance(value, list) and SAVED_FIELDS[name] is tuple:
            value = tuple(value)
        is_text = isinstance(value, str) or (
            isinstance(value, tuple) and all(isinstance(item, str) for item in value)
        )
        if not is_text or (SAVED_FIELDS[name] is str) != isinstance(value, str):
            raise NginxConfigError(f"The saved nginx site option {name} has the wrong type.")
        options[name] = value
    if "upstream" not in options:
        raise NginxConfigError("The saved nginx site options have no upstream.")
    return SiteOptions(**options, **settings_fields)


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
    if where[0] == "unix":
        return f"unix:{_path(where[1], 'upstream socket')}"
    if not _HOST.fullmatch(where[1]):
        raise NginxConfigError(f"upstream {bind!r} must be HOST:PORT with a host name or IPv4 address.")
    if where[2] == 0:
        raise NginxConfigError(f"upstream {bind!r} has port 0; nginx needs the port Lanner listens on.")
    return f"{where[1]}:{where[2]}"


def _servers(binds: str | tuple[str, ...]) -> list[str]:
    return [_upstream(bind) for bind in ((binds,) if isinstance(binds, str) else binds) if bind]


def _server_lines(servers: list[str]) -> str:
    """One box: its socket. Several nodes: each never taken out (MAX_FAILS; no stickiness: any node
    answers)."""
    health = f" max_fails={MAX_FAILS}" if len(servers) > 1 else ""
    return "\n".join(f"    server {server}{health};" for server in servers)


# Visitor affinity over several nodes: one visitor's clicks to one node, so the node answers the visitor's
# landed history from its own file (models/store/nodevisitors.py) and not PostgreSQL. The key is the
# visitor as the tracker keys it (models/clicks/record.py visitor_key: the address, after the realip
# module has believed a trusted proxy's header, and the User-Agent). `consistent` (ketama): a node added
# or removed moves only ~1/N of the visitors; a dead node's visitors go to the next one
# (proxy_next_upstream), where they count unique once and a click within debounce of one the dead node
# answered gets a subid of its own (both land: docs/SCALING.md, "Visitor affinity").
VISITOR_HASH = "hash $remote_addr$http_user_agent consistent;"


def _web_server_lines(servers: list[str]) -> str:
    """The click upstream: several nodes hash the visitor (VISITOR_HASH)."""
    lines = _server_lines(servers)
    return f"    {VISITOR_HASH}\n{lines}" if len(servers) > 1 else lines


# How long nginx sends the panel and reports to the standby admin workers once the report node refused
# a connection (then it tries the report node again).
REPORT_NODE_RETRY = "10s"


def _report_server_lines(report: str, admins: list[str]) -> str:
    """The report node first; the other nodes' admin workers as backups, used only while it refuses
    connections, so reports read the columnar history and PostgreSQL runs no report's scan; a panel
    that stays up without it (its reports then read PostgreSQL, and say so)."""
    lines = [f"    server {report} max_fails=1 fail_timeout={REPORT_NODE_RETRY};"]
    lines += [f"    server {server} max_fails={MAX_FAILS} backup;" for server in admins if server != report]
    return "\n".join(lines)


# The types a lander's files are served as (the main nginx.conf has no mime.types of its own).
LANDER_TYPES = {
    "text/html": "html htm",
    "text/css": "css",
    "application/javascript": "js mjs",
    "application/json": "json",
    "text/plain": "txt",
    "application/xml": "xml",
    "image/png": "png",
    "image/jpeg": "jpg jpeg",
    "image/gif": "gif",
    "image/svg+xml": "svg",
    "image/webp": "webp",
    "image/avif": "avif",
    "image/x-icon": "ico",
    "font/woff": "woff",
    "font/woff2": "woff2",
    "font/ttf": "ttf",
    "font/otf": "otf",
    "video/mp4": "mp4",
    "video/webm": "webm",
    "audio/mpeg": "mp3",
}


def _path(value: str, what: str) -> str:
    """An absolute path of letters, digits and `._/@+~-` only: nothing nginx would read as syntax."""
    if not _PATH.fullmatch(value):
        raise NginxConfigError(f"{what} {value!r} must be an absolute path without spaces or quotes.")
    return value


def _domain_servers(options: SiteOptions, values: dict[str, str]) -> list[str]:
    """The HTTPS server block of each domain with a certificate, and the port-80 redirect of each that
    redirects plain HTTP."""
    if not _LISTEN.fullmatch(options.https_listen):
        raise NginxConfigError(f"HTTPS listen {options.https_listen!r} must be PORT or ADDRESS:PORT.")
    port = options.https_listen.rsplit(":", 1)[-1]
    certificates = _path(options.certificates_dir, "certbot directory").rstrip("/")
    servers, redirects, backlog = [], [], f" backlog={LISTEN_BACKLOG}"
    for domain in options.domains:
        if not _DOMAIN.fullmatch(domain.name) or ".." in domain.name:
            raise NginxConfigError(f"domain {domain.name!r} is not a host name nginx can serve.")
        if not domain.is_certified:
            continue
        live = f"{certificates}/live/{domain.name}"  # Where certbot keeps it, for this name only.
        head = (
            f"    listen {options.https_listen} ssl{backlog};\n    server_name {domain.name};\n"
            f"    ssl_certificate {live}/fullchain.pem;\n    ssl_certificate_key {live}/privkey.pem;"
        )
        backlog = ""  # Once per address: nginx refuses a second listen with options.
        servers.append(render_template("nginx/lanner-server.conf", {**values, "SERVER_HEAD": head}))
        if domain.redirect_http:
            target = f"https://$host{'' if port == '443' else ':' + port}$request_uri"
            redirects.append(
                f"server {{\n    listen {options.listen};\n    server_name {domain.name};\n"
                f"    location ^~ /.well-known/acme-challenge/ {{\n"
                f"        root {values['ACME_WEBROOT']};\n        default_type text/plain;\n"
                f"        try_files $uri =404;\n    }}\n"
                f"    location / {{\n        return 301 {target};\n    }}\n}}\n"
            )
    return servers + redirects


def render_site(options: SiteOptions) -> str:
    """The server block proxying campaign URLs, postbacks and the API to Lanner's workers (on one box,
    or over several nodes: an upstream server a node)."""
    upstreams = _servers(options.upstream)
    if not upstreams:
        raise NginxConfigError("At least one upstream is needed.")
    if len(set(upstreams)) < len(upstreams):
        raise NginxConfigError("An upstream is listed twice.")
    admin_upstreams = _servers(options.admin_upstream) or upstreams
    report_upstreams = _servers(options.report_upstream)
    if not _LISTEN.fullmatch(options.listen):
        raise NginxConfigError(f"listen {options.listen!r} must be PORT or ADDRESS:PORT.")
    if not _SERVER_NAME.fullmatch(options.server_name):
        raise NginxConfigError(f"server name {options.server_name!r} has characters nginx would misread.")
    if not _HEADER.fullmatch(options.real_ip_header):
        raise NginxConfigError(f"real IP header {options.real_ip_header!r} is not a header name.")
    _path(options.landers_dir, "landers directory")
    if type(options.lander_upload_bytes) is not int or options.lander_upload_bytes < 0:
        size = options.lander_upload_bytes
        raise NginxConfigError(f"lander upload size {size!r} is not a number of bytes.")
    trusted = _cidrs(options.trusted_proxies, "Trusted proxy")
    admin = _cidrs(options.admin_allow, "Admin address")
    values = {
        "ACME_WEBROOT": _path(options.acme_webroot, "ACME webroot"),
        "ADMIN_UPSTREAM_SERVERS": (
            _report_server_lines(report_upstreams[0], admin_upstreams)
            if report_upstreams
            else _server_lines(admin_upstreams)
        ),
        "CONNECT_TIMEOUT": "1s" if len(upstreams) > 1 else "5s",
        "REAL_IP_HEADER": options.real_ip_header,
        "SET_REAL_IP_FROM": "\n".join(f"    set_real_ip_from {cidr};" for cidr in trusted)
        or "    # No trusted proxy: the TCP peer is the visitor.",
        "ADMIN_ALLOW": "\n".join(f"        allow {cidr};" for cidr in admin),
        "LANDERS_DIR": options.landers_dir.rstrip("/"),
        "LANDER_TYPES": "\n".join(f"            {kind} {names};" for kind, names in LANDER_TYPES.items()),
        "LANDER_SANDBOX": SANDBOX,
        # The zip and room for the form around it, in whole MiB.
        "LANDER_UPLOAD_SIZE": f"{-(-(options.lander_upload_bytes + 65536) // 2**20)}m",
    }
    head = f"    listen {options.listen} backlog={LISTEN_BACKLOG};\n    server_name {options.server_name};"
    servers = [render_template("nginx/lanner-server.conf", {**values, "SERVER_HEAD": head})]
    servers += _domain_servers(options, values)
    site = {**values, "UPSTREAM_SERVERS": _web_server_lines(upstreams), "SERVERS": "\n".join(servers)}
    return render_template("nginx/lanner-site.conf", site)


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
