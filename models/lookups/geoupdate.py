"""`lanner geo update`: fetch a current geo database and swap it in while the tracker serves.

Two sources, as the user configures (LANNER_GEO_SOURCE):

- MaxMind: `{base}/{edition}/download?suffix=tar.gz` with HTTP basic auth (account id : licence key), a
  tar.gz holding `{edition}_{YYYYMMDD}/{edition}.mmdb`, and its SHA-256 at `...?suffix=tar.gz.sha256`.
  MaxMind answers with a redirect to a presigned storage URL: the credentials are not sent there.
- DB-IP's free lite files: `{base}/{edition}-{YYYY-MM}.mmdb.gz`, this month's, else last month's (the new
  month's file appears on its first days). DB-IP publishes no checksum.

Each file is downloaded (bounded in size) to a temporary file next to the one it replaces, checked (the
checksum where offered; it opens as an `.mmdb`; its database type is the edition's; it is not older than
the file in use; well-known addresses are found in it), fsynced and put in place with `os.replace`. The web
workers switch to it within a second (GeoSource.refresh); a failure leaves the file in use untouched.
"""

from __future__ import annotations

import base64
import datetime
import fcntl
import glob
import gzip
import hashlib
import http.client
import logging
import os
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from models.errors import LannerError
from models.lookups.geo import UNKNOWN_GEO, UNKNOWN_NETWORK, GeoDatabase, GeoDatabaseError

logger = logging.getLogger(__name__)

MAXMIND_BASE_URL = "https://download.maxmind.com/geoip/databases"
DBIP_BASE_URL = "https://download.db-ip.com/free"
MAX_DOWNLOAD_BYTES = 512 * 1024 * 1024  # dbip-city-lite, the largest, is ~130 MB compressed.
MAX_DATABASE_BYTES = 1024 * 1024 * 1024
UPDATE_AFTER_DAYS = 30  # `lanner worker` fetches a file once its data is this old.
STALE_AFTER_DAYS = 60  # `lanner status` warns past this.
TIMEOUT_SECONDS = 60.0
_CHUNK = 1024 * 1024

# Addresses every real location or ASN database knows (Google, Cloudflare, Quad9 and OpenDNS resolvers):
# a file that finds fewer than half of them is not one to route on.
SANITY_IPS = ("8.8.8.8", "1.1.1.1", "9.9.9.9", "208.67.222.222", "2001:4860:4860::8888", "2606:4700::1111")

Progress = Callable[[int, int | None], None]  # (bytes so far, total bytes or None)


class GeoUpdateError(LannerError):
    """A geo update that did not happen; the message is one sentence, the file in use is untouched."""


@dataclass(frozen=True)
class UpdateResult:
    edition: str
    path: Path
    database_type: str
    built_at: datetime.datetime
    is_replaced: bool  # False: the file in use was already as recent


@dataclass(frozen=True)
class Download:
    url: str
    checksum_url: str | None
    packing: str  # "tar.gz" or "mmdb.gz"


def downloads(source: str, edition: str, base_url: str, today: datetime.date) -> list[Download]:
    """Where `edition` is fetched from, first choice first."""
    if source == "maxmind":
        url = f"{base_url or MAXMIND_BASE_URL}/{urllib.parse.quote(edition)}/download?suffix=tar.gz"
        return [Download(url, url + ".sha256", "tar.gz")]
    if source == "dbip":
        last_month = today.replace(day=1) - datetime.timedelta(days=1)
        return [
            Download(f"{base_url or DBIP_BASE_URL}/{edition}-{day:%Y-%m}.mmdb.gz", None, "mmdb.gz")
            for day in (today, last_month)
        ]
    raise GeoUpdateError("LANNER_GEO_SOURCE is not set: name maxmind or dbip to fetch geo data.")


class _NoCredentialsElsewhere(urllib.request.HTTPRedirectHandler):
    """Follow redirects, but send the credentials only to the host they were meant for: MaxMind redirects
    to presigned storage URLs, which must not see (and refuse) an Authorization header."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001 (urllib's signature)
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if (
            new is not None
            and urllib.parse.urlsplit(newurl).netloc != urllib.parse.urlsplit(req.full_url).netloc
        ):
            new.remove_header("Authorization")
        return new


_opener = urllib.request.build_opener(_NoCredentialsElsewhere)


def _open(url: str, credentials: tuple[str, str] | None):
    request = urllib.request.Request(url, headers={"User-Agent": "lanner-geo-update"})
    if credentials is not None:
        token = base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    return _opener.open(request, timeout=TIMEOUT_SECONDS)


def _where(url: str) -> str:
    """The URL without its query: never a credential in a message."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def _fetch(url: str, out: IO[bytes], credentials, progress: Progress | None) -> str:
    """Copy `url` into `out` (at most MAX_DOWNLOAD_BYTES); return the SHA-256 of what came."""
    digest = hashlib.sha256()
    with _open(url, credentials) as response:
        length = response.headers.get("Content-Length")
        total = int(length) if length and length.isdigit() else None
        if total is not None and total > MAX_DOWNLOAD_BYTES:
            raise GeoUpdateError(f"{_where(url)} is {total:,} bytes, more than a geo database can be.")
        too_much = f"{_where(url)} sent more than {MAX_DOWNLOAD_BYTES:,} bytes."
        for done, chunk in _copy_bounded(response, out, MAX_DOWNLOAD_BYTES, too_much):
            digest.update(chunk)
            if progress is not None:
                progress(done, total)
    return digest.hexdigest()


def _fetch_text(url: str, credentials) -> str:
    with _open(url, credentials) as response:
        return response.read(4096).decode("ascii", "replace")


def _copy_bounded(
    source: IO[bytes] | gzip.GzipFile, out: IO[bytes], limit: int, too_much: str
) -> Iterator[tuple[int, bytes]]:
    """Copy `source` into `out` chunk by chunk, yielding (bytes so far, chunk); GeoUpdateError(`too_much`)
    as soon as more than `limit` bytes came."""
    copied = 0
    while chunk := source.read(_CHUNK):
        copied += len(chunk)
        if copied > limit:
            raise GeoUpdateError(too_much)
        out.write(chunk)
        yield copied, chunk


def _unpack_bounded(source: IO[bytes] | gzip.GzipFile, out: IO[bytes]) -> None:
    too_much = f"The unpacked database is larger than {MAX_DATABASE_BYTES:,} bytes."
    for _ in _copy_bounded(source, out, MAX_DATABASE_BYTES, too_much):
        pass


def _unpack(archive: Path, packing: str, edition: str, out: IO[bytes]) -> None:
    try:
        if packing == "mmdb.gz":
            with gzip.open(archive, "rb") as source:
                _unpack_bounded(source, out)
            return
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                # {edition}_{YYYYMMDD}/{edition}.mmdb; read as a stream, never extracted onto the disk.
                if member.isfile() and member.name.rsplit("/", 1)[-1] == f"{edition}.mmdb":
                    packed = tar.extractfile(member)
                    assert packed is not None
                    _unpack_bounded(packed, out)
                    return
        raise GeoUpdateError(f"The {edition} download holds no {edition}.mmdb file.")
    except (OSError, EOFError, tarfile.TarError, gzip.BadGzipFile) as exc:
        if isinstance(exc, GeoUpdateError):
            raise
        raise GeoUpdateError(f"The {edition} download is not a valid {packing} file ({exc}).") from None


def check_database(path: Path, edition: str, current: Path) -> GeoDatabase:
    """Open the new file and check it is the edition, no older than `current`, and answers; raise
    GeoUpdateError. The caller closes the returned database."""
    try:
        database = GeoDatabase(path)
    except GeoDatabaseError:
        raise GeoUpdateError(f"The {edition} download is not a valid MaxMind DB (.mmdb) file.") from None
    try:
        # MaxMind's type is the edition (GeoLite2-City); DB-IP's starts with it (DBIP-City-Lite).
        if not database.database_type.lower().startswith(edition.lower()):
            raise GeoUpdateError(
                f"The {edition} download is a {database.database_type} database, not {edition}."
            )
        in_use = _open_quietly(current)
        if in_use is not None:
            try:
                if in_use.database_type == database.database_type and database.built_at < in_use.built_at:
                    raise GeoUpdateError(
                        f"The {edition} download was built {database.built_at.date()}, before the file in "
                        f"use ({in_use.built_at.date()}); keeping the newer one."
                    )
            finally:
                in_use.close()
        found = sum(1 for ip in SANITY_IPS if _answers(database, ip))
        if found * 2 < len(SANITY_IPS):
            raise GeoUpdateError(
                f"The {edition} download knows only {found} of {len(SANITY_IPS)} well-known addresses."
            )
    except BaseException:
        database.close()
        raise
    return database


def _answers(database: GeoDatabase, ip: str) -> bool:
    return database.lookup(ip) is not UNKNOWN_GEO or database.network(ip) is not UNKNOWN_NETWORK


def _open_quietly(path: Path) -> GeoDatabase | None:
    try:
        return GeoDatabase(path)
    except (OSError, GeoDatabaseError):
        return None


def _is_current(new: GeoDatabase, path: Path) -> bool:
    in_use = _open_quietly(path)
    if in_use is None:
        return False
    try:
        return in_use.database_type == new.database_type and in_use.built_at == new.built_at
    finally:
        in_use.close()


def update_edition(
    source: str,
    edition: str,
    dest: Path,
    *,
    account_id: str = "",
    license_key: str = "",
    base_url: str = "",
    today: datetime.date | None = None,
    progress: Progress | None = None,
) -> UpdateResult:
    """Fetch `edition` from `source`, check it, and put it at `dest` atomically; raise GeoUpdateError."""
    credentials = None
    if source == "maxmind":
        if not (account_id and license_key):
            raise GeoUpdateError(
                "MaxMind downloads need LANNER_MAXMIND_ACCOUNT_ID and LANNER_MAXMIND_LICENSE_KEY."
            )
        credentials = (account_id, license_key)
    today = today or datetime.datetime.now(datetime.UTC).date()
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temp_files(dest)
    archive = _temp_file(dest, ".download")
    unpacked = _temp_file(dest, ".new")
    try:
        packing = _download_first(
            downloads(source, edition, base_url, today), archive, credentials, edition, progress
        )
        with open(unpacked, "wb") as out:
            _unpack(archive, packing, edition, out)
            out.flush()
            os.fsync(out.fileno())
        archive.unlink()
        database = check_database(unpacked, edition, dest)
        try:
            if _is_current(database, dest):
                return UpdateResult(edition, dest, database.database_type, database.built_at, False)
            os.chmod(unpacked, 0o644)  # mkstemp makes it 0600; the workers may run as another user.
            os.replace(unpacked, dest)
            _fsync_directory(dest.parent)
            logger.info("geo data %s replaced: %s", dest, database.description)
            return UpdateResult(edition, dest, database.database_type, database.built_at, True)
        finally:
            database.close()
    finally:
        archive.unlink(missing_ok=True)
        unpacked.unlink(missing_ok=True)


def _download_first(
    choices: list[Download], archive: Path, credentials, edition: str, progress: Progress | None
) -> str:
    """Fetch the first download that exists into `archive`, checked against its SHA-256; its packing."""
    for index, choice in enumerate(choices):
        try:
            with open(archive, "wb") as out:
                digest = _fetch(choice.url, out, credentials, progress)
            expected = ""
            if choice.checksum_url:
                # MaxMind's form: "<hex>  GeoLite2-City_20261201.tar.gz".
                expected = next(iter(_fetch_text(choice.checksum_url, credentials).split()), "")
                if not expected:
                    raise GeoUpdateError(f"{_where(choice.checksum_url)} sent no SHA-256 checksum.")
        except urllib.error.HTTPError as exc:
            if exc.code == 404 and index + 1 < len(choices):
                continue  # DB-IP: this month's file is not out yet.
            if exc.code in (401, 403):
                raise GeoUpdateError(
                    f"{_where(exc.url or choice.url)} refused the download (HTTP {exc.code}): "
                    "check the account "
                    "id, the licence key and that the account may download this edition."
                ) from None
            raise GeoUpdateError(f"{_where(exc.url or choice.url)} answered HTTP {exc.code}.") from None
        except (OSError, http.client.HTTPException) as exc:  # URLError is an OSError
            reason = getattr(exc, "reason", None) or exc
            raise GeoUpdateError(
                f"The {edition} download from {_where(choice.url)} failed ({reason})."
            ) from None
        if expected and expected.lower() != digest:
            raise GeoUpdateError(f"The {edition} download does not match its SHA-256 checksum.")
        return choice.packing
    raise GeoUpdateError(f"No {edition} file was found.")  # Not reached: the last choice raises.


def _temp_file(dest: Path, suffix: str) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=suffix, dir=dest.parent)
    os.close(fd)
    return Path(name)


def _remove_stale_temp_files(dest: Path, older_than: float = 3600.0) -> None:
    """Temporary files an update killed midway left behind (each as big as a database)."""
    cutoff = time.time() - older_than
    for suffix in (".download", ".new"):
        for stale in dest.parent.glob(f".{glob.escape(dest.name)}.*{suffix}"):
            try:
                if stale.stat().st_mtime < cutoff:
                    stale.unlink()
            except OSError:
                pass  # Gone already, or not ours to remove.


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def data_age_days(path: Path, now: datetime.datetime | None = None) -> float | None:
    """How old the data in the file at `path` is, in days; None when there is no usable file."""
    database = _open_quietly(path)
    if database is None:
        return None
    try:
        now = now or datetime.datetime.now(datetime.UTC)
        return (now - database.data_date).total_seconds() / 86400
    finally:
        database.close()


def due_editions(settings, now: datetime.datetime | None = None) -> list[str]:
    """The configured editions whose file is missing or UPDATE_AFTER_DAYS old: what the daily task fetches."""
    due = []
    for edition in settings.geo_update_editions:
        age = data_age_days(settings.geo_edition_path(edition), now)
        if age is None or age >= UPDATE_AFTER_DAYS:
            due.append(edition)
    return due


def update_geo_data(settings, editions: list[str] | None = None, progress=None) -> list[UpdateResult]:
    """Fetch `editions` (default: every configured one) as the settings say; stop at the first failure.

    One update at a time per data directory (an flock: `lanner geo update` and the daily task).
    """
    if not settings.geo_source:
        raise GeoUpdateError("LANNER_GEO_SOURCE is not set: name maxmind or dbip to fetch geo data.")
    lock_path = settings.data_dir / "geo" / "update.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise GeoUpdateError("Another geo update is running in this data directory.") from None
        return _update_all(settings, editions, progress)


def _update_all(settings, editions, progress) -> list[UpdateResult]:
    results = []
    for edition in settings.geo_update_editions if editions is None else editions:
        results.append(
            update_edition(
                settings.geo_source,
                edition,
                settings.geo_edition_path(edition),
                account_id=settings.maxmind_account_id,
                license_key=settings.maxmind_license_key,
                base_url=settings.geo_update_url,
                progress=progress(edition) if progress is not None else None,
            )
        )
    return results


__all__ = [
    "STALE_AFTER_DAYS",
    "UPDATE_AFTER_DAYS",
    "GeoUpdateError",
    "UpdateResult",
    "data_age_days",
    "downloads",
    "due_editions",
    "update_edition",
    "update_geo_data",
]
