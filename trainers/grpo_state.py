"""What the GRPO loop needs around it: processes (DDP), seeds, the reference model, step metrics and
the task filter. Kept apart so that :mod:`trainers.grpo` reads as the algorithm; checkpoints are
:mod:`trainers.checkpoint_io`'s, metrics files :mod:`trainers.metrics_log`'s."""

from __future__ import annotations

import contextlib
import copy
import importlib
import math
import os
import random
from dataclasses import dataclass
from typing import Any, Callable

import torch

from wiki_sim.common.errors import UserError

# ---------------------------------------------------------------------- processes


@dataclass
class DistInfo:
    """This process's place in a ``torchrun`` job (a single process when not launched by it)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @classmethod
    def from_env(cls) -> "DistInfo":
        """Read ``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` and initialise the process group when there are several."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        info = cls(int(os.environ.get("RANK", "0")), world, int(os.environ.get("LOCAL_RANK", "0")))
        if world > 1 and not torch.distributed.is_initialized():
            backend = "nccl" if torch.cuda.is_available() else "gloo"
            if backend == "nccl":
                torch.cuda.set_device(info.local_rank)
            torch.distributed.init_process_group(backend)
        return info

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1 and torch.distributed.is_initialized()

    def device(self, name: str) -> torch.device:
        if name == "auto":
            name = "cuda" if torch.cuda.is_available() else "cpu"
        if name == "cuda":
            if not torch.cuda.is_available():
                raise UserError("device 'cuda' was asked for but CUDA is not available")
            return torch.device("cuda", self.local_rank)
        return torch.device("cpu")

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        if not self.active:
            return model
        from torch.nn.parallel import DistributedDataParallel

        device_ids = [self.local_rank] if next(model.parameters()).is_cuda else None
        return DistributedDataParallel(model, device_ids=device_ids)

    def no_sync(self, model: torch.nn.Module, last: bool) -> contextlib.AbstractContextManager:
        """Skip DDP's gradient all-reduce on every micro-batch but the last."""
        if self.active and not last:
            return model.no_sync()
        return contextlib.nullcontext()

    def all_reduce_sum(self, value: float) -> float:
        if not self.active:
            return value
        t = torch.tensor([value], dtype=torch.float64)
        torch.distributed.all_reduce(t)
        return float(t.item())

    def all_reduce_dict(self, values: dict[str, float]) -> dict[str, float]:
        if not self.active:
            return dict(values)
        keys = sorted(values)
        t = torch.tensor([values[k] for k in keys], dtype=torch.float64)
        torch.distributed.all_reduce(t)
        return dict(zip(keys, t.tolist()))

    def all_gather_object(self, obj: Any) -> list[Any]:
        if not self.active:
            return [obj]
        out: list[Any] = [None] * self.world_size
        torch.distributed.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        if self.active:
            torch.distributed.barrier()

    def destroy(self) -> None:
        if self.active:
            torch.distributed.destroy_process_group()


def seed_step(seed: int, step: int, rank: int) -> None:
    """Seed every generator from (seed, step, rank): a step samples the same whether the run was resumed or not."""
    s = (seed * 1_000_003 + step * 9_973 + rank) % (2**31)
    random.seed(s)
    torch.manual_seed(s)
    try:
        import numpy as np

        np.random.seed(s)
    except ImportError:  # numpy is optional here
        pass


def frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``model`` without gradients, in eval mode (the KL reference)."""
    ref = copy.deepcopy(model)
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


# ---------------------------------------------------------------------- metrics


def trajectory_summary(traj: Any) -> dict:
    """The numbers of one trajectory that step metrics are made of."""
    mask = list(traj.loss_mask)
    return {"reward": float(traj.reward), "length": len(traj.token_ids), "sampled": int(sum(mask)),
            "tool_calls": int(getattr(traj, "num_tool_calls", 0) or 0),
            "truncated": bool(getattr(traj, "truncated", False)),
            "correct": bool(getattr(traj, "is_correct", False)),
            "termination": str(getattr(traj, "termination", "") or "")}


def rollout_metrics(parts: list[list[dict]]) -> dict:
    """Step metrics from per-rank lists of :func:`trajectory_summary` dicts."""
    from envs.protocol import ERROR_TERMINATIONS

    rows = [r for part in parts for r in part]
    n = max(len(rows), 1)
    scored = [r for r in rows if r["termination"] not in ERROR_TERMINATIONS]  # rewards need a verdict
    rewards = [r["reward"] for r in scored]
    n_scored = max(len(scored), 1)
    mean = sum(rewards) / n_scored
    out = {
        "reward/mean": mean,
        "reward/std": math.sqrt(sum((x - mean) ** 2 for x in rewards) / n_scored),
        "reward/correct_frac": sum(r["correct"] for r in scored) / n_scored,
        "rollout/error_frac": (len(rows) - len(scored)) / n,
        "rollout/length": sum(r["length"] for r in rows) / n,
        "rollout/sampled_tokens": sum(r["sampled"] for r in rows) / n,
        "rollout/num_tool_calls": sum(r["tool_calls"] for r in rows) / n,
        "rollout/truncated_frac": sum(r["truncated"] for r in rows) / n,
        "rollout/trajectories": len(rows),
    }
    for reason in sorted({r["termination"] for r in rows if r["termination"]}):
        out[f"rollout/termination/{reason}"] = sum(r["termination"] == reason for r in rows) / n
    return out


# ---------------------------------------------------------------------- the task filter


def import_callable(spec: str) -> Callable:
    """``module:attribute`` -> the object, or a one-line error saying what was not found."""
    module_name, _, attr = spec.partition(":")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"cannot import {spec!r}: {exc}") from None
    if not callable(obj):
        raise UserError(f"{spec!r} is not callable")
    return obj
