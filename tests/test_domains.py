"""Domains as objects: the `lanner domain` commands, and routing by Host on a real `lanner serve`."""

from __future__ import annotations

import csv
import io
import json

import pytest
from conftest import request, wait_until
from test_api_v1 import VIEWER_KEY, admin, call, key  # noqa: F401
from test_panel import csrf_token, get, log_in, make_panel, panel, post, users  # noqa: F401

# ruff: noqa: F811 (the fixtures imported above, taken as arguments)


def offer(alias: str) -> str:
    return f"https://offer.example/{alias}?c={{subid}}"


def test_domains_are_added_listed_changed_and_removed(lanner):
    lanner("campaign", "create", "One", "--alias", "one", "--offer-url", offer("one"))
    added = lanner("domain", "add", "Track.Example.COM.", "--campaign", "one", "--no-https").stdout
    assert "Domain track.example.com added" in added
    lanner("domain", "add", "go.example.org", "--no-https")
    listed = json.loads(lanner("domain", "list", "--json").stdout)
    assert [(d["name"], d["root_campaign"], d["https"]) for d in listed] == [
        ("go.example.org", None, False),
        ("track.example.com", "one", False),
    ]
    rows = list(csv.DictReader(io.StringIO(lanner("domain", "list", "--csv").stdout)))
    assert rows[1]["url"] == "http://track.example.com/" and rows[1]["cert_state"] == "none"
    lanner("domain", "update", "track.example.com", "--campaign", "")
    shown = json.loads(lanner("domain", "show", "TRACK.example.com", "--json").stdout)
    assert shown["root_campaign"] is None
    # A campaign restricted to domains shows its URL on the first.
    lanner("domain", "campaign", "one", "go.example.org", "track.example.com")
    campaign = json.loads(lanner("campaign", "show", "one", "--json").stdout)
    assert campaign["url"] == "http://go.example.org/one"
    assert campaign["domains"] == ["go.example.org", "track.example.com"]
    lanner("domain", "remove", "go.example.org")
    campaign = json.loads(lanner("campaign", "show", "one", "--json").stdout)
    assert campaign["url"] == "http://track.example.com/one"
    assert [d["name"] for d in json.loads(lanner("domain", "list", "--json").stdout)] == ["track.example.com"]


def test_bad_domains_are_refused_in_one_sentence(lanner):
    lanner("domain", "add", "a.example.com", "--no-https")
    for name, message in [
        ("not a domain", "is not a domain name"),
        ("localhost", "is not a domain name"),
        ("10.0.0.1", "is not a domain name"),
        ("x-.example.com", "is not a domain name"),
        ("A.example.com", "already exists"),
    ]:
        result = lanner("domain", "add", name, "--no-https", check=False)
        assert result.returncode == 1 and message in result.stderr, (name, result.stderr)
        assert "Traceback" not in result.stderr
    missing = lanner("domain", "show", "b.example.com", check=False)
    assert missing.returncode == 1 and "There is no domain 'b.example.com'" in missing.stderr
    parked = lanner("domain", "update", "a.example.com", "--campaign", "nope", check=False)
    assert parked.returncode == 1 and "nope" in parked.stderr


def test_https_without_a_rendered_site_says_what_to_do(lanner):
    result = lanner("domain", "add", "secure.example.com", check=False)
    assert result.returncode == 1 and "lanner nginx site -o PATH" in result.stderr
    # The domain is kept, and why it has no certificate: `lanner domain cert` gets it once the site is there.
    shown = json.loads(lanner("domain", "show", "secure.example.com", "--json").stdout)
    assert (shown["https"], shown["cert_state"]) == (True, "failed")
    assert "lanner nginx site" in shown["cert_error"]
    lanner("campaign", "create", "One", "--alias", "one", "--offer-url", offer("one"))
    lanner("domain", "update", "secure.example.com", "--campaign", "one")  # Nothing for nginx: no certbot.
    failed = lanner("domain", "update", "secure.example.com", "--redirect-http", check=False)
    assert failed.returncode == 1 and "lanner nginx site -o PATH" in failed.stderr


def post_form(app, path, fields, cookie):
    status, headers, body = post(app, path, fields, cookie)
    return status, headers, body.decode()


def host_get(port: int, path: str, host: str) -> tuple[int, str]:
    status, headers, _ = request(port, path, {"Host": host, "User-Agent": "Mozilla/5.0 domains"})
    return status, headers.get("location", "")


def test_hosts_route_campaigns_once_a_domain_exists(lanner, start_server):
    for alias in ("one", "two"):
        lanner("campaign", "create", alias, "--alias", alias, "--offer-url", offer(alias))
    port = start_server(workers=1).port
    # No domain: every host answers every campaign, and `/` is nothing.
    assert host_get(port, "/one", "anything.example.net")[1].startswith("https://offer.example/one")
    assert host_get(port, "/", "anything.example.net")[0] == 404

    lanner("domain", "add", "d1.example.com", "--campaign", "one", "--no-https")
    lanner("domain", "add", "d2.example.com", "--no-https")
    lanner("domain", "campaign", "two", "d2.example.com")
    # A host the worker does not know yet makes it look for a change at once.
    status, location = host_get(port, "/", "D1.example.com:8080")
    assert status == 302 and location.startswith("https://offer.example/one"), (status, location)
    assert host_get(port, "/one", "d2.example.com")[1].startswith("https://offer.example/one")  # Any domain.
    assert host_get(port, "/two", "d2.example.com")[1].startswith("https://offer.example/two")
    assert host_get(port, "/two", "d1.example.com")[0] == 404  # Not one of its domains.
    assert host_get(port, "/one", "unknown.example.net")[0] == 404  # Not a domain.
    assert host_get(port, "/", "d2.example.com")[0] == 404  # Nothing parked.
    assert host_get(port, "/healthz", "unknown.example.net")[0] == 200  # Health (and postbacks): any host.
    # The tracker's own names (LANNER_TRACKER_HOSTS, loopback by default) answer as a domain parking nothing.
    assert host_get(port, "/one", "127.0.0.1:8080")[1].startswith("https://offer.example/one")
    assert host_get(port, "/two", "localhost")[0] == 404
    assert host_get(port, "/", "localhost")[0] == 404

    lanner("domain", "update", "d1.example.com", "--status", "archived")
    lanner("domain", "remove", "d2.example.com")
    # No active domain left (and `two`'s only one gone): every host answers every campaign again.
    wait_until(lambda: host_get(port, "/two", "unknown.example.net")[0] == 302, 10, "the domains' removal")
    assert host_get(port, "/", "d1.example.com")[0] == 404


def test_unknown_hosts_get_the_fallback(lanner, start_server):
    lanner("campaign", "create", "one", "--alias", "one", "--offer-url", offer("one"))
    lanner("domain", "add", "d1.example.com", "--no-https")
    port = start_server(workers=1, LANNER_FALLBACK_URL="https://fallback.example/").port
    assert host_get(port, "/one", "d1.example.com")[1].startswith("https://offer.example/one")
    assert host_get(port, "/one", "elsewhere.example.net") == (302, "https://fallback.example/")
    assert host_get(port, "/", "elsewhere.example.net") == (302, "https://fallback.example/")
    assert host_get(port, "/", "d1.example.com") == (302, "https://fallback.example/")  # Nothing parked.


# -- the admin API -------------------------------------------------------------------------------


def test_domains_through_the_api_are_admins_only_and_queue_their_certificate(admin, key, settings):
    from workers.runtime.tasks import create_huey

    status, offer = call(admin, "POST", "/offers", key, {"name": "O", "url": "https://o.example/?c={subid}"})
    assert status == 201
    campaign = {"name": "S", "alias": "s", "offer_id": offer["id"]}
    assert call(admin, "POST", "/campaigns", key, campaign)[0] == 201
    status, created = call(
        admin, "POST", "/domains", key, {"name": "Go.Example.com", "campaign": "s", "redirect_http": True}
    )
    assert status == 201, created
    assert (created["name"], created["root_campaign"], created["https"], created["cert_state"]) == (
        "go.example.com",
        "s",
        True,
        "none",
    )
    assert create_huey(settings).pending_count() == 1  # `lanner worker` gets the certificate.
    assert call(admin, "POST", "/domains", key, {"name": "go.example.com"})[0] == 409
    status, refused = call(admin, "POST", "/domains", key, {"name": "no spaces.example.com"})
    assert status == 400 and "is not a domain name" in refused["description"]
    assert call(admin, "POST", "/domains", key, {"name": "x.example.com", "campaign": "nope"})[0] == 404
    status, changed = call(admin, "PATCH", "/domains/go.example.com", key, {"https": False})
    assert status == 200 and (changed["https"], changed["redirect_http"]) == (False, False)
    status, listed = call(admin, "GET", "/domains", key)
    assert [d["name"] for d in listed["items"]] == ["go.example.com"] and listed["next"] is None
    status, served = call(admin, "PUT", "/campaigns/s/domains", key, {"domains": ["go.example.com"]})
    assert status == 200 and served == {"domains": ["go.example.com"]}
    assert call(admin, "GET", "/campaigns/s", key)[1]["url"] == "http://go.example.com/s"
    assert call(admin, "PUT", "/campaigns/s/domains", key, {"domains": ["nope.example.com"]})[0] == 404
    for method, path, body in [
        ("GET", "/domains", None),
        ("POST", "/domains", {"name": "v.example.com"}),
        ("DELETE", "/domains/go.example.com", None),
    ]:
        assert call(admin, method, path, VIEWER_KEY, body)[0] == 403, (method, path)
    assert call(admin, "DELETE", "/domains/go.example.com", key)[1] == {"removed": "go.example.com"}
    assert call(admin, "GET", "/domains/go.example.com", key)[0] == 404
    assert call(admin, "GET", "/campaigns/s/domains", key)[1] == {"domains": []}


# -- the panel -----------------------------------------------------------------------------------


def test_the_panel_lists_adds_changes_and_removes_domains_for_admins_only(panel, users, db, settings):
    from models.admin.domains import get_domain, record_certificate
    from workers.runtime.tasks import create_huey

    anna = log_in(panel, "anna")
    status, _, html = get(panel, "/panel/domains", anna)
    assert status == 200 and "No domains yet" in html and 'href="/panel/status" aria-current="page"' in html
    assert 'href="/panel/domains" id="domains-link"' in get(panel, "/panel/status", anna)[2]
    token = csrf_token(html)
    form = {"name": "bad name", "https": "1", "csrf_token": token}
    status, _, html = post_form(panel, "/panel/domains", form, anna)
    assert status == 400 and "is not a domain name" in html and 'value="bad name"' in html
    fields = {"name": "Go.Example.com", "https": "1", "redirect_http": "1", "csrf_token": token}
    status, headers, _ = post_form(panel, "/panel/domains", fields, anna)
    assert status == 303 and headers["location"] == "/panel/domains/1?created=1"
    assert create_huey(settings).pending_count() == 1  # The worker gets the certificate.
    record_certificate(db, "go.example.com", expires_at=1_900_000_000_000)  # As the worker would.
    status, _, html = get(panel, "/panel/domains", anna)
    assert "go.example.com" in html and "https://go.example.com/" in html and "2030-03-17 17:46" in html
    status, _, html = get(panel, "/panel/domains/1?created=1", anna)
    assert status == 200 and "the worker gets its certificate" in html and "valid" in html
    change = {"campaign": "", "https": "1", "status": "archived", "csrf_token": token}
    assert post_form(panel, "/panel/domains/1", change, anna)[0] == 303
    domain = get_domain(db, 1)
    assert (domain.status, domain.redirect_http) == ("archived", 0)
    # Buyers and viewers neither see nor change domains.
    bert = log_in(panel, "bert")
    assert get(panel, "/panel/domains", bert)[0] == 403
    assert 'href="/panel/domains"' not in get(panel, "/panel", bert)[2]
    assert post_form(panel, "/panel/domains/1", {"remove": "1", "csrf_token": token}, bert)[0] == 403
    assert post_form(panel, "/panel/domains/1", {"remove": "1", "csrf_token": "forged"}, anna)[0] == 403
    assert post_form(panel, "/panel/domains/1", {"remove": "1", "csrf_token": token}, anna)[0] == 303
    assert "No domains yet" in get(panel, "/panel/domains", anna)[2]
    assert get(panel, "/panel/domains/1", anna)[0] == 404


def test_the_panel_s_campaign_editor_shows_the_url_on_the_campaign_s_first_domain(panel, users, lanner):
    lanner("campaign", "create", "One", "--alias", "one", "--offer-url", offer("one"))
    anna = log_in(panel, "anna")
    assert "http://go.example.com/one" not in get(panel, "/panel/campaigns/1", anna)[2]
    lanner("domain", "add", "go.example.com", "--no-https")
    lanner("domain", "campaign", "one", "go.example.com")
    assert "http://go.example.com/one" in get(panel, "/panel/campaigns/1", anna)[2]


def test_the_site_refuses_what_nginx_would_misread_in_a_domain():
    from workers.ops.nginx import NginxConfigError, SiteDomain, SiteOptions, render_site

    for domain, dirs, message in [
        (SiteDomain("evil.example.com;include /etc/passwd"), "/c", "is not a host name"),
        (SiteDomain("evil.example.com\n"), "/c", "is not a host name"),
        (SiteDomain("ok.example.com", True), "/certs/a b", "absolute path without spaces"),
        (SiteDomain("ok.example.com", True), "relative", "absolute path without spaces"),
    ]:
        with pytest.raises(NginxConfigError, match=message):
            render_site(SiteOptions(upstream="127.0.0.1:8080", domains=(domain,), certificates_dir=dirs))
    with pytest.raises(NginxConfigError, match="HTTPS listen"):
        render_site(SiteOptions(upstream="127.0.0.1:8080", https_listen="443 ssl; x"))


SMUGGLED = ";\n load_module /tmp/x.so;"


def test_the_saved_site_options_are_checked_again_and_a_smuggled_directive_writes_nothing(
    env, lanner, settings, tmp_path
):
    """root's reload service renders the site from DATA_DIR/nginx-site.json, which the `lanner` user
    writes: each value that would carry a directive into nginx's configuration is refused."""
    from conftest import run_lanner

    lanner("nginx", "site", "--upstream", "127.0.0.1:8080", "--listen", "8081", "--save")
    saved = settings.data_dir / "nginx-site.json"
    good = json.loads(saved.read_text())
    output = tmp_path / "site.conf"
    assert "listen 8081 backlog=" in lanner("nginx", "site", "--saved").stdout
    for name, value in [
        ("listen", "80" + SMUGGLED),
        ("listen", "80\n"),
        ("https_listen", "443 ssl" + SMUGGLED),
        ("upstream", ["unix:/run/x.sock" + SMUGGLED]),
        ("upstream", ["evil" + SMUGGLED + ":80"]),
        ("admin_upstream", ['unix:/run/a"b.sock']),
        ("report_upstream", "127.0.0.1:8081" + SMUGGLED),
        ("report_upstream", ["127.0.0.1:8081"]),
        ("server_name", "track.example.com" + SMUGGLED),
        ("server_name", "track\\"),
        ("real_ip_header", "X-Real-IP" + SMUGGLED),
        ("trusted_proxies", ["10.0.0.0/8" + SMUGGLED]),
        ("admin_allow", ["127.0.0.1 { }"]),
        ("landers_dir", "/tmp" + SMUGGLED),  # Not an option it saves: this host's setting is used.
        ("listen", 80),
    ]:
        saved.write_text(json.dumps({"options": {**good["options"], name: value}}))
        refused = run_lanner(env, "nginx", "site", "--saved", "-o", str(output), check=False)
        assert refused.returncode == 1, (name, value, refused.stdout)
        error = refused.stderr.strip().splitlines()
        assert len(error) == 1 and error[0].startswith("Error: ") and error[0].endswith("."), refused.stderr
        assert not output.exists() and not list(tmp_path.glob("site.conf*"))
    saved.write_text("{not json")
    refused = run_lanner(env, "nginx", "site", "--saved", "-o", str(output), check=False)
    assert refused.returncode == 1 and "lanner nginx site -o PATH" in refused.stderr and not output.exists()


def test_the_site_s_certificates_are_certbot_s_files_for_the_checked_name(env, lanner, settings, tmp_path):
    lanner("nginx", "site", "--upstream", "127.0.0.1:8080", "--save")
    lanner("domain", "add", "secure.example.com", "--redirect-http", "--no-cert")
    lanner("domain", "add", "plain.example.com", "--no-https", "--no-cert")
    live = settings.certbot_path / "config" / "live"
    for name in ("secure.example.com", "plain.example.com"):
        (live / name).mkdir(parents=True)
        for pem in ("fullchain.pem", "privkey.pem"):
            (live / name / pem).write_text("not read: nginx's test would")
    site = lanner("nginx", "site", "--saved").stdout
    assert f"ssl_certificate {live}/secure.example.com/fullchain.pem;" in site
    assert f"ssl_certificate_key {live}/secure.example.com/privkey.pem;" in site
    assert site.count("ssl_certificate ") == 1  # plain.example.com wants no HTTPS: its files unused.


def test_a_certificate_s_expiry_is_read_with_openssl_and_a_bad_file_is_said(tmp_path):
    from workers.ops.certs import CertError, certificate_expiry

    assert certificate_expiry(tmp_path / "none.pem") is None  # No certificate yet.
    bad = tmp_path / "bad.pem"
    bad.write_text("-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n")
    with pytest.raises(CertError, match=f"openssl could not read the expiry of the certificate {bad}"):
        certificate_expiry(bad)
