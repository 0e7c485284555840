"""What the GRPO loop needs around it: processes (DDP), seeds, checkpoints, step metrics and task
loading. Kept apart so that :mod:`trainers.grpo` reads as the algorithm."""

from __future__ import annotations

import contextlib
import copy
import importlib
import math
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

CHECKPOINT_PREFIX = "checkpoint-"
STATE_FILE = "trainer_state.pt"


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
                raise ValueError("device 'cuda' was asked for but CUDA is not available")
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
    from envs.trajectory import ERROR_TERMINATIONS

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


# ---------------------------------------------------------------------- files


def save_model(model: torch.nn.Module, tokenizer: Any, path: Path, weights: dict | None = None) -> None:
    """``save_pretrained`` of model and tokenizer into ``path`` through ``path.tmp`` (no half-written model);
    ``weights``: the full state dict to write instead of the model's own (a sharded model's)."""
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, **({"state_dict": weights} if weights is not None else {}))
    if tokenizer is not None and hasattr(tokenizer, "save_pretrained"):
        tokenizer.save_pretrained(tmp)
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)


def save_checkpoint(out: Path, step: int, model: torch.nn.Module, tokenizer: Any, state: dict, keep: int,
                    weights: dict | None = None) -> Path:
    """``out/checkpoint-<step>``: the model (``save_pretrained``; ``weights`` instead of its own state dict
    when given: a sharded model's full one) and ``trainer_state.pt``; older ones pruned."""
    path = out / f"{CHECKPOINT_PREFIX}{step}"
    tmp = out / f"{CHECKPOINT_PREFIX}{step}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp, **({"state_dict": weights} if weights is not None else {}))
    if tokenizer is not None and hasattr(tokenizer, "save_pretrained"):
        tokenizer.save_pretrained(tmp)
    torch.save(state, tmp / STATE_FILE)  # tensors and plain data only: loaded with weights_only=True
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)
    for old in _checkpoints(out)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return path


def _checkpoints(out: Path) -> list[Path]:
    found = []
    if out.is_dir():
        for p in out.iterdir():
            suffix = p.name[len(CHECKPOINT_PREFIX):]
            if p.is_dir() and p.name.startswith(CHECKPOINT_PREFIX) and suffix.isdigit() and (p / STATE_FILE).exists():
                found.append((int(suffix), p))
    return [p for _, p in sorted(found)]


def latest_checkpoint(out: Path) -> Path | None:
    """The newest complete checkpoint directory in ``out``, or None."""
    found = _checkpoints(out)
    return found[-1] if found else None


def load_checkpoint(path: Path, model: torch.nn.Module, loader: Callable | None = None) -> dict:
    """Load the weights of ``path`` into ``model`` and return its trainer state; ``loader(model, weights)``
    replaces ``model.load_state_dict(weights, strict=False)`` (a sharded model's loader)."""
    from safetensors.torch import load_file

    from trainers.checkpoint_io import CheckpointError, load_state

    todo = f"delete {path}, or run with --no-resume"
    state = load_state(path / STATE_FILE, ("step", "bad_in_row", "pool", "optimizer", "scheduler"), todo)
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"{path}: no model weights (*.safetensors) in the checkpoint; {todo}")
    weights: dict[str, torch.Tensor] = {}
    for f in files:
        try:
            weights.update(load_file(str(f)))
        except Exception as exc:  # safetensors raises its own error type for a damaged file
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise CheckpointError(f"{f}: not a readable weights file ({first}); {todo}") from None
    try:
        missing, unexpected = (loader(model, weights) if loader is not None
                               else model.load_state_dict(weights, strict=False))
    except RuntimeError as exc:  # shapes of another model
        first = (str(exc).strip().splitlines() or [""])[-1].strip()[:200]
        raise CheckpointError(f"{path}: checkpoint does not match the model ({first}); {todo}") from None
    tied = set(getattr(model, "_tied_weights_keys", None) or [])
    if unexpected or [k for k in missing if k not in tied and "lm_head" not in k]:
        raise CheckpointError(f"{path}: checkpoint does not match the model (missing {missing[:5]}, "
                              f"unexpected {unexpected[:5]}); {todo}")
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    return state


def load_tasks(path: str) -> list[dict]:
    """Task dicts from a JSONL file; ``ValueError`` naming ``path:line`` on a bad line."""
    from envs.jsonl import iter_jsonl

    if not Path(path).is_file():
        raise FileNotFoundError(f"task file not found: {path}")
    tasks = []
    for lineno, obj in iter_jsonl(path):
        if not isinstance(obj, dict) or not isinstance(obj.get("question"), str) or "answer" not in obj:
            raise ValueError(f"{path}:{lineno}: a task needs a string 'question' and an 'answer'")
        tasks.append(obj)
    if not tasks:
        raise ValueError(f"{path}: no tasks")
    return tasks


def import_callable(spec: str) -> Callable:
    """``module:attribute`` -> the object, or a one-line error saying what was not found."""
    module_name, _, attr = spec.partition(":")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot import {spec!r}: {exc}") from None
    if not callable(obj):
        raise ValueError(f"{spec!r} is not callable")
    return obj
