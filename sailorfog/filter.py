"""Data-policy filter for training: keep the tasks of useful difficulty by measured pass rate.

A task every rollout solves teaches nothing (zero advantage in every group), nor does one
no rollout solves; :func:`filter_by_pass_rate` drops both, from rollout trajectory records
(``{"task": {"id", ...}, "is_correct"}``, the trajectory JSONL of the rollout module).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from wiki_sim.common.errors import UserError
from wiki_sim.common.jsonl import write_jsonl_atomic


def pass_rates(trajectories: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, int]]:
    """task id -> (rollouts, correct rollouts)."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for record in trajectories:
        task = record.get("task") or {}
        task_id = task.get("id") if isinstance(task, Mapping) else None
        task_id = task_id if task_id is not None else record.get("id")
        if task_id is None:
            raise UserError("a trajectory record has neither task.id nor id")
        counts[str(task_id)][0] += 1
        counts[str(task_id)][1] += bool(record.get("is_correct"))
    return {k: (v[0], v[1]) for k, v in counts.items()}


def filter_by_pass_rate(tasks: Iterable[Mapping[str, Any]], rates: Mapping[str, tuple[int, int]],
                        min_rate: float = 0.0, max_rate: float = 1.0, min_rollouts: int = 1,
                        keep_unmeasured: bool = False) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The tasks whose pass rate is strictly between ``min_rate`` and ``max_rate`` (measured on at
    least ``min_rollouts`` rollouts), and counts of why the others went."""
    if not 0.0 <= min_rate < max_rate <= 1.0:
        raise ValueError(f"expected 0 <= min_rate < max_rate <= 1, got {min_rate} and {max_rate}")
    kept, why = [], {"kept": 0, "all_solved": 0, "none_solved": 0, "unmeasured": 0}
    for task in tasks:
        n, k = rates.get(str(task.get("id")), (0, 0))
        if n < min_rollouts:
            reason = "kept" if keep_unmeasured else "unmeasured"
        else:
            rate = k / n
            reason = "all_solved" if rate >= max_rate else "none_solved" if rate <= min_rate else "kept"
        why[reason] += 1
        if reason == "kept":
            kept.append({**task, "pass_rate": round(k / n, 4) if n else None})
    return kept, why


@dataclass
class FilterConfig:
    """Keep the tasks that some but not all rollouts solve (measured pass rate strictly inside
    (min-rate, max-rate)); write them with their pass rate."""

    tasks: str = field(metadata={"positional": True})
    """Task JSONL (from `websailor synth`)."""
    trajectories: list[str] = field(metadata={"flag": "--trajectories"})
    """Rollout trajectory JSONL file(s) with task ids and is_correct."""
    out: str = field(metadata={"flag": "--out"})
    """Filtered task JSONL to write."""
    min_rate: float = 0.0
    """Drop tasks solved by this share of rollouts or fewer."""
    max_rate: float = 1.0
    """Drop tasks solved by this share of rollouts or more."""
    min_rollouts: int = 2
    """Rollouts a task needs for its pass rate to count."""
    keep_unmeasured: bool = False
    """Keep tasks with too few rollouts instead of dropping them."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_rate < self.max_rate <= 1.0:
            raise ValueError(f"expected 0 <= --min-rate < --max-rate <= 1, got {self.min_rate} and {self.max_rate}")
        if self.min_rollouts < 1:
            raise ValueError(f"--min-rollouts must be >= 1, got {self.min_rollouts}")
        for path in [self.tasks, *self.trajectories]:
            if not Path(path).is_file():
                raise ValueError(f"file not found: {path}")


def run_filter(config: FilterConfig) -> dict[str, int]:
    from wiki_sim.common.jsonl import iter_jsonl

    rates = pass_rates(record for path in config.trajectories for _, record in iter_jsonl(path))
    tasks = [record for _, record in iter_jsonl(config.tasks)]
    kept, why = filter_by_pass_rate(tasks, rates, config.min_rate, config.max_rate, config.min_rollouts,
                                    config.keep_unmeasured)
    out = Path(config.out)
    write_jsonl_atomic(out, kept, ensure_ascii=False, sort_keys=True)
    print(json.dumps({**why, "out": str(out)}, sort_keys=True))
    return why
