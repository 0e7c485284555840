"""`wiki build --out` (and the pipeline's --wiki-dir, which builds through the same check)
replaces only a folder that is a simulator of this project, never one that merely holds an
entry with a simulator's name."""

from __future__ import annotations

import json

import pytest

from wiki_sim.build import build, check_out_dir
from wiki_sim.errors import WikiSimError
from wiki_sim.sim import read_build_info

PAGES = [{"title": f"Page {i}", "text": f"Page {i} is a page about topic {i} and more words."} for i in range(3)]


def _corpus(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PAGES), encoding="utf-8")
    return path


@pytest.mark.parametrize("decoy", ["index", "build.json", "store.sqlite", "terms"])
def test_a_user_folder_with_a_simulator_like_entry_is_not_replaced(tmp_path, decoy):
    site = tmp_path / "site"
    (site / "src").mkdir(parents=True)
    (site / "thesis.tex").write_text("years of work")
    if decoy in ("index", "terms"):
        (site / decoy).mkdir()
    else:
        (site / decoy).write_text('{"name": "my-other-tool"}')
    with pytest.raises(WikiSimError, match="not a simulator"):
        build("jsonl", _corpus(tmp_path), site, progress=False)
    assert (site / "thesis.tex").read_text() == "years of work" and (site / "src").is_dir()


def test_a_simulator_with_user_files_in_it_is_not_replaced(tmp_path):
    out = tmp_path / "wiki"
    build("jsonl", _corpus(tmp_path), out, progress=False)
    check_out_dir(out)  # a simulator of this project may be rebuilt
    (out / "notes.txt").write_text("mine")
    with pytest.raises(WikiSimError, match="also holds notes.txt"):
        build("jsonl", _corpus(tmp_path), out, progress=False)
    assert (out / "notes.txt").read_text() == "mine" and read_build_info(out)["counts"]["pages"] == 3
    (out / "notes.txt").unlink()
    assert build("jsonl", _corpus(tmp_path), out, progress=False)["counts"]["pages"] == 3
