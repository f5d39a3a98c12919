"""`lanner conversion import|correct` as a user runs them (a subprocess) on a real database: the services
the admin API and the panel call, with their sentences."""

from __future__ import annotations

import json


def stored_subids(db, count: int) -> list[str]:
    from workers.bench.generate import generate_clicks

    generate_clicks(db, count, 1, campaigns=1, seed=3)
    return [s for (s,) in db.execute_sql("SELECT subid FROM click ORDER BY id")]


def test_conversion_import_prints_each_line_s_verdict_and_applies_them_once(lanner, db, tmp_path):
    first, second = stored_subids(db, 2)
    path = tmp_path / "conversions.csv"
    path.write_text(
        f"subid,tid,status,payout\n{first},a,sale,3\n{second},b,approved,4\nnot-a-subid,c,sale,1\n"
    )
    table = lanner("conversion", "import", str(path)).stdout
    lines = table.splitlines()
    assert lines[0].split() == ["line", "subid", "verdict", "detail", "conversion_id"]
    assert lines[1].split()[:3] == ["2", first, "created"] and lines[2].split()[:3] == [
        "3",
        second,
        "created",
    ]
    assert lines[3].split()[:3] == ["4", "not-a-subid", "invalid"]
    assert lines[-1] == "created: 2, invalid: 1"
    again = json.loads(lanner("conversion", "import", str(path), "--json").stdout)
    assert again["verdicts"] == {"duplicate": 2, "invalid": 1} and again["rows"][0]["line"] == 2
    assert db.execute_sql("SELECT COUNT(*), SUM(payout) FROM conversion").fetchone() == (2, 7.0)
    entries = json.loads(lanner("audit", "list", "--entity", "conversion", "--json").stdout)
    assert [(e["actor"], e["action"]) for e in entries] == [("cli", "import"), ("cli", "import")]
    path.write_text("subid,amount\nx,1\n")
    refused = lanner("conversion", "import", str(path), check=False)
    assert refused.returncode == 1 and "Unknown CSV column 'amount'" in refused.stderr
    path.write_bytes(b"subid\n\xff\n")
    refused = lanner("conversion", "import", str(path), check=False)
    assert refused.returncode == 1 and "The CSV is not UTF-8 text." in refused.stderr


def test_conversion_correct_sets_status_and_payout_and_refuses_an_unknown_status(lanner, db, tmp_path):
    (subid,) = stored_subids(db, 1)
    path = tmp_path / "one.csv"
    path.write_text(f"subid,status,payout\n{subid},sale,5\n")
    lanner("conversion", "import", str(path))
    (conversion_id,) = db.execute_sql("SELECT id FROM conversion").fetchone()
    out = lanner(
        "conversion", "correct", str(conversion_id), "--status", "rejected", "--payout", "1.5"
    ).stdout
    assert out.strip() == f"conversion {conversion_id}: rejected (first sale), payout 1.5 USD"
    shown = json.loads(
        lanner("conversion", "correct", str(conversion_id), "--status", "lead", "--json").stdout
    )
    assert (shown["status"], shown["payout"], shown["original_status"]) == ("lead", 1.5, "sale")
    refused = lanner("conversion", "correct", str(conversion_id), "--status", "won", check=False)
    assert refused.returncode == 1
    assert "Status must be one of lead, sale, rejected, rebill, trash, not 'won'." in refused.stderr
    assert lanner("conversion", "correct", str(conversion_id), check=False).returncode == 1
    missing = lanner("conversion", "correct", "999", "--status", "sale", check=False)
    assert missing.returncode == 1 and "There is no conversion 999." in missing.stderr
    entries = json.loads(lanner("audit", "list", "--entity", f"conversion:{conversion_id}", "--json").stdout)
    assert [e["new"].get("status") for e in entries] == ["lead", "rejected"]
