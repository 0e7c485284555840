"""JSONL inputs (tasks, SFT data, trajectories): invalid UTF-8 and too deeply nested JSON are
one-line errors naming the file and line."""

from __future__ import annotations

import pytest

from wiki_sim.common.jsonl import iter_jsonl
from envs.tasks import load_tasks
from trainers.sft_data import read_records


def test_invalid_utf8_names_the_file_and_line(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(b'{"question": "q", "answer": "a"}\n{"question": "caf\xe9", "answer": "b"}\n')
    with pytest.raises(ValueError, match=r"tasks.jsonl:2: not valid UTF-8 \(byte 18 of the line"):
        load_tasks(path)


def test_deeply_nested_json_names_the_file_and_line(tmp_path):
    path = tmp_path / "sft.jsonl"
    path.write_text('{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"sft.jsonl:1: JSON nested too deeply"):
        read_records([path])
    path.write_text('{"question": "q", "answer": "a"}\n' + '{"a": ' * 50_000 + "1" + "}" * 50_000 + "\n")
    with pytest.raises(ValueError, match=r"sft.jsonl:2: JSON nested too deeply"):
        list(iter_jsonl(path))
