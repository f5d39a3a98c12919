"""The landers pages through the admin app in process: a remote lander and a local one from a multipart
upload, a new zip, refusals next to the form, the buyer's rules, the stream editor's landers, delete."""

from __future__ import annotations

import uuid

from conftest import request
from test_landers import PAGE, make_zip
from test_panel import csrf_token, get, log_in, make_panel, panel, post, users  # noqa: F401

# ruff: noqa: F811 (the fixtures imported above, taken as arguments)


def multipart(fields: dict[str, str], files: dict[str, tuple[str, bytes]]) -> tuple[dict[str, str], bytes]:
    boundary = uuid.uuid4().hex
    chunks = []
    for name, value in fields.items():
        chunks.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        )
    for name, (filename, data) in files.items():
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
            "Content-Type: application/zip\r\n\r\n"
        )
        chunks.append(head.encode() + data + b"\r\n")
    chunks.append(f"--{boundary}--\r\n".encode())
    return {"Content-Type": f"multipart/form-data; boundary={boundary}"}, b"".join(chunks)


def send(app, path, cookie, fields, files=None):
    headers, body = multipart(fields, files or {})
    return request(app, path, {**headers, "Cookie": cookie}, "POST", body)


def test_landers_are_created_uploaded_edited_and_deleted_in_the_panel(panel, users, db, settings):
    from models.admin.landers import get_lander

    cookie = log_in(panel)
    status, _, html = get(panel, "/panel/landers", cookie)
    assert status == 200 and "No landers yet." in html and 'href="/panel/landers" aria-current="page"' in html
    token = csrf_token(html)
    status, headers, _ = send(
        panel,
        "/panel/landers",
        cookie,
        {
            "csrf_token": token,
            "name": "Quiz",
            "kind": "remote",
            "url": "https://lp.example/?s={subid}&go={offer}",
        },
    )
    assert status == 303 and headers["location"] == "/panel/landers/1?done=created"
    status, _, body = send(
        panel,
        "/panel/landers",
        cookie,
        {"csrf_token": token, "name": "Summer", "kind": "local"},
        {"zip": ("summer.zip", make_zip({"summer/index.html": PAGE}))},
    )
    assert status == 303
    summer = get_lander(db, "Summer")
    assert (settings.landers_dir / summer.folder / "index.html").read_bytes() == PAGE
    # A refusal is the service's sentence next to the form, and the form keeps what was typed.
    status, _, body = send(
        panel,
        "/panel/landers",
        cookie,
        {"csrf_token": token, "name": "Bad", "kind": "local"},
        {"zip": ("bad.zip", b"not a zip")},
    )
    assert status == 400 and b"The file is not a zip archive." in body and b'value="Bad"' in body
    status, _, body = send(
        panel, "/panel/landers", cookie, {"csrf_token": token, "name": "Bad", "kind": "local"}
    )
    assert status == 400 and b"Choose the lander&#39;s zip" in body
    status, _, _ = send(
        panel,
        "/panel/landers",
        cookie,
        {"csrf_token": "wrong", "name": "X", "kind": "remote", "url": "https://x.example/"},
    )
    assert status == 403
    big = {
        "Content-Type": "multipart/form-data; boundary=x",
        "Content-Length": str(settings.lander_max_bytes * 2),
        "Cookie": cookie,
    }
    assert request(panel, "/panel/landers", big, "POST", b"")[0] == 413
    # The list: kind, preview on the tracker's host, uses.
    status, _, html = get(panel, "/panel/landers", cookie)
    assert f"/landers/{summer.folder}/" in html and "https://lp.example/?s={subid}&amp;go={offer}" in html
    # A new zip swaps the folder; the page says where it is served.
    old = summer.folder
    status, headers, _ = send(
        panel,
        f"/panel/landers/{summer.id}",
        cookie,
        {
            "csrf_token": token,
            "name": "Summer",
            "kind": "local",
            "notes": "v2",
            "status": "active",
            "do": "save",
        },
        {"zip": ("v2.zip", make_zip({"index.html": b"v2"}))},
    )
    assert status == 303 and headers["location"].endswith("?done=uploaded")
    summer = get_lander(db, "Summer")
    assert summer.folder != old and summer.notes == "v2" and not (settings.landers_dir / old).exists()
    status, _, html = get(panel, f"/panel/landers/{summer.id}", cookie)
    assert f'id="lander-preview" href="/landers/{summer.folder}/"' in html
    status, headers, body = request(panel, f"/landers/{summer.folder}/")  # The admin worker serves it too.
    assert (status, body) == (200, b"v2") and headers["content-security-policy"].startswith("sandbox ")
    # Attached to a stream in the editor: its weight field, saved, shown as a use.
    from models.admin.services import create_campaign

    create_campaign(db, "Push", "push", offer_url="https://o.example/?s={subid}")
    status, _, html = get(panel, "/panel/campaigns/1/streams/1", cookie)
    assert f'name="lander_{summer.id}"' in html
    status, headers, body = post(
        panel,
        "/panel/campaigns/1/streams/1",
        {
            "csrf_token": token,
            "name": "Main",
            "type": "regular",
            "weight": "100",
            "action": "offers",
            "offer_1": "100",
            "offer_rotation": "weight",
            "redirect_type": "http",
            "filter_mode": "and",
            f"lander_{summer.id}": "70",
            "lander_1": "30",
            "status": "active",
        },
        cookie,
    )
    assert status == 303, body
    from models.admin.landers import stream_landers

    assert sorted(stream_landers(1)) == [(1, 30), (summer.id, 70)]
    status, _, html = get(panel, "/panel/campaigns/1", cookie)  # The stream list names them.
    assert 'class="lander">Summer <small>70</small>' in html
    assert 'class="lander">Quiz <small>30</small>' in html
    status, _, html = get(panel, f"/panel/landers/{summer.id}", cookie)
    assert "#1 Main" in html and "disabled" in html.split('id="delete-lander"')[1][:40]
    status, _, body = post(
        panel, f"/panel/landers/{summer.id}", {"csrf_token": token, "do": "delete"}, cookie
    )
    assert status == 400 and b"in use by campaign push stream 1" in body
    # Blank weights take the landers off the stream; then it may go.
    post(
        panel,
        "/panel/campaigns/1/streams/1",
        {
            "csrf_token": token,
            "name": "Main",
            "type": "regular",
            "weight": "100",
            "action": "offers",
            "offer_1": "100",
            "offer_rotation": "weight",
            "redirect_type": "http",
            "filter_mode": "and",
            "status": "active",
        },
        cookie,
    )
    assert stream_landers(1) == []
    status, headers, _ = post(
        panel, f"/panel/landers/{summer.id}", {"csrf_token": token, "do": "delete"}, cookie
    )
    assert status == 303 and list(settings.landers_dir.iterdir()) == []


def test_a_buyer_changes_only_their_own_landers_and_a_viewer_none(panel, users, db):
    from models.admin.landers import create_lander

    create_lander(db, "Admin's", url="https://a.example/")
    cookie = log_in(panel, "bert")
    status, _, html = get(panel, "/panel/landers", cookie)
    assert "Admin&#39;s" not in html and 'id="create-lander"' in html
    token = csrf_token(html)
    status, _, _ = send(
        panel,
        "/panel/landers",
        cookie,
        {"csrf_token": token, "name": "Bert's", "kind": "remote", "url": "https://b.example/"},
    )
    assert status == 303
    assert get(panel, "/panel/landers/1", cookie)[0] == 404
    status, _, html = get(panel, "/panel/landers/2", cookie)
    assert status == 200 and 'id="save-lander"' in html
    viewer = log_in(panel, "vera")
    status, _, html = get(panel, "/panel/landers", viewer)
    assert status == 200 and 'id="create-lander"' not in html
    status, _, _ = send(
        panel,
        "/panel/landers",
        viewer,
        {"csrf_token": csrf_token(html), "name": "V", "kind": "remote", "url": "https://v.example/"},
    )
    assert status == 403
