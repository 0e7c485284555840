"""A sample of GRPO's rollouts each step, for a researcher to read what the policy did.

``output_dir/rollouts/step-<n>.jsonl``: up to ``n`` trajectories of step ``n``'s rollouts in the trajectory
JSONL format (``id``, ``task``, ``messages``, ``reward``, ``is_correct``, ``termination``,
``num_tool_calls``, ``policy``) plus ``step``, ``group`` (the task's index in the step) and ``sample`` (the
rollout's index in its group); the token ids and log-probabilities are left out (the checkpoint has
the weights that sampled them). One trajectory of each group comes first, then the groups' others, so a
small sample shows several tasks. Written atomically (:func:`wiki_sim.common.jsonl.write_jsonl_atomic`);
a resumed run rewrites the steps it redoes. ``websailor report OUTPUT_DIR`` shows them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from wiki_sim.common.jsonl import write_jsonl_atomic

ROLLOUTS_DIR = "rollouts"
"""The folder under a GRPO output directory that holds the samples."""
TOKEN_FIELDS = ("prompt_ids", "token_ids", "loss_mask", "logprobs")
"""Record fields left out of a sample."""


def sample_indices(count: int, group_size: int, n: int) -> list[int]:
    """Which of ``count`` trajectories (group after group, ``group_size`` each) a sample of ``n`` takes: the
    first of every group, then the second of every group, ..."""
    group_size = max(1, group_size)
    order = sorted(range(count), key=lambda i: (i % group_size, i // group_size))
    return order[:max(0, n)]


def sample_records(trajectories: Sequence[Any], step: int, group_size: int, n: int) -> list[dict[str, Any]]:
    """The sampled trajectories' records (see the module docstring)."""
    out = []
    for i in sample_indices(len(trajectories), group_size, n):
        traj = trajectories[i]
        record = traj.to_record(timing=False) if hasattr(traj, "to_record") else dict(traj)
        for key in TOKEN_FIELDS:
            record.pop(key, None)
        record.update(step=step, group=i // max(1, group_size), sample=i % max(1, group_size))
        out.append(record)
    return out


def save_rollout_sample(out_dir: str | Path, step: int, trajectories: Sequence[Any], group_size: int,
                        n: int) -> Path | None:
    """Write ``out_dir/rollouts/step-<step>.jsonl`` (``n`` trajectories at most; nothing for ``n <= 0`` or no
    trajectory); returns its path."""
    if n <= 0 or not trajectories:
        return None
    path = Path(out_dir) / ROLLOUTS_DIR / f"step-{step}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl_atomic(path, sample_records(trajectories, step, group_size, n))
    return path
