"""A corpus whose titles repeat builds without a traceback: a JSONL page whose title (once
normalized) is already taken keeps its text under a distinct title, never overwriting the first."""

from __future__ import annotations

import json
import sqlite3

from websailor.cli import main


def test_duplicate_titles_in_a_jsonl_corpus_are_kept_apart(tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    pages = [{"title": "Alpha", "text": "Alpha is a thing."}, {"title": "Beta", "text": "Beta is b."},
             {"title": "alpha", "text": "Another alpha page."}]  # the same title once normalized
    corpus.write_text("".join(json.dumps(p) + "\n" for p in pages), encoding="utf-8")
    code = main(["wiki", "build", "--source", "jsonl", str(corpus), "--out", str(tmp_path / "wiki"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 0 and "Traceback" not in err
    with sqlite3.connect(tmp_path / "wiki" / "store.sqlite") as db:
        rows = dict(db.execute("SELECT title, text FROM pages").fetchall())
    assert rows["Alpha"].startswith("Alpha is a thing.")
    assert [t for t, text in rows.items() if text.startswith("Another alpha page.")] == ["Alpha (2)"]
