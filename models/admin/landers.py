"""Landing pages (landers): create, change, archive and delete them, list them with the streams that
send to them, and unpack a local lander's zip. The library the CLI, the admin API and the panel call.

A lander is remote (`url`: a URL template on the buyer's own host, with the click's macros and
`{offer}`, the link back to the tracker that picks the offer) or local (a zip unpacked under
DATA_DIR/landers/<folder>/ and served at /landers/<folder>/ as static files only: nginx's `location
/landers/`, or routes/landers.py when there is no nginx; nothing in it is ever executed).

A zip is checked and unpacked into a staging directory beside DATA_DIR/landers (same filesystem),
then renamed into place under a new folder `<id>-<token>` in the transaction that points the lander at
it; the folder it had is removed after the commit. A refused zip leaves nothing on disk, and a visitor
never sees a half-written lander: the old folder serves until the row names the new one.

Every change runs in one transaction that writes its audit entry (entity `lander`) and bumps
`config_version`, so workers reload the landers their streams send to.
"""

from __future__ import annotations

import io
import logging
import re
import secrets
import shutil
import stat
import time
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from peewee import Database, IntegrityError

from models.accounts.access import visible_campaign_ids
from models.accounts.audit import record_change
from models.accounts.principal import CLI, Principal
from models.admin.errors import AdminConflict, AdminError, AdminNotFound
from models.admin.rows import get_lander
from models.routing.macros import MacroError, saved_url
from models.store.database import write_tx
from models.store.meta import MetaStore
from models.tables.campaign import Campaign, Stream
from models.tables.lander import Lander, StreamLander

logger = logging.getLogger(__name__)

LANDER_STATUSES = ("active", "archived")
LANDER_KINDS = ("remote", "local")
MAX_NAME = 100
MAX_URL = 2000
MAX_NOTES = 2000
MAX_PATH = 400  # A file's path inside the lander: what a static route serves (Falcon's bound is 512).
# Macros a lander's URL may use besides the click's: the link to the offer through the tracker.
LANDER_MACROS = frozenset({"offer"})
FOLDER = re.compile(r"^[0-9]+-[0-9a-f]{16}$")
DRIVE = re.compile(r"^[A-Za-z]:")
# What zip tools add beside the lander's files: never part of it.
JUNK = re.compile(r"(^|/)(__MACOSX/|\.DS_Store$|Thumbs\.db$)")
CHUNK = 64 * 1024


@dataclass(frozen=True)
class LanderFiles:
    """Where local landers live and the bounds a zip is unpacked within (settings: LANNER_LANDER_*)."""

    root: Path
    max_bytes: int = 20 * 1024 * 1024
    max_unpacked_bytes: int = 100 * 1024 * 1024
    max_files: int = 2000

    @classmethod
    def from_settings(cls, settings) -> LanderFiles:
        return cls(
            settings.landers_dir,
            settings.lander_max_bytes,
            settings.lander_max_unpacked_bytes,
            settings.lander_max_files,
        )

    @property
    def staging(self) -> Path:
        """Beside the served directory (so a rename is atomic), never under it (so never served)."""
        return self.root.with_name(self.root.name + "-staging")

    def folder_path(self, folder: str) -> Path:
        if not FOLDER.match(folder):
            raise ValueError(f"{folder!r} is not a lander folder name")
        return self.root / folder

    def too_big(self, size: int) -> AdminError:
        return AdminError(
            f"The zip is {size:,} bytes; a lander's zip may be at most {self.max_bytes:,} bytes "
            "(LANNER_LANDER_MAX_BYTES)."
        )

    def too_many(self) -> AdminError:
        return AdminError(
            f"The zip holds more than {self.max_files:,} files, a lander's most (LANNER_LANDER_MAX_FILES)."
        )

    def unpack(self, data: bytes) -> Path:
        """Check the zip and unpack it into a new staging directory (its path); AdminError, with
        nothing left on disk, for a zip that cannot be a lander."""
        if len(data) > self.max_bytes:
            raise self.too_big(len(data))
        self.staging.mkdir(parents=True, exist_ok=True)
        target = self.staging / secrets.token_hex(8)
        target.mkdir()
        try:
            self._unpack(data, target)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
        return target

    def _unpack(self, data: bytes, target: Path) -> None:
        # PERF: zipfile reads every central-directory entry into an object before any can be counted; a
        # 20 MB zip of empty entries would be ~400,000 of them. Each entry starts with this signature, so
        # its count bounds theirs (generously: folders are entries too, and the bytes may repeat it).
        if data.count(b"PK\x01\x02") > 4 * self.max_files + 64:
            raise self.too_many()
        try:
            archive = zipfile.ZipFile(io.BytesIO(data))
        except zipfile.BadZipFile:
            raise AdminError("The file is not a zip archive.") from None
        except UnicodeDecodeError:
            raise AdminError("A file name in the zip is not valid UTF-8.") from None
        except (ValueError, NotImplementedError, OSError, EOFError):
            raise AdminError("The zip archive is damaged.") from None
        with archive:
            members = [
                (path, info) for info in archive.infolist() if (path := _member_path(info)) is not None
            ]
            files = [(path, info) for path, info in members if not info.is_dir()]
            if len(files) > self.max_files:
                raise self.too_many()
            prefix = _root_prefix([path for path, _ in files])
            written = 0
            for path, info in files:
                relative = path[len(prefix) :]
                destination = target.joinpath(*relative.split("/"))
                try:
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    with archive.open(info) as source, open(destination, "xb") as out:
                        while chunk := source.read(CHUNK):
                            written += len(chunk)  # What is written, not what the header claims.
                            if written > self.max_unpacked_bytes:
                                raise AdminError(
                                    "The zip unpacks to more than "
                                    f"{self.max_unpacked_bytes:,} bytes (LANNER_LANDER_MAX_UNPACKED_BYTES)."
                                )
                            out.write(chunk)
                except AdminError:
                    raise
                except (FileExistsError, NotADirectoryError):
                    raise AdminError(
                        f"The zip names {relative[:80]!r} twice, or as a file and a folder."
                    ) from None
                except RuntimeError:  # zipfile's "password required".
                    raise AdminError("The zip is encrypted; upload one without a password.") from None
                except NotImplementedError:
                    raise AdminError("The zip uses a compression method Lanner cannot unpack.") from None
                except (zipfile.BadZipFile, EOFError, ValueError, OSError) as exc:
                    logger.info("lander zip refused at %r: %s", relative[:80], exc)
                    raise AdminError(f"The zip archive is damaged (at {relative[:80]!r}).") from None
                destination.chmod(0o644)  # Static files for nginx's user, whatever the umask.
        for directory in [target, *(p for p in target.rglob("*") if p.is_dir())]:
            directory.chmod(0o755)

    def place(self, staged: Path, lander_id: int) -> str:
        """Rename an unpacked lander into the served directory under a new folder name (returned)."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        folder = f"{lander_id}-{secrets.token_hex(8)}"
        staged.rename(self.root / folder)
        return folder

    def remove(self, folder: str) -> None:
        """Remove a folder no lander points at any more (a missing one is fine)."""
        if folder:
            shutil.rmtree(self.folder_path(folder), ignore_errors=True)


def _member_path(info: zipfile.ZipInfo) -> str | None:
    """The member's path inside the lander (`/`-separated), None for what zip tools add beside it;
    AdminError for a name that is not valid UTF-8, could land outside the folder, or is not a plain
    file or folder."""
    raw = info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437")
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise AdminError("A file name in the zip is not valid UTF-8.") from None
    shown = name[:80]
    if "\\" in name or DRIVE.match(name) or name.startswith("/"):
        raise AdminError(f"The zip's path {shown!r} is absolute; every path must be inside the lander.")
    if any(ord(char) < 32 or ord(char) == 127 for char in name):
        raise AdminError(f"The zip's path {shown!r} holds a control character.")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise AdminError(f"The zip's path {shown!r} climbs out of the lander with '..'.")
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise AdminError(f"The zip's entry {shown!r} is a symbolic link; a lander holds plain files only.")
    if stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
        raise AdminError(f"The zip's entry {shown!r} is not a plain file or folder.")
    path = "/".join(parts)
    if not path or JUNK.search(path + ("/" if info.is_dir() else "")):
        return None
    if len(path) > MAX_PATH:
        raise AdminError(f"The zip's path {shown!r}... is longer than {MAX_PATH} characters.")
    return path


def _root_prefix(paths: list[str]) -> str:
    """'' when index.html is at the zip's root, 'top/' when it is in the zip's one top-level folder
    (then stripped); AdminError otherwise."""
    if "index.html" in paths:
        return ""
    tops = {path.split("/", 1)[0] for path in paths}
    if len(tops) == 1 and all("/" in path for path in paths):
        top = tops.pop()
        if f"{top}/index.html" in paths:
            return top + "/"
    raise AdminError("The zip has no index.html at its root (or in its one top-level folder).")


# -- the landers ----------------------------------------------------------------------------------


def _now() -> int:
    return int(time.time() * 1000)


def lander_path(lander: Lander) -> str:
    """Where a local lander is served from the tracker's host; '' for a remote one."""
    return f"/landers/{lander.folder}/" if lander.kind == "local" and lander.folder else ""


def lander_fields(lander: Lander, uses: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A lander as the CLI prints it and the admin API answers it (`uses`: the streams sending to it)."""
    fields = {
        "id": lander.id,
        "name": lander.name,
        "kind": lander.kind,
        "status": lander.status,
        "url": lander.url,
        "path": lander_path(lander),
        "notes": lander.notes,
        "owner_id": lander.owner_id,
    }
    if uses is not None:
        fields["streams"] = len(uses)
        fields["uses"] = uses
    return fields


def _audit_fields(lander: Lander) -> dict[str, Any]:
    return dict(lander.__data__)


def list_landers(db: Database, *, include_archived: bool = False) -> list[Lander]:
    query = Lander.select().order_by(Lander.id)
    if not include_archived:
        query = query.where(Lander.status != "archived")
    return list(query)


def lander_uses(db: Database, campaign_ids: set[int] | None = None) -> dict[int, list[dict[str, Any]]]:
    """Lander id -> the streams (not removed) sending to it: campaign, stream and weight; only the
    streams of `campaign_ids` (None: of every campaign). A lander is shared by campaigns people may not
    all see: a user's list passes the campaigns they see (models/accounts/access.py), never None."""
    uses: dict[int, list[dict[str, Any]]] = {}
    if campaign_ids is not None and not campaign_ids:
        return uses
    where = (StreamLander.status == "active") & (Stream.status != "deleted")
    if campaign_ids is not None:
        where &= Campaign.id.in_(sorted(campaign_ids))
    query = (
        StreamLander.select(StreamLander, Stream, Campaign)
        .join(Stream)
        .join(Campaign)
        .where(where)
        .order_by(Campaign.id, Stream.id)
    )
    for link in query:
        stream = link.stream
        uses.setdefault(link.lander_id, []).append(
            {
                "campaign_id": stream.campaign.id,
                "campaign": stream.campaign.alias,
                "stream_id": stream.id,
                "stream": stream.name,
                "weight": link.weight,
            }
        )
    return uses


def _check_name(name: str) -> str:
    name = name.strip()
    if not 0 < len(name) <= MAX_NAME:
        raise AdminError(f"A lander's name is 1 to {MAX_NAME} characters.")
    if name.isascii() and name.isdigit():
        raise AdminError("A lander's name cannot be a number alone: it would read as another lander's id.")
    return name


def _check_url(url: str) -> str:
    """A remote lander's URL as saved: http or https, at most MAX_URL characters, the click's macros,
    the traffic sources' parameter names and {offer}."""
    from models.admin.sources import source_macro_names

    url = url.strip()
    if not url:
        raise AdminError("A remote lander needs its URL (https://...).")
    if len(url) > MAX_URL:
        raise AdminError(f"A lander's URL is at most {MAX_URL} characters.")
    if not url.lower().startswith(("http://", "https://")):
        raise AdminError("A lander's URL must start with http:// or https://.")
    try:
        return saved_url(url, source_macro_names() | LANDER_MACROS)
    except MacroError as exc:
        raise AdminError(str(exc).replace("Offer URL", "The lander's URL")) from None


def _check_notes(notes: str) -> str:
    if len(notes) > MAX_NOTES:
        raise AdminError(f"A lander's notes are at most {MAX_NOTES} characters.")
    return notes


def create_lander(
    db: Database,
    name: str,
    *,
    url: str | None = None,
    zip_data: bytes | None = None,
    files: LanderFiles | None = None,
    notes: str = "",
    actor: Principal = CLI,
) -> Lander:
    """A remote lander (`url`) or a local one (`zip_data`, unpacked by `files`; neither: a local one
    waiting for its zip, which no visitor is sent to until it has one)."""
    if url is not None and zip_data is not None:
        raise AdminError("A lander is either remote (a URL) or local (a zip), not both.")
    fields = {"name": _check_name(name), "notes": _check_notes(notes or ""), "owner_id": actor.user_id}
    if url is not None:
        fields["url"] = _check_url(url)
    staged = _staged(files, zip_data)
    placed = ""
    try:
        with write_tx(db):
            try:
                lander = Lander.create(kind="remote" if url is not None else "local", **fields)
            except IntegrityError:
                raise AdminConflict(f"A lander named {fields['name']!r} already exists.") from None
            if staged is not None and files is not None:  # Staged only with files.
                lander.folder = placed = files.place(staged, lander.id)
                lander.save()
            record_change(db, actor, "lander", lander.id, "create", None, _audit_fields(lander))
            MetaStore(db.connection()).bump_config_version()
    except BaseException:
        _discard(files, staged, placed)
        raise
    return lander


def _staged(files: LanderFiles | None, zip_data: bytes | None) -> Path | None:
    if zip_data is None:
        return None
    if files is None:
        raise AdminError("This caller cannot take a zip.")
    return files.unpack(zip_data)


def _discard(files: LanderFiles | None, staged: Path | None, placed: str) -> None:
    """Remove what a change that did not commit had unpacked or placed."""
    if files is None:
        return
    if placed:
        files.remove(placed)
    elif staged is not None:
        shutil.rmtree(staged, ignore_errors=True)


def update_lander(
    db: Database,
    ref: str | int,
    *,
    name: str | None = None,
    url: str | None = None,
    zip_data: bytes | None = None,
    files: LanderFiles | None = None,
    notes: str | None = None,
    status: str | None = None,
    actor: Principal = CLI,
) -> Lander:
    """Change a lander; None leaves a field as it is. A URL makes it remote, a zip local (a new
    folder, swapped in by the commit; the old folder is removed after it)."""
    if url is not None and zip_data is not None:
        raise AdminError("Give a lander a URL or a zip, not both.")
    if status is not None and status not in LANDER_STATUSES:
        raise AdminError(f"A lander's status is one of {', '.join(LANDER_STATUSES)}, not {status!r}.")
    checked_url = _check_url(url) if url is not None else None
    staged = _staged(files, zip_data)
    placed, old_folder = "", ""
    try:
        with write_tx(db):
            lander = get_lander(db, ref)
            before = _audit_fields(lander)
            if name is not None:
                lander.name = _check_name(name)
            if notes is not None:
                lander.notes = _check_notes(notes)
            if status is not None:
                lander.status = status
            if checked_url is not None:
                old_folder = lander.folder
                lander.kind, lander.url, lander.folder = "remote", checked_url, ""
            if staged is not None and files is not None:  # Staged only with files.
                old_folder = lander.folder
                lander.kind, lander.url = "local", ""
                lander.folder = placed = files.place(staged, lander.id)
            lander.updated_at = _now()
            try:
                lander.save()
            except IntegrityError:
                raise AdminConflict(f"A lander named {lander.name!r} already exists.") from None
            action = "archive" if status == "archived" != before["status"] else "update"
            record_change(db, actor, "lander", lander.id, action, before, _audit_fields(lander))
            MetaStore(db.connection()).bump_config_version()
    except BaseException:
        _discard(files, staged, placed)
        raise
    if old_folder and files is not None:
        files.remove(old_folder)
    return lander


def archive_lander(db: Database, ref: str | int, *, actor: Principal = CLI) -> Lander:
    return update_lander(db, ref, status="archived", actor=actor)


def delete_lander(
    db: Database, ref: str | int, *, files: LanderFiles | None = None, actor: Principal = CLI
) -> Lander:
    """Delete a lander no stream sends to (its files too); refused, naming them, while streams do.
    Clicks that went through it keep its id (reports name it as deleted)."""
    with write_tx(db):
        lander = get_lander(db, ref)
        uses = lander_uses(db).get(lander.id, [])
        if uses:
            # Only the campaigns the actor sees are named: the others' names are not theirs to read.
            visible = visible_campaign_ids(db, actor)
            shown = [u for u in uses if visible is None or u["campaign_id"] in visible]
            named = [f"campaign {u['campaign']} stream {u['stream_id']}" for u in shown[:5]]
            if len(shown) > 5:
                named.append(f"{len(shown) - 5} more")
            if len(uses) > len(shown):
                hidden = len(uses) - len(shown)
                named.append(f"{hidden} stream{'s' if hidden > 1 else ''} of campaigns not shared with you")
            listed = ", ".join(named[:-1]) + " and " + named[-1] if len(named) > 1 else named[0]
            raise AdminConflict(
                f"Lander {lander.name!r} is in use by {listed}; take it off those streams first "
                "(or archive it)."
            )
        before = _audit_fields(lander)
        StreamLander.delete().where(StreamLander.lander == lander).execute()  # Removed streams' links.
        lander.delete_instance()
        record_change(db, actor, "lander", lander.id, "delete", before, None)
        MetaStore(db.connection()).bump_config_version()
    if files is not None and lander.folder:
        files.remove(lander.folder)
    return lander


# -- the landers a stream sends to ---------------------------------------------------------------


def stream_landers(stream_id: int) -> list[tuple[int, int]]:
    """A stream's active landers: [(lander_id, weight)], as added."""
    return [
        (link.lander_id, link.weight)
        for link in StreamLander.select()
        .where((StreamLander.stream == stream_id) & (StreamLander.status == "active"))
        .order_by(StreamLander.id)
    ]


def stream_lander_rows(db: Database, stream_id: int) -> list[dict[str, Any]]:
    """A stream's landers as the API answers them: [{lander_id, name, weight}]."""
    names = {lander.id: lander.name for lander in Lander.select(Lander.id, Lander.name)}
    return [
        {"lander_id": lander_id, "name": names.get(lander_id, f"#{lander_id}"), "weight": weight}
        for lander_id, weight in stream_landers(stream_id)
    ]


def lander_weights(db: Database, values: Iterable[str]) -> list[tuple[int, int]]:
    """`NAME` or `NAME:WEIGHT` values (`--lander`) as [(lander_id, weight)]; a weight defaults to 100."""
    landers = []
    for value in values:
        name, _, weight = value.rpartition(":")
        # A lander named `B:2` is that lander at weight 100; `B:2:5` is it at weight 5.
        is_weight = name and weight.isascii() and weight.isdigit()
        if not is_weight or Lander.get_or_none(Lander.name == value):
            name, weight = value, "100"
        landers.append((get_lander(db, name).id, int(weight)))
    return landers


def lander_id_for(db: Database, ref: str | int) -> int:
    """The id of a lander a stream is given; only an active one may be picked."""
    lander = get_lander(db, ref)
    if lander.status != "active":
        raise AdminError(f"Lander {lander.name!r} is archived; a stream cannot send to it.")
    return lander.id


def set_stream_landers(stream: Stream, landers: list[tuple[int, int]], *, usable: set[int] | None) -> None:
    """Make the stream's active landers exactly `landers` [(lander_id, weight)] (in the caller's
    transaction). Links are updated in place, never deleted and re-inserted, so their ids stay.
    `usable`: the landers the actor may send to (None: any)."""
    wanted: dict[int, int] = {}
    current = {link.lander_id: link for link in StreamLander.select().where(StreamLander.stream == stream)}
    for lander_id, weight in landers:
        lander = Lander.get_or_none(Lander.id == lander_id)
        if lander is None or (usable is not None and lander_id not in usable):
            raise AdminNotFound(f"There is no lander {lander_id}.")
        is_linked = lander_id in current and current[lander_id].status == "active"
        if lander.status != "active" and not is_linked:
            raise AdminError(f"Lander {lander.name!r} is archived; a stream cannot send to it.")
        if not 0 <= weight < 2**31:
            raise AdminError("A lander weight is a whole number from 0.")
        wanted[lander_id] = weight
    for lander_id, link in current.items():
        if lander_id in wanted:
            link.weight, link.status = wanted.pop(lander_id), "active"
        else:
            link.status = "disabled"
        link.save()
    for lander_id, weight in wanted.items():
        StreamLander.create(stream=stream, lander=lander_id, weight=weight)
