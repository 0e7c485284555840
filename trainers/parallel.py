"""Several processes (``torchrun``, ``accelerate launch``): DDP or FSDP2 for GRPO and SFT.

``ddp`` keeps a whole replica of the model, its gradients and AdamW state on every rank and
averages gradients after the backward pass. ``fsdp`` (torch FSDP2, ``fully_shard``) shards the
parameters, gradients and AdamW state across the ranks, one communication group per decoder
layer (the model's ``_no_split_modules``: ``Qwen2DecoderLayer``, ``Qwen3DecoderLayer``, ...) and
one for the rest (embeddings, final norm, LM head), as torchtitan and accelerate do: a rank holds
``1/world_size`` of the training state, plus one layer gathered at a time.

What FSDP changes around the loop, all here:

- every forward pass all-gathers each layer, so all ranks must run the same number of passes:
  :func:`pass_count` makes them equal, a rank with fewer micro-batches runs zero-loss ones;
- rollouts call ``generate`` a different number of times on each rank, so the weights are
  gathered once for the whole rollout (:func:`gathered`; memory of one full replica meanwhile,
  as DDP has all the time) and sharded again afterwards;
- with ``--dtype bfloat16`` the layers are gathered in bf16 and gradients reduced in fp32
  (``MixedPrecisionPolicy``); the sharded master weights and AdamW state stay fp32;
- checkpoints hold full (unsharded) state dicts written by rank 0, in the same format as a
  single process writes, so a run saved under FSDP resumes under DDP or alone and the other way round.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Literal

import torch

Parallel = Literal["ddp", "fsdp"]
PARALLEL_MODES = ("ddp", "fsdp")


def _dtensor() -> type:
    from torch.distributed.tensor import DTensor

    return DTensor


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules FSDP shards one by one: those whose class a transformers model names in
    ``_no_split_modules`` (its decoder layers), outermost first."""
    names: set[str] = set()
    for module in model.modules():
        names.update(getattr(module, "_no_split_modules", None) or ())
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if not layers:
        raise ValueError(f"parallel='fsdp' needs a transformers model that names its decoder layers "
                         f"(_no_split_modules); {type(model).__name__} names none: use --parallel ddp")
    return layers


def check_supported(parallel: str, *, lora: bool) -> None:
    """One-line errors for what FSDP here does not do."""
    if parallel not in PARALLEL_MODES:
        raise ValueError(f"parallel must be one of {list(PARALLEL_MODES)}, got {parallel!r}")
    if parallel == "fsdp" and lora:
        raise ValueError("LoRA with --parallel fsdp is not supported (the merged final model needs the unsharded "
                         "base); LoRA trains little state per rank: use --parallel ddp")


def wrap(model: torch.nn.Module, dist: Any, parallel: Parallel, dtype: str = "float32") -> torch.nn.Module:
    """``model`` ready for ``dist``'s processes: unchanged for one process, a ``DistributedDataParallel``
    for ``ddp``, sharded in place (and returned) for ``fsdp``. Call it after moving the model to its
    device, enabling gradient checkpointing and adding adapters, before building the optimizer."""
    if not dist.active:
        return model
    if parallel == "ddp":
        return dist.wrap(model)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
              if dtype == "bfloat16" else MixedPrecisionPolicy())
    # the mesh on the model's device: FSDP's default mesh is CUDA whenever a GPU is visible, --device cpu or not
    mesh = init_device_mesh(next(model.parameters()).device.type, (dist.world_size,))
    for layer in decoder_layers(model):
        fully_shard(layer, mp_policy=policy, mesh=mesh)
    fully_shard(model, mp_policy=policy, mesh=mesh)
    return model


def is_sharded(model: torch.nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def _fsdp_modules(model: torch.nn.Module) -> list[Any]:
    from torch.distributed.fsdp import FSDPModule

    return [m for m in model.modules() if isinstance(m, FSDPModule)]


def grad_sync(wrapped: torch.nn.Module, dist: Any, last: bool) -> contextlib.AbstractContextManager:
    """Gradient accumulation: reduce gradients over ranks only on the last micro-batch of a step."""
    if is_sharded(wrapped):
        wrapped.set_requires_gradient_sync(last)
        return contextlib.nullcontext()
    return dist.no_sync(wrapped, last)


def pass_count(model: torch.nn.Module, dist: Any, local: int, always: bool = False) -> int:
    """Forward/backward passes this rank runs in a step: its own under DDP (one gradient all-reduce at
    the end), the largest over the ranks under FSDP (each pass gathers every layer on every rank) or
    when ``always`` (a rank with nothing to train must still join DDP's all-reduce)."""
    if not (dist is not None and dist.active and (always or is_sharded(model))):
        return local
    return int(dist.all_reduce(torch.tensor([local], dtype=torch.int64), op=torch.distributed.ReduceOp.MAX).item())


@contextlib.contextmanager
def gathered(model: torch.nn.Module) -> Iterator[None]:
    """Hold the full weights on every rank for the block (rollouts: ``generate`` runs a different number
    of forward passes per rank, which per-layer gathering would deadlock); nothing for an unsharded model."""
    mods = _fsdp_modules(model)
    if not mods:
        yield
        return
    for m in mods:
        m.unshard()
        m.set_reshard_after_forward(False)
    try:
        yield
    finally:
        for m in mods:
            m.reshard()
            m.set_reshard_after_forward(True)


def clip_grad_norm(params: list[torch.Tensor], max_norm: float) -> float:
    """``clip_grad_norm_`` over every rank's gradients (a sharded model's norm is a DTensor); the global norm."""
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    if isinstance(norm, _dtensor()):
        norm = norm.full_tensor()
    return float(norm)


def _full(value: Any, keep: bool) -> Any:
    """A DTensor gathered to a CPU tensor (``None`` where ``keep`` is False); other values unchanged."""
    if isinstance(value, _dtensor()):
        full = value.full_tensor()
        return full.detach().cpu() if keep else None
    if isinstance(value, torch.Tensor):
        return value.detach().cpu() if keep else None
    return value


def model_state(model: torch.nn.Module, dist: Any) -> dict[str, torch.Tensor]:
    """The full state dict (CPU tensors) on rank 0, ``{}`` elsewhere; a collective under FSDP, so every
    rank calls it. For an unsharded model, its ``state_dict()`` on every rank."""
    if not is_sharded(model):
        return model.state_dict()
    out = {}
    for key, value in model.state_dict().items():
        full = _full(value, dist.is_main)
        if dist.is_main:
            out[key] = full
    return out


def load_model_state(model: torch.nn.Module, weights: dict[str, torch.Tensor], strict: bool = False) -> Any:
    """Load full weights (the same on every rank) into ``model``, sharding them when it is sharded;
    returns ``load_state_dict``'s missing and unexpected keys. A shape mismatch raises ``RuntimeError``."""
    if not is_sharded(model):
        return model.load_state_dict(weights, strict=strict)
    from torch.distributed.tensor import distribute_tensor

    current = model.state_dict()
    out = {}
    for key, value in weights.items():
        cur = current.get(key)
        if isinstance(cur, _dtensor()):
            if tuple(value.shape) != tuple(cur.shape):
                raise RuntimeError(f"size mismatch for {key}: copying a param with shape {tuple(value.shape)}, "
                                   f"the model has {tuple(cur.shape)}")
            value = distribute_tensor(value.to(cur.device, cur.dtype), cur.device_mesh, cur.placements)
        out[key] = value
    return model.load_state_dict(out, strict=strict)


def optimizer_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer, dist: Any) -> dict:
    """``optimizer.state_dict()`` with full tensors on rank 0 (``{}`` elsewhere) under FSDP: the same
    format a single process saves. Collective under FSDP."""
    if not is_sharded(model):
        return optimizer.state_dict()
    sd = optimizer.state_dict()
    state = {}
    for index in sorted(sd["state"]):
        state[index] = {name: _full(value, dist.is_main) for name, value in sd["state"][index].items()}
    return {"state": state, "param_groups": sd["param_groups"]} if dist.is_main else {}


def load_optimizer_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Load a full (single-process format) optimizer state, sharding it like the parameters under FSDP."""
    if not is_sharded(model):
        optimizer.load_state_dict(state)
        return
    from torch.distributed.tensor import distribute_tensor

    params = [p for group in optimizer.param_groups for p in group["params"]]
    sharded = {}
    for index, values in state["state"].items():
        p = params[int(index)]
        row = {}
        for name, value in values.items():
            if isinstance(p, _dtensor()) and isinstance(value, torch.Tensor) and tuple(value.shape) == tuple(p.shape):
                value = distribute_tensor(value.to(p.device, p.dtype), p.device_mesh, p.placements)
            row[name] = value
        sharded[index] = row
    optimizer.load_state_dict({"state": sharded, "param_groups": state["param_groups"]})
