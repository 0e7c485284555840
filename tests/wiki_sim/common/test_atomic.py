"""The atomic writers: a file with its final name is complete; an error leaves the old file and no
temporary file behind."""

from __future__ import annotations

import json

import pytest

from wiki_sim.common.jsonl import (atomic_open, atomic_write_bytes, atomic_write_text, read_jsonl,
                                   write_json_atomic, write_jsonl_atomic)
from wiki_sim.common.jsonl import tmp_path as temporary_of


def test_each_writer_writes_the_whole_file_and_leaves_no_temporary(tmp_path):
    atomic_write_text(tmp_path / "a.txt", "é\n")
    atomic_write_bytes(tmp_path / "b.bin", b"\x00\xff")
    write_json_atomic(tmp_path / "c.json", {"k": "é"})
    write_json_atomic(tmp_path / "d.json", {"b": 1, "a": "é"}, indent=None, ensure_ascii=True, sort_keys=True)
    assert write_jsonl_atomic(tmp_path / "e.jsonl", ({"i": i} for i in range(3))) == 3
    assert (tmp_path / "a.txt").read_bytes() == "é\n".encode()
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\xff"
    assert (tmp_path / "c.json").read_text(encoding="utf-8") == '{\n  "k": "é"\n}\n'
    assert (tmp_path / "d.json").read_text(encoding="utf-8") == '{"a": "\\u00e9", "b": 1}\n'
    assert read_jsonl(tmp_path / "e.jsonl") == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.bin", "c.json", "d.json", "e.jsonl"]


def test_an_error_midway_keeps_the_old_file_and_removes_the_temporary(tmp_path):
    out = tmp_path / "tasks.jsonl"
    out.write_text("old\n", encoding="utf-8")

    def records():
        yield {"ok": 1}
        raise RuntimeError("the source broke")

    with pytest.raises(RuntimeError, match="the source broke"):
        write_jsonl_atomic(out, records())
    with pytest.raises(TypeError):  # not JSON serializable: nothing is written
        write_json_atomic(out, {"x": object()})
    with pytest.raises(KeyboardInterrupt):
        with atomic_open(out, "w") as fh:
            fh.write("half")
            raise KeyboardInterrupt
    assert out.read_text(encoding="utf-8") == "old\n"
    assert not temporary_of(out).exists()


def test_the_temporary_sits_beside_the_target_until_the_rename(tmp_path):
    out = tmp_path / "run.json"
    with atomic_open(out, "w") as fh:
        fh.write(json.dumps({"a": 1}))
        assert temporary_of(out) == tmp_path / "run.json.tmp" and temporary_of(out).exists() and not out.exists()
    assert json.loads(out.read_text(encoding="utf-8")) == {"a": 1}


def test_a_missing_folder_is_an_os_error_and_a_bad_mode_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError):
        atomic_write_text(tmp_path / "no" / "such.txt", "x")
    with pytest.raises(ValueError, match="mode must be 'w' or 'wb'"):
        with atomic_open(tmp_path / "x", "a"):
            pass
