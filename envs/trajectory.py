"""Trajectory JSONL: one finished episode per line, the format SFT and evaluation read.

``{"id", "task", "messages": [{"role", "content"}], "reward", "is_correct",
"termination", "num_tool_calls", "policy"}``, ``messages`` in ChatML as the environment
keeps them (tool responses as ``user`` turns wrapped in ``<tool_response>``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from envs.tasks import Task
from wiki_sim.common.errors import UserError
from wiki_sim.common.jsonl import iter_jsonl

REQUIRED_KEYS = ("id", "task", "messages", "reward", "is_correct", "termination", "num_tool_calls", "policy")


def trajectory_record(task: Task, messages: list[dict[str, str]], reward: float, info: Mapping[str, Any],
                      policy: str) -> dict[str, Any]:
    """The record of a finished episode, from its task, transcript and last ``info``."""
    if not info.get("termination"):
        raise ValueError("expected the info of an episode's last step (with 'termination'), got an unfinished one")
    return {
        "id": task.id,
        "task": task.to_dict(),
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
        "reward": float(reward),
        "is_correct": bool(info.get("is_correct", False)),
        "termination": str(info["termination"]),
        "num_tool_calls": int(info.get("num_tool_calls", 0)),
        "policy": policy,
    }


class TrajectoryWriter:
    """Appends records to ``<path>.partial``, flushed per line, and renames it to ``path`` when
    :meth:`close` says the file is complete: a file under the final name is finished, and a
    crash keeps the finished records in the partial file (:meth:`abandon`, or a ``with`` block
    left by an exception)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.partial = self.path.with_name(self.path.name + ".partial")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.partial.open("w", encoding="utf-8")

    def write(self, record: Mapping[str, Any]) -> None:
        missing = [k for k in REQUIRED_KEYS if k not in record]
        if missing:
            raise ValueError(f"trajectory record is missing {missing}")
        line = json.dumps(record, ensure_ascii=False)
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (say in a task's text): JSON's \\u escapes carry it
            line = json.dumps(record, ensure_ascii=True)
        self._fh.write(line + "\n")
        self._fh.flush()

    def close(self) -> None:
        """The file is complete: close it and rename it to its final name (idempotent)."""
        if self._fh.closed:
            return
        self._fh.close()
        os.replace(self.partial, self.path)

    def abandon(self) -> None:
        """The run failed: close the file and leave it under its ``.partial`` name."""
        self._fh.close()

    def __enter__(self) -> "TrajectoryWriter":
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abandon()


def read_trajectories(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """Records of a trajectory JSONL file; ``ValueError`` with the line number if one is malformed."""
    for lineno, record in iter_jsonl(path):
        if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
            raise UserError(f"{path}:{lineno}: expected an object with a 'messages' list")
        yield record


def write_trajectories(path: str | os.PathLike, records: Iterable[Mapping[str, Any]]) -> int:
    """Write all ``records``; returns how many."""
    count = 0
    with TrajectoryWriter(path) as writer:
        for record in records:
            writer.write(record)
            count += 1
    return count
