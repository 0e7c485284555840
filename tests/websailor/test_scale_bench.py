"""``benchmarks.scale``: its corpus generator, its process-tree meters and a tiny end-to-end run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks import scale
from benchmarks._scale_corpus import family_queries, load_pool, misspell, write_corpus, write_tasks


def test_pages_are_recombined_real_sentences_with_unique_titles_and_findable_queries(gensim_wiki, tmp_path):
    pool = load_pool([gensim_wiki / "store.sqlite"])
    corpus = tmp_path / "corpus.jsonl"
    targets, stats = write_corpus(pool, 400, corpus, queries=30, seed=1)
    pages = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()]
    assert len(pages) == stats["pages"] == 400 and not corpus.with_name("corpus.jsonl.part").exists()
    assert len({p["title"] for p in pages}) == 400
    assert sum(len(p["text"].split()) for p in pages) == stats["words"]
    real = set(pool.sentences)
    for page in pages[:50]:
        pieces = re.split(r"(?<=[.!?])\s+", page["text"])
        assert sum(piece in real for piece in pieces) >= 3  # 3-8 real sentences (a piece may join two)
        assert len(pieces) <= 8 * 2
    by_title = {p["title"]: p["text"] for p in pages}
    assert len(targets) == 30
    for t in targets:
        text = by_title[t.title].lower()
        assert all(w.lower() in text for w in t.queries["long"].split())
        assert t.queries["title"].split()[-1] in t.title  # the base and one of the title's words
        if "misspelt" in t.queries:
            assert t.queries["misspelt"] != t.queries["title"]
    again, _ = write_corpus(pool, 400, tmp_path / "again.jsonl", queries=30, seed=1)
    assert (tmp_path / "again.jsonl").read_bytes() == corpus.read_bytes() and again == targets
    assert write_tasks(targets, tmp_path / "tasks.jsonl") == 30
    assert set(family_queries(targets)) == {"title", "long", "misspelt"}


def test_too_few_sentences_or_no_store_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="no simulator store"):
        load_pool([tmp_path / "store.sqlite"])


def test_misspell_changes_a_word_by_one_edit():
    for word in ("Einstein", "Mississippi", "river", "aaaaa"):
        wrong = misspell(word)
        assert wrong.lower() != word.lower() and len(word) - len(wrong) in (0, 1)


def test_linear_fit_and_extrapolation():
    assert scale.linear_fit([1, 2, 3], [5, 7, 9]) == pytest.approx((3, 2))
    assert scale.linear_fit([4, 4], [1, 2]) is None
    runs = [{"corpus": {"words": w, "words_per_page": 100.0},
             "builds": {"simulator": {"build_s": w / 1e4, "peak_pss_mb": 100 + w / 1e5, "final_mb": 1,
                                      "temp_mb": 0}},
             "search": {}} for w in (1e6, 1e7)]
    fit = scale.fits(runs, ["simulator"])["simulator"]
    assert fit["build_s"]["at_wiki18"] == pytest.approx(2.1e9 / 1e4, rel=1e-6)
    assert fit["build_s"]["at_1m_pages"] == pytest.approx(1e8 / 1e4, rel=1e-6)
    assert fit["peak_pss_mb"]["at_wiki18"] == pytest.approx(100 + 2.1e4, rel=1e-6)


def test_monitor_sees_a_grandchild_allocate_and_write(tmp_path):
    # A child starts a grandchild that holds 300 MB and writes 40 MB, then deletes the file: the
    # peaks of the whole tree count, not what is left at the end.
    grandchild = (f"import os, time; b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096]); "
                  f"open({str(tmp_path / 'big')!r}, 'wb').write(os.urandom(40 * 2**20)); time.sleep(1.5); "
                  f"os.remove({str(tmp_path / 'big')!r})")
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grandchild!r}], check=True)"
    proc = subprocess.Popen([sys.executable, "-c", child])
    mon = scale.Monitor(proc.pid, tmp_path, interval=0.1)
    assert proc.wait(timeout=60) == 0
    time.sleep(0.2)
    mon.stop()
    assert mon.peak_pss >= 300 * 2**20 and mon.peak_rss >= mon.peak_pss
    assert 40 * 2**20 <= mon.peak_disk < 60 * 2**20
    assert scale.disk_usage(tmp_path) < 2**20 and scale.disk_usage(tmp_path / "gone") == 0


def test_bad_sizes_are_one_line_errors():
    with pytest.raises(SystemExit, match="--sizes: expected page counts"):
        scale._sizes("10k")
    with pytest.raises(SystemExit, match=">= 100 pages"):
        scale._sizes("50")
    assert scale._sizes("100000,10_000,10000") == [10000, 100000]


def test_a_tiny_run_builds_serves_steps_and_prints_its_json_line(gensim_wiki, tmp_path, capsys):
    # The machinery end to end at 200 pages (the simulator through `wiki build`, FTS5 through its child).
    assert scale.main(["--sizes", "200", "--queries", "4", "--env-seconds", "0.5", "--systems",
                       "simulator,fts5,fts5-stopwords", "--sentences-from", str(gensim_wiki),
                       "--work-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    result = json.loads(out.strip().splitlines()[-1])
    [run] = result["runs"]
    assert run["pages"] == 200 and set(run["search"]) == {"simulator", "fts5", "fts5-stopwords"}
    build = run["builds"]["simulator"]
    assert build["build_s"] > 0 and build["peak_pss_mb"] > 20 and build["final_mb"] > 0
    for system in ("simulator", "fts5"):
        assert run["search"][system]["all"]["recall_at_10"] > 0.5  # 200 pages: the targets are found
        assert run["search"][system]["open"]["pss_mb"] > 5
    env = run["env"]["simulator"]
    assert env["1"]["steps"] > 0 and env["4"]["num_envs"] == 4 and env["4"]["peak_pss_mb"] > env["1"]["peak_pss_mb"]
    assert "build_le_10min_whoosh" in result["targets"] and "targets (issue 23" in out
    assert list(Path(tmp_path).iterdir()) == []  # the work folder is removed


def test_work_dir_is_created_when_missing_and_a_file_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="--work-dir .*not a folder"):
        scale.main(["--work-dir", str(Path(__file__)), "--sizes", "200"])
    missing = tmp_path / "a" / "b"
    with pytest.raises(SystemExit, match="no simulator store"):  # got past the folder check, made it
        scale.main(["--work-dir", str(missing), "--sizes", "200", "--sentences-from", str(tmp_path / "none")])
    assert missing.is_dir()
