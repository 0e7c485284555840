"""Progress bars of the training and evaluation loops (tqdm on stderr), on by default on a terminal.

``progress=None`` (the default of ``sft train``, ``grpo`` and ``eval``) means: a bar when stderr
is a terminal, none in a pipe or a log file; ``True``/``False`` force it. The bar shows steps
done of all (tqdm adds the rate and the ETA) and, after each step, the loss, the reward and the
tokens per second of what ran in this process.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Mapping

# metric key -> label on the bar (the first present of each label wins)
SHOWN = (("loss/sft", "loss"), ("loss/policy", "loss"), ("reward/mean", "reward"), ("env/accuracy", "success"),
         ("grad/norm", "grad"))


def screen() -> dict[str, int]:
    """tqdm's ``ncols`` and ``nrows``: the terminal's, or 100 x 24 where it reports none (some
    pseudo-terminals say 0 x 0, and tqdm then prints an empty bar)."""
    import shutil

    size = shutil.get_terminal_size((100, 24))
    return {"ncols": size.columns if size.columns >= 40 else 100, "nrows": size.lines if size.lines >= 5 else 24}


def enabled(flag: bool | None) -> bool:
    """``flag``, or (None) whether stderr is a terminal."""
    if flag is None:
        isatty = getattr(sys.stderr, "isatty", None)
        return bool(isatty and isatty())
    return bool(flag)


class StepBar:
    """``steps`` bar from ``start`` of ``total``; :meth:`step` after each step with its metrics and
    the tokens it processed."""

    def __init__(self, total: int, start: int = 0, desc: str = "train", show: bool | None = None,
                 unit: str = "step"):
        from tqdm import tqdm

        self.bar = tqdm(total=total, initial=start, desc=desc, unit=unit, file=sys.stderr, disable=not enabled(show),
                        mininterval=0.5, leave=True, **screen())
        self.tokens = 0
        self.started = time.perf_counter()

    def step(self, metrics: Mapping[str, Any], tokens: int = 0) -> None:
        self.tokens += max(0, int(tokens))
        postfix: dict[str, str] = {}
        for key, label in SHOWN:
            value = metrics.get(key)
            if label not in postfix and isinstance(value, (int, float)) and not isinstance(value, bool):
                postfix[label] = f"{value:.3g}"
        elapsed = time.perf_counter() - self.started
        if self.tokens and elapsed > 0:
            postfix["tok/s"] = f"{self.tokens / elapsed:.0f}"
        self.bar.set_postfix(postfix, refresh=False)
        self.bar.update(1)

    @property
    def tokens_per_second(self) -> float:
        elapsed = time.perf_counter() - self.started
        return self.tokens / elapsed if elapsed > 0 else 0.0

    def close(self) -> None:
        self.bar.close()
