"""Certificates for domains with certbot (Debian's package), and the nginx site that serves them.

certbot runs in webroot mode through the running nginx: the site serves
`/.well-known/acme-challenge/` from LANNER_ACME_WEBROOT on plain HTTP on every host, certbot writes
its answer there, the ACME server fetches it. certbot keeps its account, certificates and renewal
settings under LANNER_CERTBOT_DIR (config/, work/, logs/), so the `lanner` user runs it without root.

`lanner nginx site -o PATH` saves its options beside the data (DATA_DIR/nginx-site.json). After a
certificate is got or renewed, or a domain changes, LANNER_NGINX_RELOAD runs: it renders the site again
(`lanner nginx site --saved -o PATH`: those options, checked again, and the domains' certificates) and
reloads nginx. On an install that is root's lanner-nginx-reload.service, so nginx's configuration is
root's file: the `lanner` user, which faces the web, only asks for it (README, "Domains and HTTPS").
"""

from __future__ import annotations

import calendar
import json
import logging
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from models.errors import LannerError
from settings import Settings

if TYPE_CHECKING:
    from peewee import Database

logger = logging.getLogger(__name__)

CERTBOT_TIMEOUT = 300  # Seconds: an ACME order with a slow validation; never forever.
SITE_RECORD = "nginx-site.json"


class CertError(LannerError):
    """certbot could not get or renew a certificate; the message says why (certbot's last lines)."""


def certbot_dirs(settings: Settings) -> list[str]:
    base = settings.certbot_path
    return [
        "--config-dir",
        str(base / "config"),
        "--work-dir",
        str(base / "work"),
        "--logs-dir",
        str(base / "logs"),
    ]


def certificate_paths(settings: Settings, name: str) -> tuple[Path, Path]:
    """(fullchain.pem, privkey.pem) as certbot keeps them for the domain (a symlink to the newest)."""
    live = settings.certbot_path / "config" / "live" / name
    return live / "fullchain.pem", live / "privkey.pem"


def certificate_expiry(path: Path) -> int | None:
    """When the certificate at `path` expires (UTC ms), or None without one there; CertError when
    openssl cannot read the file that is there."""
    if not path.exists():
        return None
    command = ["openssl", "x509", "-enddate", "-noout", "-in", str(path)]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    except FileNotFoundError:
        raise CertError("openssl is not installed (apt-get install openssl).") from None
    except subprocess.TimeoutExpired:
        raise CertError(f"openssl did not read {path} within 30 s.") from None
    answer = result.stdout.strip()
    try:
        if result.returncode != 0 or not answer.startswith("notAfter="):
            raise ValueError
        # As openssl prints it: `notAfter=Jun 30 12:00:00 2026 GMT`.
        expires = time.strptime(" ".join(answer[len("notAfter=") :].split()), "%b %d %H:%M:%S %Y GMT")
    except ValueError:
        said = (result.stderr.strip() or answer or f"exit {result.returncode}")[-300:]
        raise CertError(f"openssl could not read the expiry of the certificate {path}: {said}") from None
    return calendar.timegm(expires) * 1000


def _certbot(settings: Settings, args: list[str]) -> subprocess.CompletedProcess:
    command = [
        "certbot",
        *args,
        *certbot_dirs(settings),
        "--non-interactive",
        "--server",
        settings.acme_server,
    ]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=CERTBOT_TIMEOUT, check=False)
    except FileNotFoundError:
        raise CertError("certbot is not installed (apt-get install certbot).") from None
    except subprocess.TimeoutExpired:
        raise CertError(f"certbot did not finish within {CERTBOT_TIMEOUT} s.") from None


def _last_words(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in (result.stderr + result.stdout).splitlines() if line.strip()]
    return " ".join(lines[-6:])[-1000:] or f"certbot exited with {result.returncode}"


def obtain_certificate(settings: Settings, name: str) -> int:
    """Get (or keep, if it is still good) the domain's certificate; its expiry (UTC ms). The site must be
    served (the challenge location) by nginx for the name already."""
    webroot = settings.acme_webroot_path
    webroot.mkdir(parents=True, exist_ok=True)
    email = ["--email", settings.acme_email] if settings.acme_email else ["--register-unsafely-without-email"]
    result = _certbot(
        settings,
        [
            "certonly",
            "--webroot",
            "-w",
            str(webroot),
            "-d",
            name,
            "--cert-name",
            name,
            "--agree-tos",
            "--keep-until-expiring",
            *email,
        ],
    )
    if result.returncode != 0:
        raise CertError(f"certbot could not get a certificate for {name}: {_last_words(result)}")
    expires_at = certificate_expiry(certificate_paths(settings, name)[0])
    if expires_at is None:
        raise CertError(f"certbot said yes but left no certificate for {name}.")
    return expires_at


def renew_certificates(settings: Settings, *, force: bool = False) -> list[str]:
    """`certbot renew`: every certificate due (all with `force`); certbot's deploy hook, run once per
    renewed certificate, reloads nginx (the site names the live paths: nothing to render). Then each
    domain's expiry is read back from its certificate. The names renewed."""
    from models.admin.domains import list_domains, record_certificate
    from models.store.database import db

    # certbot sleeps up to 8 minutes before a renewal it was not asked for at a terminal (spreading
    # the load on Let's Encrypt): the schedule is spread instead (workers/runtime/tasks.py).
    args = ["renew", "--deploy-hook", settings.nginx_reload, "--no-random-sleep-on-renew"]
    args += ["--force-renewal"] if force else []
    result = _certbot(settings, args)
    renewed = []
    for domain in list_domains(db):
        try:
            expires_at = certificate_expiry(certificate_paths(settings, domain.name)[0])
        except CertError as exc:  # One unreadable file: the others' expiries are still read back.
            logger.warning("%s", exc)
            continue
        if expires_at is not None and expires_at != domain.cert_expires_at:
            record_certificate(db, domain.id, expires_at=expires_at)
            renewed.append(domain.name)
    if result.returncode != 0:
        raise CertError(f"certbot renew failed: {_last_words(result)}")
    return renewed


def delete_certificate(settings: Settings, name: str) -> bool:
    """Forget a removed domain's certificate (`certbot delete`: renewals stop); False if it had none."""
    if not (settings.certbot_path / "config" / "renewal" / f"{name}.conf").exists():
        return False
    result = _certbot(settings, ["delete", "--cert-name", name])
    if result.returncode != 0:
        raise CertError(f"certbot could not delete the certificate of {name}: {_last_words(result)}")
    return True


# -- the nginx site ----------------------------------------------------------------------------


def record_site(settings: Settings, options) -> None:
    """Save the options `lanner nginx site -o` was given, to render the site again as domains change
    (`lanner nginx site --saved`)."""
    from workers.ops.nginx import SAVED_FIELDS

    record = {"options": {name: getattr(options, name) for name in SAVED_FIELDS}}
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    path = settings.data_dir / SITE_RECORD
    path.write_text(json.dumps(record, indent=2))


def recorded_site(settings: Settings) -> dict | None:
    try:
        return json.loads((settings.data_dir / SITE_RECORD).read_text())
    except (OSError, ValueError):
        return None


def saved_site_options(settings: Settings):
    """The saved options, checked (NginxConfigError), with this host's own settings for the rest; the
    site is rendered from them as root, so nothing in the file is believed without its check."""
    from workers.ops.nginx import NginxConfigError, saved_options

    record = recorded_site(settings)
    if record is None:
        raise NginxConfigError(
            f"No readable {settings.data_dir / SITE_RECORD}: render the site once with "
            "`lanner nginx site -o PATH`."
        )
    fields = record.get("options") if isinstance(record, dict) else None
    return saved_options(fields, **site_settings(settings))


def site_settings(settings: Settings) -> dict:
    """The site's options that are this host's settings (not saved: whoever renders reads its own)."""
    return {
        "acme_webroot": str(settings.acme_webroot_path),
        "landers_dir": str(settings.landers_dir),
        "lander_upload_bytes": settings.lander_max_bytes,
        "certificates_dir": str(settings.certbot_path / "config"),
    }


def site_domains(db: Database, settings: Settings) -> tuple:
    """The active domains as the site serves them, each with its certificate once certbot has one."""
    from models.admin.domains import list_domains
    from workers.ops.nginx import SiteDomain

    domains = []
    for domain in list_domains(db):
        certificate, key = certificate_paths(settings, domain.name)
        has_cert = bool(domain.is_https) and certificate.exists() and key.exists()
        domains.append(SiteDomain(domain.name, has_cert, bool(domain.redirect_http)))
    return tuple(domains)


def current_site_domains(settings: Settings) -> tuple:
    """site_domains as `lanner nginx site` renders them: none before the database exists or is migrated
    (a first install renders the site before anything else)."""
    from models.migrations.runner import schema_is_current
    from models.store.database import open_database

    if not settings.uses_postgres and not settings.database_path.exists():
        return ()
    database = open_database(settings.database_location)
    if not schema_is_current(database):
        return ()
    return site_domains(database, settings)


def request_site(settings: Settings) -> bool:
    """Have the site rendered again with today's domains and nginx reloaded (LANNER_NGINX_RELOAD: on an
    install, root's reload service renders it); False when no site was rendered on this host."""
    if recorded_site(settings) is None:
        return False
    reload_nginx(settings)
    return True


def write_site(output: str, text: str) -> None:
    """Write the site whole (a reader never sees half of it), readable by nginx."""
    temporary = f"{output}.new"
    with open(temporary, "w") as target:
        target.write(text)
    os.chmod(temporary, 0o644)  # A config for nginx, no secret in it: not under our umask.
    os.replace(temporary, output)


def reload_nginx(settings: Settings) -> None:
    command = shlex.split(settings.nginx_reload)
    if not command:
        return
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CertError(f"nginx could not be reloaded ({settings.nginx_reload}): {exc}") from None
    if result.returncode != 0:
        raise CertError(f"nginx could not be reloaded ({settings.nginx_reload}): {_last_words(result)}")


def secure_domain(db, settings: Settings, ref: str | int):
    """Serve a domain as it now is: its certificate got if it wants HTTPS (nginx answers its challenge
    on port 80 already), then the site rendered again with it and nginx reloaded (`request_site`).
    The domain; CertError (after recording it on the domain) when certbot failed."""
    from models.admin.domains import get_domain, record_certificate

    domain = get_domain(db, ref)
    if recorded_site(settings) is None:
        if domain.is_https:
            error = CertError(
                "No nginx site was rendered on this host with `lanner nginx site -o PATH`: render it, "
                f"then `lanner domain cert {domain.name}`."
            )
            record_certificate(db, domain.id, expires_at=None, error=str(error))
            raise error
        return domain
    is_wanted = domain.is_https and domain.status == "active"
    if not is_wanted and not certificate_paths(settings, domain.name)[0].exists():
        return domain  # Nothing of it in the site: no HTTPS block to add or take away.
    if is_wanted:
        try:
            expires_at = obtain_certificate(settings, domain.name)
        except CertError as exc:
            record_certificate(db, domain.id, expires_at=None, error=str(exc))
            raise
        domain = record_certificate(db, domain.id, expires_at=expires_at)
    request_site(settings)
    return domain


def renew_due(db: Database, settings: Settings, *, force: bool = False) -> list[str]:
    """The daily renewal (workers/runtime/tasks.py): only on the host whose nginx serves the domains."""
    from models.admin.domains import list_domains

    if recorded_site(settings) is None or not any(d.is_https for d in list_domains(db)):
        return []
    return renew_certificates(settings, force=force)
