"""Landers (models/admin/landers.py): the CLI's CRUD on a real database of each backend, local landers'
zips checked and unpacked (every refusal leaving nothing on disk, a re-upload swapped in atomically),
streams sending to landers through the CLI and the admin API (each change moving config_version), and
a real `lanner serve` answering /landers/ with the sandbox headers and 404 for traversal."""

from __future__ import annotations

import io
import json
import random
import stat
import zipfile
from pathlib import Path

import pytest
from conftest import request
from test_api_v1 import admin, call, key  # noqa: F401

# ruff: noqa: F811 (the fixtures imported above, taken as arguments)

PAGE = b"<!doctype html><h1>Summer sale</h1><a href='/lp/click'>Go</a>"


def make_zip(files: dict[str, bytes], *, symlinks: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, target)
    return buffer.getvalue()


def patched(data: bytes, old: bytes, new: bytes) -> bytes:
    """The zip with a name's bytes replaced (same length) in its local and central headers."""
    assert len(old) == len(new) and data.count(old) == 2
    return data.replace(old, new)


def lying_sizes(data: bytes, claimed: int) -> bytes:
    """The one-member zip with its uncompressed size claimed as `claimed` in both headers."""
    raw = bytearray(data)
    local = raw.find(b"PK\x03\x04")
    central = raw.find(b"PK\x01\x02")
    raw[local + 22 : local + 26] = claimed.to_bytes(4, "little")
    raw[central + 24 : central + 28] = claimed.to_bytes(4, "little")
    return bytes(raw)


def on_disk(root: Path) -> list[str]:
    """Every path under DATA_DIR/landers and its staging directory."""
    found = []
    for base in (root, root.with_name(root.name + "-staging")):
        if base.exists():
            found += [str(p.relative_to(base.parent)) for p in base.rglob("*")]
    return sorted(found)


@pytest.fixture
def files(settings, db):
    from models.admin.landers import LanderFiles

    return LanderFiles(settings.landers_dir, max_bytes=200_000, max_unpacked_bytes=1_000_000, max_files=20)


# -- zips ------------------------------------------------------------------------------------------


def test_a_zip_with_index_html_in_one_top_level_folder_is_unpacked_without_that_folder(db, files):
    from models.admin.landers import create_lander, lander_fields

    data = make_zip({"summer/index.html": PAGE, "summer/css/a.css": b"h1{}", "__MACOSX/._index.html": b"x"})
    lander = create_lander(db, "Summer", zip_data=data, files=files)
    folder = files.root / lander.folder
    assert lander.kind == "local" and lander.folder.startswith(f"{lander.id}-")
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) == ["css", "css/a.css", "index.html"]
    assert (folder / "index.html").read_bytes() == PAGE
    assert lander_fields(lander)["path"] == f"/landers/{lander.folder}/"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755  # nginx's user reads them, whatever the umask.
    assert stat.S_IMODE((folder / "index.html").stat().st_mode) == 0o644


BOMB = {"index.html": PAGE, "zeros.bin": b"\0" * 1_500_000}  # ~1.5 KB compressed, past the 1 MB bound.


@pytest.mark.parametrize(
    ("data", "sentence"),
    [
        (b"<html>not a zip</html>", "not a zip archive"),
        (make_zip({"about.html": PAGE, "a.css": b""}), "no index.html"),
        (make_zip({"one/index.html": PAGE, "two/a.css": b""}), "no index.html"),
        (make_zip({"index.html": PAGE, "../evil.html": b"x"}), "climbs out"),
        (make_zip({"index.html": PAGE, "a/../../evil.html": b"x"}), "climbs out"),
        (make_zip({"index.html": PAGE, "/etc/evil.html": b"x"}), "absolute"),
        (make_zip({"index.html": PAGE, "C:/evil.html": b"x"}), "absolute"),
        (make_zip({"index.html": PAGE, "a\\..\\evil.html": b"x"}), "absolute"),
        (make_zip({"index.html": PAGE}, symlinks={"passwd.html": "/etc/passwd"}), "symbolic link"),
        (make_zip(BOMB), "unpacks to more than 1,000,000 bytes"),
        (lying_sizes(make_zip({"index.html": b"\0" * 1_500_000}), 10), "damaged"),
        (make_zip({f"{n}.html": b"" for n in range(20)} | {"index.html": PAGE}), "more than 20 files"),
        (
            make_zip({"index.html": PAGE, "big.bin": random.Random(7).randbytes(250_000)}),
            "at most 200,000 bytes",
        ),
        (patched(make_zip({"index.html": PAGE, "AB.html": b""}), b"AB.html", b"\xff\xfe.html"), "UTF-8"),
        (make_zip({"index.html": PAGE} | {f"d{n}/": b"" for n in range(200)}), "more than 20 files"),
    ],
    ids=[
        "not-zip",
        "no-index",
        "two-folders",
        "dotdot",
        "dotdot-deep",
        "absolute",
        "drive",
        "backslash",
        "symlink",
        "bomb",
        "lying-header",
        "too-many-files",
        "too-big",
        "not-utf8",
        "many-entries",
    ],
)
def test_a_zip_that_cannot_be_a_lander_is_refused_with_one_sentence_and_nothing_on_disk(
    db, files, data, sentence
):
    from models.admin.landers import create_lander, list_landers
    from models.admin.services import AdminError

    with pytest.raises(AdminError, match=sentence):
        create_lander(db, "Bad", zip_data=data, files=files)
    assert list_landers(db, include_archived=True) == []
    assert [p for p in on_disk(files.root) if not p.endswith("-staging")] == []
    assert not (files.root.parent / "evil.html").exists()


def test_a_new_zip_is_swapped_in_under_a_new_folder_and_the_old_one_removed_after(db, files):
    from models.admin.landers import create_lander, get_lander, update_lander
    from models.admin.services import AdminError

    first = create_lander(db, "Summer", zip_data=make_zip({"index.html": b"one"}), files=files)
    old = files.root / first.folder
    # A refused zip changes nothing: the old folder still serves.
    with pytest.raises(AdminError, match="no index.html"):
        update_lander(db, "Summer", zip_data=make_zip({"a.html": b"x"}), files=files)
    assert get_lander(db, "Summer").folder == first.folder and (old / "index.html").read_bytes() == b"one"
    second = update_lander(db, "Summer", zip_data=make_zip({"index.html": b"two"}), files=files)
    assert second.folder != first.folder and not old.exists()
    assert (files.root / second.folder / "index.html").read_bytes() == b"two"
    assert [p.name for p in files.root.iterdir()] == [second.folder]
    # A URL makes it remote, and its files go.
    third = update_lander(db, "Summer", url="https://lp.example/?s={subid}", files=files)
    assert (third.kind, third.folder) == ("remote", "") and list(files.root.iterdir()) == []


# -- the CLI ---------------------------------------------------------------------------------------


def config_version(db) -> str:
    from models.store.meta import MetaStore

    return MetaStore(db.connection()).config_version()


def test_landers_are_created_listed_shown_updated_archived_and_deleted_from_the_cli(
    lanner, db, settings, tmp_path
):
    archive = tmp_path / "summer.zip"
    archive.write_bytes(make_zip({"summer/index.html": PAGE}))
    created = lanner("lander", "create", "Remote", "--url", "https://lp.example/?s={subid}&o={offer}")
    assert "created: https://lp.example/?s={subid}&o={offer}" in created.stdout
    assert "/landers/2-" in lanner("lander", "create", "Local", "--zip", str(archive)).stdout
    rows = json.loads(lanner("lander", "list", "--json").stdout)
    assert [(r["name"], r["kind"], r["streams"]) for r in rows] == [
        ("Remote", "remote", 0),
        ("Local", "local", 0),
    ]
    assert (
        lanner("lander", "list", "--csv").stdout.splitlines()[0]
        == "id,name,kind,status,streams,url,path,notes"
    )
    folder = rows[1]["path"].split("/")[2]
    assert (settings.landers_dir / folder / "index.html").read_bytes() == PAGE
    # Refusals are one sentence.
    for args, sentence in (
        (("lander", "create", "Remote", "--url", "https://x.example/"), "already exists"),
        (("lander", "create", "Bad", "--url", "ftp://x.example/"), "http:// or https://"),
        (("lander", "create", "Bad", "--url", "https://x.example/?a={nope}"), "nope"),
        (("lander", "create", "Bad", "--url", "https://x.example/" + "a" * 2001), "at most 2000"),
        (("lander", "create", "Bad"), "Give --url"),
        (("lander", "create", "Bad", "--zip", str(tmp_path / "none.zip")), "Cannot read"),
        (("lander", "show", "Nobody"), "There is no lander 'Nobody'"),
    ):
        failed = lanner(*args, check=False)
        assert failed.returncode != 0 and sentence in failed.stderr, (args, failed.stderr)
    lanner("lander", "update", "Remote", "--name", "Remote2", "--notes", "from the buyer's host")
    shown = json.loads(lanner("lander", "show", "Remote2", "--json").stdout)
    assert (shown["notes"], shown["uses"]) == ("from the buyer's host", [])
    lanner("lander", "archive", "Remote2")
    assert [r["name"] for r in json.loads(lanner("lander", "list", "--json").stdout)] == ["Local"]
    assert len(json.loads(lanner("lander", "list", "--all", "--json").stdout)) == 2
    lanner("lander", "delete", "Local")
    assert not (settings.landers_dir / folder).exists()
    assert "lander" in lanner("audit", "list").stdout


def test_streams_send_to_weighted_landers_from_the_cli_and_delete_is_refused_while_they_do(lanner, db):
    lanner("campaign", "create", "Summer", "--alias", "summer", "--offer-url", "https://o.example/?c={subid}")
    lanner("lander", "create", "A", "--url", "https://a.example/?s={subid}")
    lanner("lander", "create", "B:2", "--url", "https://b.example/?s={subid}")
    before = config_version(db)
    lanner("stream", "update", "1", "--lander", "A:30", "--lander", "B:2")
    assert config_version(db) != before
    (row,) = json.loads(lanner("stream", "list", "summer", "--json").stdout)
    assert row["landers"] == "A:30 B:2:100"  # A name with a colon: NAME alone, weight 100.
    assert "landers: A:30 B:2:100" in lanner("stream", "show", "1").stdout
    failed = lanner("lander", "delete", "A", check=False)
    assert "in use by campaign summer stream 1" in failed.stderr
    added = lanner("stream", "add", "summer", "--offer", "1", "--lander", "B:2:5").stdout.strip()
    rows = json.loads(lanner("stream", "list", "summer", "--json").stdout)
    assert [r["landers"] for r in rows] == ["A:30 B:2:100", "B:2:5"]
    lanner("campaign", "clone", "summer")  # The copy's streams send to the same landers.
    copied = json.loads(lanner("stream", "list", "summer-copy", "--json").stdout)
    assert [r["landers"] for r in copied] == ["A:30 B:2:100", "B:2:5"]
    lanner("campaign", "archive", "summer-copy")
    for stream in copied:
        lanner("stream", "update", str(stream["id"]), "--no-landers")
    moved = config_version(db)
    lanner("stream", "update", "1", "--no-landers")
    assert config_version(db) != moved
    assert json.loads(lanner("stream", "list", "summer", "--json").stdout)[0]["landers"] == ""
    lanner("lander", "delete", "A")
    lanner("lander", "archive", "B:2")
    failed = lanner("stream", "update", "1", "--lander", "B:2", check=False)
    assert "archived" in failed.stderr
    assert lanner("stream", "update", added, "--lander", "B:2:7").returncode == 0  # Already its: kept.
    failed = lanner("stream", "add", "summer", "--action", "not_found", "--lander", "B:2", check=False)
    assert "Only a stream that sends to offers has landers" in failed.stderr
    for alias in ("landers", "lp"):
        failed = lanner(
            "campaign", "create", "X", "--alias", alias, "--offer-url", "https://o.example/", check=False
        )
        assert failed.returncode != 0 and "not one of" in failed.stderr


# -- the admin API ---------------------------------------------------------------------------------


def test_landers_through_the_api_with_a_zip_upload_and_stream_landers_moving_config_version(
    admin, key, db, settings
):
    status, remote = call(
        admin, "POST", "/landers", key, {"name": "Remote", "url": "https://a.example/?s={subid}"}
    )
    assert status == 201 and remote["kind"] == "remote"
    status, local = call(admin, "POST", "/landers", key, {"name": "Local"})
    assert status == 201 and (local["kind"], local["path"]) == ("local", "")
    zip_headers = {"Content-Type": "application/zip"}
    status, uploaded = call(
        admin, "POST", "/landers/Local/zip", key, headers=zip_headers, raw=make_zip({"index.html": PAGE})
    )
    assert status == 200 and uploaded["path"].startswith(f"/landers/{local['id']}-")
    status, refused = call(admin, "POST", "/landers/Local/zip", key, headers=zip_headers, raw=b"nope")
    assert status == 400 and refused["description"] == "The file is not a zip archive."
    status, _ = call(
        admin, "POST", "/landers/Local/zip", key, headers={"Content-Type": "text/plain"}, raw=b"x"
    )
    assert status == 415
    big = {**zip_headers, "Content-Length": str(settings.lander_max_bytes + 1)}
    status, _ = call(admin, "POST", "/landers/Local/zip", key, headers=big, raw=b"x")
    assert status == 413
    status, _ = call(
        admin,
        "POST",
        "/campaigns",
        key,
        {"name": "S", "alias": "summer", "offer_url": "https://o.example/?c={subid}"},
    )
    status, detail = call(admin, "GET", "/campaigns/summer", key)
    stream_id = detail["streams"][0]["id"]
    before = config_version(db)
    body = {"landers": [{"lander_id": remote["id"], "weight": 40}, {"name": "Local", "weight": 60}]}
    status, stream = call(admin, "PATCH", f"/streams/{stream_id}", key, body)
    assert status == 200, stream
    assert stream["landers"] == [
        {"lander_id": remote["id"], "name": "Remote", "weight": 40},
        {"lander_id": local["id"], "name": "Local", "weight": 60},
    ]
    assert config_version(db) != before
    status, shown = call(admin, "GET", "/landers/Local", key)
    assert [(u["campaign"], u["stream_id"], u["weight"]) for u in shown["uses"]] == [
        ("summer", stream_id, 60)
    ]
    status, conflict = call(admin, "DELETE", "/landers/Local", key)
    assert status == 409 and f"campaign summer stream {stream_id}" in conflict["description"]
    for bad in ([{"lander_id": 999}], [{"lander_id": 1, "name": "Remote"}], [{"weight": 5}], "Remote"):
        status, _ = call(admin, "PATCH", f"/streams/{stream_id}", key, {"landers": bad})
        assert status in (400, 404), bad
    status, cleared = call(admin, "PATCH", f"/streams/{stream_id}", key, {"landers": []})
    assert status == 200 and cleared["landers"] == []
    status, _ = call(admin, "DELETE", "/landers/Local", key)
    assert status == 200 and list(settings.landers_dir.iterdir()) == []
    status, added = call(
        admin,
        "POST",
        "/campaigns/summer/streams",
        key,
        {"offers": [{"offer_id": 1}], "landers": [{"name": "Remote"}]},
    )
    assert status == 201 and added["landers"] == [
        {"lander_id": remote["id"], "name": "Remote", "weight": 100}
    ]
    status, document = call(admin, "GET", "/openapi.json")
    assert (
        "application/zip" in document["paths"]["/api/v1/landers/{ref}/zip"]["post"]["requestBody"]["content"]
    )


def test_a_buyer_sees_and_changes_only_their_own_landers_and_those_their_streams_use(admin, db):
    from models.accounts.apikeys import create_api_key
    from models.accounts.users import add_user
    from models.admin.landers import create_lander

    buyer = add_user(db, "bea", "buyer", "correct horse battery")
    _, bea_key = create_api_key(db, "bea", "write")
    theirs = create_lander(db, "Admin's", url="https://a.example/")
    status, own = call(admin, "POST", "/landers", bea_key, {"name": "Bea's", "url": "https://b.example/"})
    assert status == 201 and own["owner_id"] == buyer.id
    status, listed = call(admin, "GET", "/landers", bea_key)
    assert [item["name"] for item in listed["items"]] == ["Bea's"]
    assert call(admin, "GET", f"/landers/{theirs.id}", bea_key)[0] == 404
    assert call(admin, "PATCH", f"/landers/{theirs.id}", bea_key, {"notes": "x"})[0] == 404
    assert call(admin, "PATCH", "/landers/Bea's", bea_key, {"notes": "mine"})[0] == 200
    # An admin's lander on a stream of Bea's campaign: she sees it, may keep it, may not change it.
    from models.admin.services import create_campaign, list_streams, update_stream

    campaign = create_campaign(
        db, "Bea's", "bea", offer_url="https://o.example/?s={subid}", owner_id=buyer.id
    )
    (stream,) = list_streams(db, campaign.id)
    update_stream(db, stream.id, landers=[(theirs.id, 100)])
    status, listed = call(admin, "GET", "/landers", bea_key)
    assert [item["name"] for item in listed["items"]] == ["Admin's", "Bea's"]
    assert call(admin, "PATCH", f"/landers/{theirs.id}", bea_key, {"notes": "x"})[0] == 403
    body = {"landers": [{"lander_id": theirs.id, "weight": 50}, {"name": "Bea's", "weight": 50}]}
    assert call(admin, "PATCH", f"/streams/{stream.id}", bea_key, body)[0] == 200
    other = create_lander(db, "Unseen", url="https://u.example/")
    status, refused = call(
        admin, "PATCH", f"/streams/{stream.id}", bea_key, {"landers": [{"lander_id": other.id}]}
    )
    assert status == 404 and refused["description"] == f"There is no lander {other.id}."


def test_deleting_a_lander_another_s_campaign_uses_is_refused_without_naming_that_campaign(db):
    import pytest

    from models.accounts.access import visible_campaign_ids
    from models.accounts.principal import user_principal
    from models.accounts.users import add_user
    from models.admin.errors import AdminConflict
    from models.admin.landers import create_lander, delete_lander, lander_uses
    from models.admin.services import create_campaign

    bea = add_user(db, "bea", "buyer", "correct horse battery")
    actor = user_principal(bea.id, "bea", "buyer", False)
    own = create_lander(db, "Bea's", url="https://b.example/?go={offer}", actor=actor)
    create_campaign(
        db, "Hers", "hers", offer_url="https://o.example/", landers=[(own.id, 1)], owner_id=bea.id
    )
    create_campaign(db, "Secret Plan", "secretplan", offer_url="https://o.example/", landers=[(own.id, 1)])
    with pytest.raises(AdminConflict) as refused:
        delete_lander(db, own.id, actor=actor)
    assert str(refused.value) == (
        'Lander "Bea\'s" is in use by campaign hers stream 1 and 1 stream of campaigns not shared with you; '
        "take it off those streams first (or archive it)."
    )
    with pytest.raises(AdminConflict, match="campaign hers stream 1 and campaign secretplan stream 2;"):
        delete_lander(db, own.id)  # The CLI (an admin) is told every one.
    assert [use["campaign"] for use in lander_uses(db, visible_campaign_ids(db, actor))[own.id]] == ["hers"]
    assert lander_uses(db, set()) == {}


# -- serving them ----------------------------------------------------------------------------------


def test_lanner_serve_answers_a_local_landers_files_sandboxed_and_404_for_traversal(
    lanner, start_server, settings, tmp_path
):
    archive = tmp_path / "summer.zip"
    archive.write_bytes(make_zip({"index.html": PAGE, "css/site.css": b"h1{color:red}"}))
    lanner("lander", "create", "Summer", "--zip", str(archive))
    path = json.loads(lanner("lander", "show", "Summer", "--json").stdout)["path"]
    (settings.data_dir / "secret.txt").write_text("not a lander's")
    server = start_server(workers=1)
    for url in (path, path + "index.html", path.rstrip("/")):
        status, headers, body = request(server.port, url)
        assert (status, body) == (200, PAGE), url
        assert headers["content-security-policy"].startswith("sandbox allow-scripts allow-forms")
        assert "allow-same-origin" not in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["content-type"].startswith("text/html")
        assert "max-age" in headers["cache-control"]
    status, headers, body = request(server.port, path + "css/site.css")
    assert (status, headers["content-type"], body) == (200, "text/css", b"h1{color:red}")
    folder = path.split("/")[2]
    for url in (
        "/landers/../secret.txt",
        "/landers/%2e%2e/secret.txt",
        "/landers/..%2fsecret.txt",
        f"/landers/{folder}/../../secret.txt",
        f"/landers/{folder}/%2e%2e/%2e%2e/secret.txt",
        "/landers//etc/passwd",
        f"/landers/{folder}/missing.html",
        "/landers-staging/x",
    ):
        status, headers, body = request(server.port, url)
        assert status == 404 and b"not a lander's" not in body, url
        assert "public" not in headers.get("cache-control", ""), url
    assert request(server.port, path + "index.html", method="POST", body=b"")[0] == 405
