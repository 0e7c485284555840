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


CUDA_MISSING = "--device {device} was asked for but CUDA is not available here: use --device cpu (or auto)"


def resolve_device(name: str) -> torch.device:
    """``--device`` as a torch device: ``auto`` is CUDA when available, else the CPU; ``cuda`` (or
    ``cuda:N``) without CUDA, or a name torch does not know, is a one-line :class:`UserError`."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise UserError(f"--device {name!r} is not a torch device: use auto, cpu or cuda") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(CUDA_MISSING.format(device=name))
    return device


def backend_for(device: str) -> str:
    """The process-group backend for ``--device``: ``gloo`` on the CPU; ``cpu:gloo,cuda:nccl`` on CUDA
    (NCCL for the model's gradients, gloo for the CPU tensors of object collectives and step metrics)."""
    kind = resolve_device(device).type
    if kind == "cpu":
        return "gloo"
    name = torch.distributed.Backend.default_device_backend_map.get(kind)
    if name is None:
        raise UserError(f"--device {device}: no process-group backend for {kind} tensors; use --device cpu or cuda")
    return f"cpu:gloo,{kind}:{name}"


def backend_devices(backend: str) -> frozenset[str]:
    """The device types whose tensors ``backend`` (a name, or ``device:name`` pairs as
    ``init_process_group`` takes them) can reduce: ``nccl`` -> {cuda}; ``gloo`` -> {cpu, cuda};
    ``cpu:gloo,cuda:nccl`` -> {cpu, cuda}."""
    if ":" in backend:
        return frozenset(pair.split(":", 1)[0].strip() for pair in backend.split(",") if pair.strip())
    capability = torch.distributed.Backend.backend_capability
    return frozenset(capability.get(backend.lower(), ()))


@dataclass
class DistInfo:
    """This process's place in a ``torchrun`` job (a single process when not launched by it)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str = ""
    """The process group's backend as it was declared (``gloo``, ``cpu:gloo,cuda:nccl``); empty for one process."""

    @classmethod
    def from_env(cls, device: str = "auto") -> "DistInfo":
        """Read ``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` and, when there are several processes, start the process
        group with the backend ``device`` (``--device``) asks for (:func:`backend_for`). A group someone else
        started is kept when it holds ``device``'s tensors, else a one-line :class:`UserError`."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        info = cls(int(os.environ.get("RANK", "0")), world, int(os.environ.get("LOCAL_RANK", "0")))
        if world <= 1:
            return info
        if torch.distributed.is_initialized():
            info.backend = str(torch.distributed.get_backend_config())
            kind = resolve_device(device).type
            if kind not in backend_devices(info.backend):
                raise UserError(f"the process group was started with backend {info.backend!r}, which cannot hold "
                                f"{kind} tensors: run with --device matching it, or start it with {backend_for(device)!r}")
            return info
        info.backend = backend_for(device)
        if "nccl" in info.backend:
            torch.cuda.set_device(info.local_rank)
        torch.distributed.init_process_group(info.backend)
        return info

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1 and torch.distributed.is_initialized()

    @property
    def collective_device(self) -> torch.device:
        """Where the tensors of this class's own reductions go: the CPU when the backend holds CPU tensors
        (gloo), else this rank's GPU (a bare ``nccl`` group someone else started)."""
        if not self.backend or "cpu" in backend_devices(self.backend):
            return torch.device("cpu")
        kind = sorted(backend_devices(self.backend))[0]
        return torch.device(kind, self.local_rank)

    def check_placement(self, tensor: torch.Tensor) -> None:
        """A one-line :class:`UserError` when the backend cannot reduce ``tensor`` where it lies (a CPU
        tensor sent to NCCL fails deep inside torch with "No backend type associated with device type cpu")."""
        if self.backend and tensor.device.type not in backend_devices(self.backend):
            raise UserError(f"a collective on a {tensor.device.type} tensor cannot run on the process group's backend "
                            f"{self.backend!r}: run with --device {tensor.device.type}, or start the group with "
                            f"{backend_for(tensor.device.type)!r}")

    def all_reduce(self, tensor: torch.Tensor, op: Any = None) -> torch.Tensor:
        """``tensor`` reduced over the ranks (sum unless ``op``), on :attr:`collective_device`; unchanged alone."""
        if not self.active:
            return tensor
        t = tensor.to(self.collective_device)
        self.check_placement(t)
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM if op is None else op)
        return t

    def device(self, name: str) -> torch.device:
        """``--device`` for this rank: ``cuda`` is its local GPU (``LOCAL_RANK``); see :func:`resolve_device`."""
        device = resolve_device(name)
        if device.type == "cuda" and device.index is None:
            return torch.device("cuda", self.local_rank)
        return device

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
        return float(self.all_reduce(torch.tensor([value], dtype=torch.float64)).item())

    def all_reduce_dict(self, values: dict[str, float]) -> dict[str, float]:
        if not self.active:
            return dict(values)
        keys = sorted(values)
        t = self.all_reduce(torch.tensor([values[k] for k in keys], dtype=torch.float64))
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
