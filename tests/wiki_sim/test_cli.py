"""``websailor wiki ...``: commands, one-line errors, no partial output, and builds killed midway."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.wiki_sim.simhelpers import (alive, descendants, group_processes, kill_group, leftovers, wait_for,
                                      write_jsonl)
from websailor.cli import main
from wiki_sim import WikiSim
from wiki_sim.cli import BuildConfig, SearchConfig, SourceKind, VisitConfig
from wiki_sim.ingest import SOURCE_KINDS

REPO = Path(__file__).resolve().parents[2]


def websailor(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "websailor.cli", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=300, **kwargs)


def test_cli_module_is_import_light():
    code = ("import sys, wiki_sim.cli, websailor.cli; "
            "print(sorted(m for m in ('whoosh', 'mwparserfromhell', 'sqlite_utils', 'requests', 'tqdm') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


def test_source_kinds_agree_with_ingestion():
    from typing import get_args

    assert get_args(SourceKind) == SOURCE_KINDS


def test_help_shows_field_docs():
    top = websailor("--help")
    assert top.returncode == 0 and "wiki" in top.stdout
    build_help = websailor("wiki", "build", "--help")
    assert build_help.returncode == 0
    for text in ("--source", "gensim-sample", "--workers", "--page-timeout", "--out", "Parser and index writer"):
        assert text in build_help.stdout


@pytest.mark.parametrize("kwargs, message", [
    (dict(source="dump"), "needs a PATH"), (dict(workers=0), "--workers"), (dict(page_timeout=0), "--page-timeout"),
])
def test_build_config_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BuildConfig(**kwargs)


def test_search_and_visit_config_validation():
    with pytest.raises(ValueError, match="query"):
        SearchConfig("d", [" "])
    with pytest.raises(ValueError, match="--k"):
        SearchConfig("d", ["q"], k=0)
    with pytest.raises(ValueError, match="--goal"):
        VisitConfig("d", "https://en.wikipedia.org/wiki/X")
    with pytest.raises(ValueError, match="go together"):
        VisitConfig("d", "X", goal="g", summarizer_url="http://127.0.0.1:1/v1")


def one_line_error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error:" in err
    return err


def test_missing_simulator_is_a_one_line_error(capsys, tmp_path):
    for command in (["search", str(tmp_path / "none"), "q"], ["stats", str(tmp_path / "none")],
                    ["visit", str(tmp_path / "none"), "X", "--goal", "g"]):
        assert "no simulator at" in one_line_error(capsys, ["wiki", *command])


def test_half_built_simulator_is_a_one_line_error(capsys, gensim_wiki, tmp_path):
    half = tmp_path / "half"
    shutil.copytree(gensim_wiki, half)
    (half / "build.json").unlink()
    assert "not a complete simulator" in one_line_error(capsys, ["wiki", "search", str(half), "q"])


def test_corrupt_bz2_fails_and_leaves_nothing(capsys, gensim_sample_path, tmp_path):
    data = gensim_sample_path.read_bytes()
    truncated = tmp_path / "truncated.xml.bz2"
    truncated.write_bytes(data[: len(data) // 2])
    garbled = tmp_path / "garbled.xml.bz2"
    garbled.write_bytes(data[:5000] + bytes(b ^ 0x5A for b in data[5000:9000]) + data[9000:])
    for corpus in (truncated, garbled):
        out = tmp_path / "wiki"
        one_line_error(capsys, ["wiki", "build", "--source", "dump", str(corpus), "--out", str(out),
                                "--no-progress"])
        assert not out.exists() and leftovers(tmp_path) == []


def test_malformed_jsonl_fails_with_the_line_number_and_leaves_nothing(capsys, tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"title": "A", "text": "a"}\n{"title": "B", "text": "b"}\nnot json\n')
    out = tmp_path / "wiki"
    err = one_line_error(capsys, ["wiki", "build", "--source", "jsonl", str(corpus), "--out", str(out),
                                  "--no-progress"])
    assert "c.jsonl:3" in err
    assert not out.exists() and leftovers(tmp_path) == []


def test_build_search_visit_stats(capsys, tmp_path):
    corpus = write_jsonl(tmp_path / "c.jsonl", [
        ("Lighthouse", "A lighthouse is a tower that emits light to guide ships.\n\n## History\n"
                       "The Pharos of Alexandria was built in the 3rd century BC."),
        ("Harbour", "A harbour is a sheltered body of water where ships are docked."),
    ])
    out = tmp_path / "wiki"
    assert main(["wiki", "build", "--source", "jsonl", str(corpus), "--out", str(out), "--no-progress"]) == 0
    assert capsys.readouterr().out.startswith(f"built {out}: 2 pages")
    assert main(["wiki", "build", "--source", "jsonl", str(corpus), "--out", str(out), "--reuse"]) == 0
    assert "up to date" in capsys.readouterr().out

    assert main(["wiki", "search", str(out), "tower guiding ships", "docked boats", "--k", "1"]) == 0
    text = capsys.readouterr().out
    assert "1. Lighthouse  <https://en.wikipedia.org/wiki/Lighthouse>" in text and "1. Harbour" in text
    assert main(["wiki", "search", str(out), "Pharos", "--json"]) == 0
    [result] = json.loads(capsys.readouterr().out)
    assert result["query"] == "Pharos" and result["hits"][0]["title"] == "Lighthouse"
    assert "Pharos of Alexandria" in result["hits"][0]["snippet"] and result["corrected_query"] is None
    assert main(["wiki", "search", str(out), "Lighthuose", "--json"]) == 0
    [result] = json.loads(capsys.readouterr().out)
    assert result["corrected_query"] == "Lighthouse" and result["hits"][0]["title"] == "Lighthouse"
    assert main(["wiki", "search", str(out), "Lighthuose"]) == 0
    assert "# Lighthuose: 1 results (spelling corrected: results for 'Lighthouse')" in capsys.readouterr().out

    assert main(["wiki", "visit", str(out), "https://en.wikipedia.org/wiki/Lighthouse", "--goal", "when built"]) == 0
    assert "3rd century BC" in capsys.readouterr().out
    assert main(["wiki", "visit", str(out), "Lighthouse", "--goal", "when built", "--json"]) == 0
    visit = json.loads(capsys.readouterr().out)
    assert visit["found"] and visit["title"] == "Lighthouse" and "3rd century" in visit["evidence"]
    assert main(["wiki", "visit", str(out), "https://en.wikipedia.org/wiki/Nowhere", "--goal", "x"]) == 1
    assert "page not found" in capsys.readouterr().out

    assert main(["wiki", "stats", str(out)]) == 0
    assert "pages       2 (indexed 2, engine whoosh)" in capsys.readouterr().out
    assert main(["wiki", "stats", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["build"]["counts"]["pages"] == 2


def test_fetch_uses_the_cache(capsys, gensim_sample_path, default_corpus_path):
    assert main(["wiki", "fetch"]) == 0
    out = capsys.readouterr().out
    assert str(default_corpus_path) in out and str(gensim_sample_path) in out


# --- builds killed outright ------------------------------------------------------------

def _building_dir(parent: Path, marker: str) -> Path | None:
    for d in parent.glob(".wiki.building-*"):
        if (d / marker).exists():
            return d
    return None


@pytest.mark.parametrize("stage, marker", [("parsing", "store.sqlite"), ("indexing", "index")])
def test_sigkill_midway_keeps_the_old_simulator_and_the_next_build_cleans_up(
        stage, marker, gensim_wiki, tmp_path):
    out = tmp_path / "wiki"
    shutil.copytree(gensim_wiki, out)
    before = (out / "build.json").read_text()
    proc = subprocess.Popen([sys.executable, "-m", "websailor.cli", "wiki", "build", "--source", "gensim-sample",
                             "--out", str(out), "--no-progress"], cwd=REPO, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: set[int] = set()
    try:
        assert wait_for(lambda: _building_dir(tmp_path, marker) is not None, timeout=120), f"never reached {stage}"
        workers = descendants(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        # The build's worker processes (parsers, index writers) notice and exit on their own.
        assert wait_for(lambda: not alive(workers) and not group_processes(proc.pid), timeout=60, interval=0.2), \
            (alive(workers), group_processes(proc.pid))
    finally:
        kill_group(proc.pid)
        for pid in alive(workers):
            os.kill(pid, signal.SIGKILL)
    assert (out / "build.json").read_text() == before
    with WikiSim(out) as sim:
        assert sim.search(["photoelectric effect Nobel"])[0][0].title == "Albert Einstein"
    assert leftovers(tmp_path)  # what the killed build left
    corpus = write_jsonl(tmp_path / "small.jsonl", [("Lighthouse", "A tower that guides ships.")])
    assert main(["wiki", "build", "--source", "jsonl", str(corpus), "--out", str(out), "--no-progress"]) == 0
    assert leftovers(tmp_path) == []
    assert WikiSim(out).search(["tower ships"])[0][0].title == "Lighthouse"
