"""A colocated vLLM engine for GRPO rollouts (``websailor grpo --rollout-engine vllm``).

Training and generation share one GPU. The engine is built once from the starting model's folder
(``vllm.LLM(..., enable_sleep_mode=True, logprobs_mode="processed_logprobs")``, in-process, as TRL's
colocate mode does) and then, every step:

1. :meth:`ColocatedEngine.prepare`: wake the weights, push the trainer's current weights into the engine
   (:func:`weights_to_sync`, one tensor at a time, through the model's own ``load_weights``), wake the KV
   cache, drop the prefix cache (it holds keys and values of the old weights);
2. the rollout samples with :class:`trainers.policies.VLLMPolicy` on this engine: the sampled ids and
   vLLM's log-probabilities of them (temperature applied) go into the trajectories;
3. :meth:`ColocatedEngine.sleep` (level 2: weights and KV cache freed) for the update.

Level-2 sleep discards the weights, so step 1 re-pushes all of them each step: that is the sync after
every optimizer step. With LoRA the engine gets merged weights (``W + scale * B @ A`` computed per
adapted module from the live adapters; the trainer's base weights are not touched), not a
``LoRARequest``: vLLM then runs the same dense kernels as without LoRA.

:func:`make_vllm` is the real factory; tests and ``benchmarks/gpu_train.py --dry-run`` inject
:class:`trainers.engine_standin.StandInLLM` (vLLM's interface, a transformers model behind it) through
the same ``engine_factory`` argument of :class:`trainers.grpo.GRPOTrainer`.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Iterator, Literal

import torch

from trainers import lora
from wiki_sim.common.errors import UserError

RolloutEngine = Literal["hf", "vllm"]
EngineFactory = Callable[..., Any]
"""``factory(model_dir, *, seed, gpu_memory_utilization, max_model_len) -> vllm.LLM``-like object."""

INSTALL_HINT = ("--rollout-engine vllm needs vLLM on a CUDA GPU: pip install 'websailor-gym[vllm]' on a machine "
                "with an NVIDIA GPU, or use --rollout-engine hf")


def require_vllm_gpu() -> Any:
    """The ``vllm`` module; ``ValueError`` (one line, what to install) without it or without a CUDA device."""
    try:
        import vllm
    except ImportError:
        raise UserError(f"{INSTALL_HINT} (vllm is not installed)") from None
    if not torch.cuda.is_available():
        raise UserError(f"{INSTALL_HINT} (no CUDA device is visible)")
    return vllm


def make_vllm(model_dir: str, *, seed: int = 0, gpu_memory_utilization: float = 0.3, max_model_len: int = 32768,
              dtype: str = "bfloat16", model: Any = None, **engine_kwargs: Any) -> Any:
    """A colocated ``vllm.LLM`` for ``model_dir``: sleep mode on, log-probabilities of the processed
    (temperature-scaled) distribution, the engine core in this process (so its model's ``load_weights``
    is reachable), asleep on return (the first :meth:`ColocatedEngine.prepare` pushes the weights).
    ``model`` (the trainer's) is not read: the engine loads ``model_dir`` and gets the weights pushed."""
    vllm = require_vllm_gpu()
    if not model_dir:
        raise ValueError("the vLLM engine needs the starting model's folder (model.name_or_path is empty)")
    # In-process engine core and worker (TRL's colocate mode): the weights are pushed by a direct call.
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1"),
                       ("MASTER_PORT", "29517")):
        os.environ.setdefault(key, value)
    engine_kwargs.setdefault("distributed_executor_backend", "external_launcher")
    llm = vllm.LLM(model=model_dir, enable_sleep_mode=True, logprobs_mode="processed_logprobs", seed=seed,
                   gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len, dtype=dtype,
                   **engine_kwargs)
    engine_model(llm)  # reachable (in-process), or say so now rather than after the first update
    llm.sleep(level=2)
    return llm


def build(factory: EngineFactory | None, model: Any, *, seed: int, world_size: int = 1,
          gpu_memory_utilization: float = 0.3, max_model_len: int = 32768) -> "ColocatedEngine":
    """A :class:`ColocatedEngine` over ``factory(model_dir, seed=..., model=model, ...)`` (default
    :func:`make_vllm`; ``model_dir`` is the starting model's folder, ``model.name_or_path``)."""
    if world_size > 1:
        raise UserError(f"--rollout-engine vllm runs in one process for now (got {world_size} processes): "
                         "use --rollout-engine hf under torchrun")
    inner = lora.savable(model) if lora.is_lora(model) else model
    model_dir = getattr(inner, "name_or_path", None) or getattr(getattr(inner, "config", None), "_name_or_path", "")
    llm = (factory or make_vllm)(model_dir, seed=seed, model=model, gpu_memory_utilization=gpu_memory_utilization,
                                 max_model_len=max_model_len)
    return ColocatedEngine(llm)


def engine_model(llm: Any) -> Any:
    """The engine's ``torch.nn.Module`` (``.load_weights(iterable of (name, tensor))``), the path TRL uses."""
    try:
        return llm.llm_engine.model_executor.driver_worker.model_runner.model
    except AttributeError:
        raise RuntimeError("cannot reach the vLLM engine's model to push weights into: build it in-process "
                           "(VLLM_ENABLE_V1_MULTIPROCESSING=0, distributed_executor_backend='external_launcher'), "
                           "as trainers.rollout_engine.make_vllm does") from None


def _hf_name(name: str) -> str:
    """A parameter name as in the saved checkpoint (no wrapper prefixes of DDP, torch.compile, checkpointing)."""
    for prefix in ("module.", "_orig_mod."):
        name = name.removeprefix(prefix)
    return name.replace("._checkpoint_wrapped_module", "")


def weights_to_sync(model: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """``(name, tensor)`` of the weights a generation engine needs, named as in the saved checkpoint.

    A plain transformers model: its parameters (and persistent buffers are left alone: the engine
    builds its own). A peft LoRA model: each adapted module's base weight plus its live delta
    (``W + scale * B @ A``, computed here; ``W`` itself is not modified), the ``lora_*`` tensors
    skipped, the ``base_model.model.`` and ``.base_layer`` parts of the names removed."""
    if not lora.is_lora(model):
        for name, param in model.named_parameters():
            yield _hf_name(name), param.detach()
        return
    inner = lora.savable(model)
    adapted = {f"{mod_name}.base_layer.weight": module for mod_name, module in inner.named_modules()
               if callable(getattr(module, "get_delta_weight", None)) and hasattr(module, "base_layer")}
    for name, param in inner.named_parameters():
        if ".lora_" in name:
            continue
        value = param.detach()
        module = adapted.get(name)
        if module is not None:  # one delta at a time: never all of them in memory at once
            with torch.no_grad():
                for adapter in module.active_adapters:
                    if adapter in module.lora_A:
                        value = value + module.get_delta_weight(adapter).to(value.dtype)
        yield _hf_name(name).replace(".base_layer", ""), value


class ColocatedEngine:
    """A generation engine that sleeps while the trainer updates and gets the new weights when it wakes."""

    def __init__(self, llm: Any):
        self.llm = llm
        self.syncs = 0
        self.last_sync_seconds = 0.0
        self.last_sync_tensors = 0
        self.last_sync_bytes = 0
        self.awake = False

    def prepare(self, model: Any) -> None:
        """Wake the weights, push ``model``'s current weights (:func:`weights_to_sync`), wake the KV cache."""
        start = time.perf_counter()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # the update's freed blocks, before vLLM maps its weights again
        self.llm.wake_up(tags=["weights"])
        target = engine_model(self.llm)
        tensors = nbytes = 0
        for name, tensor in weights_to_sync(model):
            target.load_weights([(name, tensor)])
            tensors += 1
            nbytes += tensor.numel() * tensor.element_size()
        self.llm.wake_up(tags=["kv_cache"])
        self.llm.reset_prefix_cache()
        self.awake = True
        self.syncs += 1
        self.last_sync_seconds = time.perf_counter() - start
        self.last_sync_tensors, self.last_sync_bytes = tensors, nbytes

    def sleep(self) -> None:
        """Free the engine's weights and KV cache (level 2) so the update has the GPU."""
        if self.awake:
            self.llm.sleep(level=2)
            self.awake = False

    def policy(self, tokenizer: Any, seed: int | None = None) -> Any:
        """A :class:`trainers.policies.VLLMPolicy` sampling from this engine (prepare first)."""
        from trainers.policies import VLLMPolicy

        return VLLMPolicy(self.llm, tokenizer=tokenizer, seed=seed)

    def metrics(self) -> dict[str, float]:
        return {"engine/sync_s": self.last_sync_seconds, "engine/sync_tensors": self.last_sync_tensors,
                "engine/sync_mb": self.last_sync_bytes / 2**20, "engine/syncs": self.syncs}
