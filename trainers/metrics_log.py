"""The metrics files of a training run, the same for SFT and GRPO: one JSON object per step in
``<output_dir>/metrics.jsonl`` and, beside it, TensorBoard scalars in ``<output_dir>/tensorboard``.

``tensorboard`` (the ``--tensorboard`` option of ``websailor sft train`` and ``websailor grpo``):
``auto`` writes event files when the tensorboard package is installed, and otherwise says so in one
line on stderr (the metrics then go to ``metrics.jsonl`` only); ``on`` requires the package (a
``ValueError`` saying what to install); ``off`` never writes event files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Iterator, Literal

from wiki_sim.common.jsonl import atomic_write_text

TensorBoardMode = Literal["auto", "on", "off"]
TENSORBOARD_MODES = ("auto", "on", "off")
MISSING = "the tensorboard package is not installed (pip install tensorboard)"


def tensorboard_writer(log_dir: Path, mode: str) -> Any:
    """A ``SummaryWriter`` on ``log_dir``, or None (``off``, or ``auto`` without the package: one line on
    stderr says so); ``ValueError`` for ``on`` without the package."""
    if mode not in TENSORBOARD_MODES:
        raise ValueError(f"tensorboard must be one of {list(TENSORBOARD_MODES)}, got {mode!r}")
    if mode == "off":
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        if mode == "on":
            raise ValueError(f"tensorboard='on': {MISSING}; or pass --tensorboard off") from None
        print(f"metrics: {MISSING}, so metrics go to {log_dir.parent / 'metrics.jsonl'} only "
              "(--tensorboard off silences this line)", file=sys.stderr, flush=True)
        return None
    return SummaryWriter(str(log_dir))


class MetricsLogger:
    """Appends one JSON object per step (it has a ``step`` key) to ``out_dir/metrics.jsonl``, mirrored to
    TensorBoard when enabled. A run calls :meth:`truncate_after` with the step it starts from."""

    def __init__(self, out_dir: Path, tensorboard: str = "auto"):
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        self.path = out_dir / "metrics.jsonl"
        self.writer = tensorboard_writer(out_dir / "tensorboard", tensorboard)

    def log(self, metrics: dict) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(metrics, sort_keys=True) + "\n")
        if self.writer is not None:
            for key, value in metrics.items():
                if key != "step" and isinstance(value, (int, float)):
                    self.writer.add_scalar(key, value, metrics["step"])
            self.writer.flush()

    def truncate_after(self, step: int) -> None:
        """Keep only the lines of steps up to ``step`` (a resumed run redoes the later ones; a fresh run, 0,
        starts an empty file)."""
        keep = []
        if self.path.is_file():
            keep = [line for line in self.path.read_text(encoding="utf-8").splitlines()
                    if line.strip() and json.loads(line).get("step", 0) <= step]
        atomic_write_text(self.path, "".join(line + "\n" for line in keep))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def iter_metrics(path: Path) -> Iterator[dict]:
    """The step records of a ``metrics.jsonl``."""
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            yield json.loads(line)
