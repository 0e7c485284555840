"""Tasks: questions with gold answers, from JSONL files or lists of dicts.

One task per line: ``{"question": ..., "answer": ...}`` is enough; ``id`` and ``aliases``
(other accepted answers) are optional, and every other field is kept as metadata. This
is the format of the released SailorFog-QA, WebDancer and WebShaper files, read as they
are. A task without an ``id`` gets a stable one from its question's hash.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from envs.judges import check_gold
from wiki_sim.common.errors import UserError
from wiki_sim.common.jsonl import iter_jsonl, write_jsonl_atomic


@dataclass(frozen=True)
class Task:
    """One question and its accepted answers."""

    id: str
    question: str
    answer: str
    aliases: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Every other field of the record (``tag``, ``urls``, ``formalization``, ...)."""

    @property
    def answers(self) -> list[str]:
        """The answer followed by its aliases."""
        return [self.answer, *self.aliases]

    def to_dict(self) -> dict[str, Any]:
        """The task as a JSONL record (metadata fields at the top level, as read)."""
        record: dict[str, Any] = {"id": self.id, "question": self.question, "answer": self.answer}
        if self.aliases:
            record["aliases"] = list(self.aliases)
        record.update({k: v for k, v in self.metadata.items() if k not in record})
        return record


def _scalar_text(value: Any, what: str, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise UserError(f"{where}: {what} must be a string or a number, got {type(value).__name__}")
    text = str(value).strip()
    if not text:
        raise UserError(f"{where}: {what} is empty")
    return text


def task_from_dict(record: Mapping[str, Any], where: str = "task") -> Task:
    """A :class:`Task` from one record; ``ValueError`` naming ``where`` if it is malformed."""
    if not isinstance(record, Mapping):
        raise UserError(f"{where}: expected a JSON object with 'question' and 'answer', got {type(record).__name__}")
    missing = [k for k in ("question", "answer") if k not in record]
    if missing:
        raise UserError(f"{where}: missing {' and '.join(repr(k) for k in missing)} (has {sorted(record)})")
    question = _scalar_text(record["question"], "'question'", where)
    answer = _scalar_text(record["answer"], "'answer'", where)
    aliases = record.get("aliases") or []
    if isinstance(aliases, (str, int, float)):
        aliases = [aliases]
    if not isinstance(aliases, (list, tuple)):
        raise UserError(f"{where}: 'aliases' must be a list of strings, got {type(aliases).__name__}")
    alias_texts = tuple(_scalar_text(a, "each alias", where) for a in aliases)
    try:  # an answer that normalizes to nothing would match an empty (or any punctuation) answer
        check_gold([answer, *alias_texts])
    except ValueError as exc:
        raise UserError(f"{where}: {exc}") from None
    task_id = record.get("id")
    if task_id is None or task_id == "":
        task_id = hashlib.sha1(question.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    metadata = {k: v for k, v in record.items() if k not in ("id", "question", "answer", "aliases")}
    return Task(id=str(task_id), question=question, answer=answer, aliases=alias_texts, metadata=metadata)


def check_task_file(path: str | os.PathLike) -> None:
    """``ValueError`` that says what is wrong unless ``path`` is an existing regular file."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path} is a directory; expected a task JSONL file ({{\"question\", \"answer\"}} per line)")
    if not path.is_file():
        raise UserError(f"task file not found: {path}")


def read_jsonl_tasks(path: str | os.PathLike) -> list[Task]:
    """Every task in a JSONL file (blank lines skipped); ``ValueError`` with the line number."""
    path = Path(path)
    check_task_file(path)
    tasks = [task_from_dict(record, f"{path}:{lineno}") for lineno, record in iter_jsonl(path)]
    if not tasks:
        raise UserError(f"{path}: no tasks in the file")
    return tasks


def load_tasks(tasks: str | os.PathLike | Sequence[Mapping[str, Any] | Task] | Iterable[Mapping[str, Any]]) -> list[Task]:
    """Tasks from a JSONL path or from a sequence of dicts (or :class:`Task` objects)."""
    if isinstance(tasks, (str, os.PathLike)):
        return read_jsonl_tasks(tasks)
    if isinstance(tasks, Mapping):
        raise UserError("tasks must be a JSONL path or a list of task dicts, got a single dict; wrap it in a list")
    out = [t if isinstance(t, Task) else task_from_dict(t, f"tasks[{i}]") for i, t in enumerate(tasks)]
    if not out:
        raise UserError("tasks is empty: expected at least one task")
    return out


def write_jsonl_tasks(path: str | os.PathLike, tasks: Iterable[Task]) -> int:
    """Write tasks as JSONL (atomically: a temporary file renamed into place); returns the count."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path} is a directory; give a file path for the task JSONL (for example {path / 'tasks.jsonl'})")
    return write_jsonl_atomic(path, (task.to_dict() for task in tasks), ensure_ascii=False)
