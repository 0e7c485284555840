"""Reading JSONL files line by line, with errors that name the file and line."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """``(line number, decoded value)`` for each non-blank line; ``ValueError`` naming
    ``path:line`` on the first line that is not UTF-8 or not valid JSON (nesting too deep for
    the decoder included)."""
    with Path(path).open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not valid UTF-8 (byte {exc.start + 1} of the line: "
                                 f"{raw[exc.start:exc.start + 1]!r}); save the file as UTF-8") from None
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
            except RecursionError:
                raise ValueError(f"{path}:{lineno}: JSON nested too deeply to read (more than about "
                                 f"{_depth_hint()} levels of arrays or objects)") from None


def _depth_hint() -> int:
    import sys

    return sys.getrecursionlimit()
