"""A simulator folder is data: pickles planted in its Whoosh index never run when it is opened."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import gymnasium as gym
import pytest
from whoosh.fields import Schema
from whoosh.filedb.filestore import FileStorage
from whoosh.filedb.structfile import StructFile
from whoosh.index import TOC

import envs  # noqa: F401 - registers the environments
from tests.wiki_sim.simhelpers import build_jsonl
from websailor.cli import main
from wiki_sim import WikiSim
from wiki_sim.errors import WikiSimError
from wiki_sim.whoosh_safe import DataUnpickler, data_loads, read_toc

PAGES = [("Lighthouse", "A lighthouse is a tower that guides ships at sea."),
         ("Harbor", "A harbor is where ships dock, often near a lighthouse.")]


class Planted:
    """Pickles as a call to ``os.system`` that creates ``marker``."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


class PlantedSchema(Schema):
    def __init__(self, marker: Path):
        super().__init__()
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return build_jsonl(tmp_path_factory.mktemp("pickles"), PAGES)


@pytest.fixture
def wiki(built, tmp_path) -> Path:
    out = tmp_path / "wiki"
    shutil.copytree(built, out)
    return out


def _plant_toc(wiki: Path, schema, segments) -> None:
    """A newer table of contents (the one Whoosh opens) holding the given pickles."""
    storage = FileStorage(str(wiki / "index"))
    gen = TOC._latest_generation(storage, "MAIN") + 1
    TOC(schema, segments, gen).write(storage, "MAIN")


def _one_line_error(capsys, argv) -> str:
    assert main(argv) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


def test_a_planted_segment_list_does_not_run(wiki, tmp_path, capsys):
    marker = tmp_path / "ran"
    current = read_toc(FileStorage(str(wiki / "index")), "MAIN", Schema())
    _plant_toc(wiki, PlantedSchema(marker), [*current.segments, Planted(marker)])
    with pytest.raises(WikiSimError, match="posix.system|os.system"):
        WikiSim(wiki)
    with pytest.raises(WikiSimError, match="not index data"):
        gym.make("websailor/WikiSim-v0", wiki_dir=str(wiki), tasks=[{"question": "q", "answer": "a"}]).reset()
    assert "not index data" in _one_line_error(capsys, ["wiki", "search", str(wiki), "lighthouse"])
    assert not marker.exists()


def test_a_planted_schema_is_never_read(wiki, tmp_path):
    marker = tmp_path / "ran"
    current = read_toc(FileStorage(str(wiki / "index")), "MAIN", Schema())
    _plant_toc(wiki, PlantedSchema(marker), current.segments)
    with WikiSim(wiki) as sim:
        assert sim.search(["tower that guides ships"], k=1)[0][0].title == "Lighthouse"
    assert not marker.exists()


def test_a_planted_segment_directory_does_not_run(wiki, tmp_path):
    marker = tmp_path / "ran"
    (seg,) = (wiki / "index").glob("*.seg")
    payload = pickle.dumps(Planted(marker))
    with open(seg, "r+b") as raw:
        f = StructFile(raw)
        raw.seek(0, os.SEEK_END)
        at = raw.tell()
        raw.write(payload + pickle.dumps({}))
        raw.seek(0)
        f.write_long(at)
        f.write_int(len(payload))
        raw.flush()
    with pytest.raises(WikiSimError, match="not index data"):
        with WikiSim(wiki) as sim:
            sim.search(["lighthouse"])
    assert not marker.exists()


def test_posting_and_stored_pickles_are_read_as_data(built, tmp_path):
    import whoosh.codec.whoosh3
    import whoosh.columns
    import whoosh.filedb.structfile

    with WikiSim(built) as sim:
        assert sim.search(["harbor"], k=1)[0][0].title == "Harbor"
    assert whoosh.codec.whoosh3.loads is data_loads and whoosh.columns.loads is data_loads
    assert whoosh.filedb.structfile.load_pickle.__module__ == "wiki_sim.whoosh_safe"
    marker = tmp_path / "ran"
    with pytest.raises(WikiSimError, match="not index data"):
        data_loads(pickle.dumps(Planted(marker)))
    assert not marker.exists()
    assert data_loads(pickle.dumps((1, 2.5, b"x", "y", None), protocol=2)) == (1, 2.5, b"x", "y", None)
    assert issubclass(DataUnpickler, pickle.Unpickler)


@pytest.mark.parametrize("content", [b"", b"\x00" * 3, b"garbage" * 10])
def test_a_garbled_table_of_contents_is_one_line(wiki, content):
    for toc in (wiki / "index").glob("_MAIN_*.toc"):
        toc.write_bytes(content)
    with pytest.raises(WikiSimError) as info:
        WikiSim(wiki)
    assert "\n" not in str(info.value)
