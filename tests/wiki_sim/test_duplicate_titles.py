"""A corpus whose titles repeat is a clear one-line error, never a traceback."""

from __future__ import annotations

import json

from websailor.cli import main


def test_duplicate_titles_in_a_jsonl_corpus_are_a_one_line_error(tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    pages = [{"title": "Alpha", "text": "Alpha is a thing."}, {"title": "Beta", "text": "Beta is b."},
             {"title": "alpha", "text": "Another alpha page."}]  # the same title once normalized
    corpus.write_text("".join(json.dumps(p) + "\n" for p in pages), encoding="utf-8")
    code = main(["wiki", "build", "--source", "jsonl", str(corpus), "--out", str(tmp_path / "wiki"), "--no-progress"])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "1 title(s) used by more than one page: 'Alpha' (2 pages)" in err
    assert not (tmp_path / "wiki").exists()
