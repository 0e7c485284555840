"""Reading JSONL files line by line, with errors that name the file and line."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """``(line number, decoded value)`` for each non-blank line; ``ValueError`` naming
    ``path:line`` on the first line that is not valid JSON."""
    with Path(path).open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
