"""HTTPS end to end: `lanner domain add` gets certificates with certbot (Debian's package) from a local
ACME server (Debian's pebble) through a real nginx, which then serves clicks over HTTPS on two domains;
plain HTTP redirects where asked; the daily renewal task renews and nginx serves the new certificate.

Validation is real (http-01): pebble resolves the test's domains with its companion pebble-challtestsrv
as a DNS server answering 127.0.0.1 for every name, and fetches the challenge from nginx's HTTP port
(pebble's `httpPort`). Pebble, its DNS server and nginx need ports written into their configurations:
each takes a free port (bound and closed) and another if the port was taken meanwhile.
"""

from __future__ import annotations

import http.client
import json
import os
import shlex
import shutil
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest
from cluster_nodes import NGINX, start_nginx
from conftest import LANNER, ROOT, LiveProcess, free_port, request, start_process, wait_until

TOOLS = ("pebble", "pebble-challtestsrv", "certbot", "openssl")
pytestmark = [
    pytest.mark.long,
    pytest.mark.store_agnostic,  # Certificates and TLS in front of the same store code.
    pytest.mark.skipif(
        not os.path.exists(NGINX) or not all(shutil.which(tool) for tool in TOOLS),
        reason="nginx, pebble, certbot and openssl are installed by `make test-deps`",
    ),
]

D1, D2 = "d1.lanner.test", "d2.lanner.test"  # .test: never a real name (RFC 2606).
RENEW_DUE = 20 * 86400  # Pebble's certificates live 20 days: certbot renews at 30 days left.


def _started(
    args: list[str], environ: dict, log: Path, ready: str, deadline: float = 15
) -> LiveProcess | None:
    """The process once its log says `ready`; None if it exited saying its address was in use."""
    live = start_process(args, environ, log)
    end = time.monotonic() + deadline
    while ready not in live.log:
        if live.process.poll() is not None:
            if "address already in use" in live.log.lower():
                return None
            raise AssertionError(live.log)
        assert time.monotonic() < end, live.log
        time.sleep(0.05)
    return live


def accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def start_acme(directory: Path, http_port: int) -> tuple[LiveProcess, LiveProcess, dict]:
    """pebble-challtestsrv (DNS: every name is 127.0.0.1) and pebble validating on `http_port`."""
    env = {"PATH": os.environ["PATH"]}
    for _ in range(5):
        dns_port = free_port()
        dns = _started(
            [
                "pebble-challtestsrv",
                "-dns01",
                f"127.0.0.1:{dns_port}",
                "-http01",
                "",
                "-https01",
                "",
                "-tlsalpn01",
                "",
                "-management",
                f"127.0.0.1:{free_port()}",
                "-defaultIPv6",
                "",
            ],
            env,
            directory / f"dns-{dns_port}.log",
            "Starting challenge servers",
        )
        if dns is not None:
            break
    else:
        raise AssertionError("pebble-challtestsrv found no free port in 5 tries")
    key, cert = directory / "pebble-key.pem", directory / "pebble-cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            key,
            "-out",
            cert,
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    # Every good nonce accepted (pebble rejects 5% by default), no sleeps before validating.
    pebble_env = {**env, "PEBBLE_VA_NOSLEEP": "1", "PEBBLE_WFE_NONCEREJECT": "0"}
    for _ in range(5):
        acme_port, management_port = free_port(), free_port()
        config = directory / f"pebble-{acme_port}.json"
        config.write_text(
            json.dumps(
                {
                    "pebble": {
                        "listenAddress": f"127.0.0.1:{acme_port}",
                        "managementListenAddress": f"127.0.0.1:{management_port}",
                        "certificate": str(cert),
                        "privateKey": str(key),
                        "httpPort": http_port,
                        "tlsPort": free_port(),
                        "ocspResponderURL": "",
                        "externalAccountBindingRequired": False,
                        "certificateValidityPeriod": RENEW_DUE,
                    }
                }
            )
        )
        pebble = _started(
            ["pebble", "-config", str(config), "-dnsserver", f"127.0.0.1:{dns_port}", "-strict=false"],
            pebble_env,
            directory / f"pebble-{acme_port}.log",
            "ACME directory available",
        )
        if pebble is not None:
            break
    else:
        dns.stop()
        raise AssertionError("pebble found no free port in 5 tries")
    # Pebble logs its addresses before it listens on them.
    ports = (dns_port, acme_port, management_port)
    wait_until(lambda: all(accepts(port) for port in ports), 10, "pebble", lambda: pebble.log)
    context = ssl.create_default_context(cafile=str(cert))
    connection = http.client.HTTPSConnection("127.0.0.1", management_port, context=context, timeout=10)
    connection.request("GET", "/roots/0")
    roots = directory / "pebble-roots.pem"  # The CA that signs what pebble issues: the clients trust it.
    roots.write_bytes(connection.getresponse().read())
    connection.close()
    acme = {
        "LANNER_ACME_SERVER": f"https://127.0.0.1:{acme_port}/dir",
        "LANNER_ACME_EMAIL": "ops@lanner.test",
        "REQUESTS_CA_BUNDLE": str(cert),  # certbot (python-requests) trusts pebble's own listener.
        "roots": str(roots),
    }
    return dns, pebble, acme


def https_get(port: int, host: str, path: str, roots: str) -> tuple[int, dict[str, str], dict]:
    """GET over TLS to 127.0.0.1:`port` with SNI and Host `host`, the certificate checked against pebble's
    root for that name; (status, headers, the server's certificate)."""
    context = ssl.create_default_context(cafile=roots)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=host) as tls:
            request_line = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: Mozilla/5.0 https {path}\r\n"
            tls.sendall((request_line + "Connection: close\r\n\r\n").encode())
            response = http.client.HTTPResponse(tls)
            response.begin()
            headers = {k.lower(): v for k, v in response.getheaders()}
            response.read()
            return response.status, headers, tls.getpeercert()


def served_as(port: int, host: str, roots: str) -> bool:
    """nginx answers TLS for `host` with a certificate for that name."""
    try:
        https_get(port, host, "/healthz", roots)
    except ssl.SSLCertVerificationError:
        return False
    return True


@pytest.fixture
def https_front(env, db, lanner, tmp_path):
    """`lanner serve` on a socket behind nginx (HTTP, and HTTPS on a second port once a domain has a
    certificate), pebble validating through it; yields (env for the CLI, http port, https port, roots)."""
    socket_path = tmp_path / "web.sock"
    serve = start_process(
        [*LANNER, "serve", "--workers", "1", "--bind", f"unix:{socket_path}"], env, tmp_path / "serve.log"
    )
    processes = [serve]
    try:
        wait_until(socket_path.exists, 20, "lanner serve's socket", lambda: serve.log)
        https_port = free_port()
        front = start_nginx(
            tmp_path, env, "--upstream", f"unix:{socket_path}", "--https-listen", f"127.0.0.1:{https_port}"
        )
        processes.append(front)
        prefix = tmp_path / f"nginx-{front.port}"
        dns, pebble, acme = start_acme(tmp_path, front.port)
        processes += [dns, pebble]
        roots = acme.pop("roots")
        # As root's lanner-nginx-reload.service does: the site rendered from the saved options, then
        # nginx reloaded (also certbot's deploy hook, from the renewal task below).
        lanner_env = [f"{name}={value}" for name, value in env.items() if name.startswith("LANNER_")]
        render = ["env", f"PYTHONPATH={ROOT}", *lanner_env, *LANNER, "nginx", "site", "--saved"]
        render += ["-o", str(prefix / "site.conf")]
        signal = f"{NGINX} -c {prefix / 'nginx.conf'} -p {prefix} -s reload"
        reload = shlex.join(["sh", "-c", f"{shlex.join(render)} && {signal}"])
        yield {**env, **acme, "LANNER_NGINX_RELOAD": reload}, front.port, https_port, roots
    finally:
        for live in reversed(processes):
            live.stop()


def test_clicks_over_https_on_two_domains_and_renewal(https_front, lanner, db, settings, monkeypatch):
    from conftest import run_lanner

    environ, http_port, https_port, roots = https_front
    for alias in ("one", "two"):
        lanner(
            "campaign",
            "create",
            alias,
            "--alias",
            alias,
            "--offer-url",
            f"https://offer.example/{alias}?c={{subid}}",
        )
    added = run_lanner(environ, "domain", "add", D1, "--campaign", "one", "--redirect-http").stdout
    assert f"Certificate for {D1} valid until" in added and f"https://{D1}/" in added
    run_lanner(environ, "domain", "add", D2)
    listed = {d["name"]: d for d in json.loads(run_lanner(environ, "domain", "list", "--json").stdout)}
    assert {name: d["cert_state"] for name, d in listed.items()} == {D1: "valid", D2: "valid"}
    # The site names certbot's files for each checked name, not paths kept anywhere Lanner writes.
    site = (Path(environ["LANNER_DATA_DIR"]).parent / f"nginx-{http_port}" / "site.conf").read_text()
    live = Path(environ["LANNER_DATA_DIR"]) / "certbot/config/live"
    assert f"ssl_certificate_key {live}/{D1}/privkey.pem;" in site
    assert f"ssl_certificate {live}/{D2}/fullchain.pem;" in site

    # A click over HTTPS on each domain: the parked campaign at D1's root, an alias on D2.
    status, headers, cert = wait_until(
        lambda: (answer := https_get(https_port, D1, "/", roots))[0] == 302 and answer,
        60,
        "nginx serving D1 over HTTPS",
    )
    assert headers["location"].startswith("https://offer.example/one?c=")
    assert dict(pair[0] for pair in cert["subject"]).get("commonName") in (D1, None)
    assert ("DNS", D1) in cert["subjectAltName"]
    # D2's server block came with the reload `domain add D2` asked for, which nginx applies on its own
    # time: until then its old workers answer D2 with D1's certificate.
    wait_until(lambda: served_as(https_port, D2, roots), 60, "nginx serving D2's certificate")
    status, headers, cert = https_get(https_port, D2, "/two", roots)
    assert status == 302 and headers["location"].startswith("https://offer.example/two?c=")
    assert ("DNS", D2) in cert["subjectAltName"]
    lanner("spool", "flush")
    stored = db.execute_sql(
        "SELECT c.alias, k.domain FROM click k JOIN campaign c ON c.id = k.campaign_id ORDER BY k.id"
    )
    assert [tuple(row) for row in stored.fetchall()] == [("one", D1), ("two", D2)]

    # Plain HTTP: D1 redirects to HTTPS (the challenge path excepted), D2 still answers the click.
    status, headers, _ = request(http_port, "/one?sub1=x", {"Host": D1})
    assert status == 301 and headers["location"] == f"https://{D1}:{https_port}/one?sub1=x"
    status, _, _ = request(http_port, "/.well-known/acme-challenge/none", {"Host": D1})
    assert status == 404  # nginx's webroot, not the redirect.
    status, headers, _ = request(http_port, "/two", {"Host": D2, "User-Agent": "Mozilla/5.0 plain"})
    assert status == 302 and headers["location"].startswith("https://offer.example/two?c=")
    lanner("spool", "flush")
    report = json.loads(lanner("report", "-g", "domain", "--json").stdout)
    assert {row["domain"]: row["clicks"] for row in report["rows"]} == {D1: 1, D2: 2}

    # The daily renewal task: pebble's 20-day certificates are due, certbot renews both, its deploy
    # hook reloads nginx, which serves the new certificate; the domains' expiries are read back.
    from settings import load_settings
    from workers.runtime.tasks import create_huey

    for name in ("LANNER_ACME_SERVER", "REQUESTS_CA_BUNDLE", "LANNER_NGINX_RELOAD", "LANNER_DATA_DIR"):
        monkeypatch.setenv(name, environ[name])
    serial = https_get(https_port, D1, "/", roots)[2]["serialNumber"]
    huey = create_huey(load_settings(environ), immediate=True)
    huey.renew_certificates()
    cert = wait_until(
        lambda: (served := https_get(https_port, D1, "/", roots)[2])["serialNumber"] != serial and served,
        60,
        "nginx serving the renewed certificate",
    )
    renewed = {d["name"]: d for d in json.loads(run_lanner(environ, "domain", "list", "--json").stdout)}
    assert renewed[D1]["cert_expires_at"] == ssl.cert_time_to_seconds(cert["notAfter"]) * 1000

    # A removed domain leaves the site (D2's name now gets D1's block: the name check fails) and certbot.
    removed = run_lanner(environ, "domain", "remove", D2).stdout
    assert "certificate is deleted" in removed
    wait_until(lambda: not served_as(https_port, D2, roots), 10, "nginx without D2's HTTPS block")
    assert not (Path(environ["LANNER_DATA_DIR"]) / "certbot/config/live" / D2).exists()
    assert https_get(https_port, D1, "/", roots)[0] == 302
