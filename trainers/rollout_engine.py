"""A colocated vLLM engine for GRPO rollouts (``websailor grpo --rollout-engine vllm``).

Training and generation share one GPU. The engine is built once from the starting model's folder
(``vllm.LLM(..., enable_sleep_mode=True, logprobs_mode="processed_logprobs")``, in-process, as TRL's
colocate mode does; its dtype the trainer's ``--dtype``, its ``max_model_len`` the model's own limit
unless ``--vllm-max-model-len`` sets one, its rendezvous port a free one) and then, every step:

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

import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

import torch

from trainers import lora
from wiki_sim.common.errors import UserError

RolloutEngine = Literal["hf", "vllm"]
EngineFactory = Callable[..., Any]
"""``factory(model_dir, *, seed, gpu_memory_utilization, max_model_len, dtype, model) -> vllm.LLM``-like object."""

VLLM_MIN_VERSION = "0.10.2"
"""The oldest vLLM with what :func:`make_vllm` passes (``logprobs_mode="processed_logprobs"``); the ``vllm``
extra pins TRL 1.16's tested range (0.22 to 0.31), which makes the same colocate-mode calls."""
INSTALL_HINT = ("--rollout-engine vllm needs vLLM on a CUDA GPU: pip install 'websailor-gym[vllm]' on a machine "
                "with an NVIDIA GPU, or use --rollout-engine hf")
LIMIT_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "max_sequence_length",
              "max_seq_length", "seq_len")
"""Where a transformers configuration states its longest sequence (the first present is read; vLLM reads these too)."""


def require_vllm_gpu() -> Any:
    """The ``vllm`` module; a one-line :class:`UserError` (what to install) without it, with one older than
    :data:`VLLM_MIN_VERSION`, or without a CUDA device."""
    try:
        import vllm
    except ImportError:
        raise UserError(f"{INSTALL_HINT} (vllm is not installed)") from None
    version = str(getattr(vllm, "__version__", "") or "")
    if _older(version, VLLM_MIN_VERSION):
        raise UserError(f"{INSTALL_HINT} (vllm {version} is older than {VLLM_MIN_VERSION})")
    if not torch.cuda.is_available():
        raise UserError(f"{INSTALL_HINT} (no CUDA device is visible)")
    return vllm


def _older(version: str, minimum: str) -> bool:
    """Whether ``version`` (a local part such as ``+cu129`` ignored) is below ``minimum``; False when unreadable."""
    from packaging.version import InvalidVersion, Version  # transformers' own dependency

    try:
        return Version(Version(version).base_version) < Version(minimum)
    except InvalidVersion:
        return False


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on now (bound to port 0, read, released): the engine's rendezvous port,
    so that two runs on one host do not collide."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def model_limit(config: Any) -> int | None:
    """The longest sequence a model's configuration allows: a transformers config object, a config dict, or a
    model folder (its ``config.json`` read as JSON: no weights loaded); None when it states none."""
    if isinstance(config, (str, os.PathLike)):
        path = Path(config) / "config.json"
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
    values = config if isinstance(config, dict) else config.to_dict() if hasattr(config, "to_dict") else vars(config)
    text = values.get("text_config")  # a multimodal model's language part
    if isinstance(text, dict) and not any(isinstance(values.get(k), int) for k in LIMIT_KEYS):
        return model_limit(text)
    for key in LIMIT_KEYS:
        value = values.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return _rope_scaled(value, values.get("rope_scaling") or values.get("rope_parameters"))
    return None


def _rope_scaled(limit: int, rope: Any) -> int:
    """``limit`` times a RoPE scaling factor, as vLLM derives its longest length: yarn from the original
    positions, linear and dynamic scaling from the stated ones; llama3 and longrope configurations already
    state the scaled length."""
    if not isinstance(rope, dict) or not isinstance(rope.get("factor"), (int, float)):
        return limit
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind in ("default", "su", "longrope", "llama3", "mrope"):
        return limit
    if kind == "yarn":
        limit = int(rope.get("original_max_position_embeddings") or limit)
    return int(limit * float(rope["factor"]))


def resolve_max_model_len(requested: int | None, limit: int | None,
                          where: str = "the model's configuration") -> int | None:
    """The engine's ``max_model_len``: ``requested`` (``--vllm-max-model-len``) when set, else the model's
    ``limit``; a request above the limit is a one-line :class:`UserError` (vLLM refuses it, after loading)."""
    if requested is None:
        return limit
    if limit is not None and requested > limit:
        raise UserError(f"--vllm-max-model-len {requested} is above the {limit} positions {where} allows: "
                        f"lower it, or leave it unset to take {limit}")
    return requested


def check_before_loading(model: str, max_model_len: int | None) -> None:
    """What ``websailor grpo --rollout-engine vllm`` checks before it loads a model: vLLM and a GPU are there
    (:func:`require_vllm_gpu`), and ``max_model_len`` fits the model (its folder's config.json read alone)."""
    require_vllm_gpu()
    from trainers.models import resolve_model

    folder = resolve_model(model)
    resolve_max_model_len(max_model_len, model_limit(folder), f"{folder}/config.json")


def make_vllm(model_dir: str, *, seed: int = 0, gpu_memory_utilization: float = 0.3, max_model_len: int | None = None,
              dtype: str = "float32", model: Any = None, **engine_kwargs: Any) -> Any:
    """A colocated ``vllm.LLM`` for ``model_dir``: sleep mode on, log-probabilities of the processed
    (temperature-scaled) distribution, the engine core in this process (so its model's ``load_weights``
    is reachable), asleep on return (the first :meth:`ColocatedEngine.prepare` pushes the weights).
    ``dtype`` is the trainer's compute dtype; ``max_model_len`` None lets vLLM take the model's own.
    ``model`` (the trainer's) is not read: the engine loads ``model_dir`` and gets the weights pushed."""
    vllm = require_vllm_gpu()
    if not model_dir:
        raise ValueError("the vLLM engine needs the starting model's folder (model.name_or_path is empty)")
    max_model_len = resolve_max_model_len(max_model_len, model_limit(model_dir), f"{model_dir}/config.json")
    # In-process engine core and worker (TRL's colocate mode): the weights are pushed by a direct call.
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1")):
        os.environ.setdefault(key, value)
    if os.environ.get("MASTER_PORT", "").strip() in ("", "0"):
        os.environ["MASTER_PORT"] = str(free_port())
    engine_kwargs.setdefault("distributed_executor_backend", "external_launcher")
    llm = vllm.LLM(model=model_dir, enable_sleep_mode=True, logprobs_mode="processed_logprobs", seed=seed,
                   gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len, dtype=dtype,
                   **engine_kwargs)
    engine_model(llm)  # reachable (in-process), or say so now rather than after the first update
    llm.sleep(level=2)
    return llm


def build(factory: EngineFactory | None, model: Any, *, seed: int, world_size: int = 1,
          gpu_memory_utilization: float = 0.3, max_model_len: int | None = None,
          dtype: str = "float32") -> "ColocatedEngine":
    """A :class:`ColocatedEngine` over ``factory(model_dir, seed=..., model=model, ...)`` (default
    :func:`make_vllm`; ``model_dir`` is the starting model's folder, ``model.name_or_path``), its
    ``max_model_len`` checked against the model's configuration (:func:`resolve_max_model_len`)."""
    if world_size > 1:
        raise UserError(f"--rollout-engine vllm runs in one process for now (got {world_size} processes): "
                         "use --rollout-engine hf under torchrun")
    inner = lora.savable(model) if lora.is_lora(model) else model
    model_dir = getattr(inner, "name_or_path", None) or getattr(getattr(inner, "config", None), "_name_or_path", "")
    config = getattr(inner, "config", None)
    limit = model_limit(config) if config is not None else None
    length = resolve_max_model_len(max_model_len, limit)
    llm = (factory or make_vllm)(model_dir, seed=seed, model=model, gpu_memory_utilization=gpu_memory_utilization,
                                 max_model_len=length, dtype=dtype)
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
