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


@pytest.mark.parametrize("where", ["index/notes.txt", "terms/mine/notes.txt", "spelling/notes.txt",
                                   "synth_index/notes.txt"])
def test_a_user_file_anywhere_in_the_tree_is_not_deleted(tmp_path, where):
    import time

    out = tmp_path / "wiki"
    build("jsonl", _corpus(tmp_path), out, progress=False)
    (out / "synth_index").mkdir()
    (out / "synth_index" / "meta.json").write_text("{}")  # what synthesis writes after a build, completed
    check_out_dir(out)  # folders this project wrote after the build are its own
    time.sleep(0.05)
    user_file = out / where
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text("mine")
    with pytest.raises(WikiSimError, match=f"also holds {where}"):
        build("jsonl", _corpus(tmp_path), out, progress=False)
    assert user_file.read_text() == "mine"


def test_a_record_without_a_file_list_is_checked_by_time(tmp_path):
    import os
    import time

    out = tmp_path / "wiki"
    build("jsonl", _corpus(tmp_path), out, progress=False)
    record = out / "build.json"
    info = json.loads(record.read_text())
    del info["files"]
    stamp = record.stat().st_mtime
    record.write_text(json.dumps(info))
    os.utime(record, (stamp, stamp))
    check_out_dir(out)
    time.sleep(0.05)
    (out / "index" / "notes.txt").write_text("mine")
    with pytest.raises(WikiSimError, match="also holds index/notes.txt"):
        check_out_dir(out)


def test_a_later_spelling_folder_holds_only_its_writers_files(tmp_path):
    """A tantivy simulator's spelling index, written after a build whose record lists no files."""
    import os

    pytest.importorskip("tantivy")
    from wiki_sim.spelling import SPELLING_FILES

    out = tmp_path / "wiki"
    build("jsonl", _corpus(tmp_path), out, progress=False, engine="tantivy")
    record = out / "build.json"
    info = json.loads(record.read_text())
    del info["files"]
    stamp = record.stat().st_mtime
    record.write_text(json.dumps(info))
    os.utime(record, (stamp, stamp))
    for path in (out / "spelling").iterdir():  # written later than the build
        os.utime(path, (stamp + 60, stamp + 60))
    assert {p.name for p in (out / "spelling").iterdir()} <= SPELLING_FILES
    check_out_dir(out)  # accounted for by its meta.json
    (out / "spelling" / "meta.json").unlink()
    check_out_dir(out)  # without one: by its writer's file names
    (out / "spelling" / "notes.txt").write_text("mine")
    with pytest.raises(WikiSimError, match="also holds spelling/notes.txt"):
        check_out_dir(out)
