"""A stand-in for the part of verl the agent-loop adapter touches, for environments without verl.

Copied in substance from volcengine/verl b178a3c (0.8.0.dev), verl/experimental/agent_loop/agent_loop.py
(``AgentLoopMetrics``, ``AgentLoopOutput``, ``DictConfigWrap``, ``AgentLoopBase.__init__``, ``register``,
``_agent_loop_registry``) and verl/workers/rollout/replica.py (``TokenOutput``): same names, fields and
registration rule (``{"_target_": f"{cls.__module__}.{cls.__qualname__}"}``), so the adapter is checked
against verl's interface, not against itself. verl itself cannot be installed beside transformers 5."""

from __future__ import annotations

import importlib
import sys
import types
from abc import ABC, abstractmethod
from typing import Any, Optional

from pydantic import BaseModel


class AgentLoopMetrics(BaseModel):
    generate_sequences: float = 0.0
    tool_calls: float = 0.0
    num_preempted: int = -1


class AgentLoopOutput(BaseModel):
    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: Optional[list[float]] = None
    routed_experts: Optional[Any] = None
    multi_modal_data: Optional[dict[str, Any]] = None
    reward_score: Optional[float] = None
    num_turns: int = 0
    metrics: AgentLoopMetrics
    extra_fields: dict[str, Any] = {}


class DictConfigWrap:
    def __init__(self, config: Any):
        self.config = config


class AgentLoopBase(ABC):
    def __init__(self, trainer_config: DictConfigWrap, server_manager: Any, tokenizer: Any, processor: Any,
                 dataset_cls: Any, dataset_config: DictConfigWrap, **kwargs: Any):
        self.config = trainer_config.config
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.processor = processor
        self.dataset_cls = dataset_cls
        self.dataset_config = dataset_config.config

    @abstractmethod
    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        raise NotImplementedError


_agent_loop_registry: dict[str, dict] = {}


def register(agent_name: str):
    def decorator(subclass: type[AgentLoopBase]) -> type[AgentLoopBase]:
        fqdn = f"{subclass.__module__}.{subclass.__qualname__}"
        _agent_loop_registry[agent_name] = {"_target_": fqdn}
        return subclass

    return decorator


class TokenOutput(BaseModel):
    token_ids: list[int]
    log_probs: Optional[list[float]] = None
    routed_experts: Optional[Any] = None
    stop_reason: Optional[str] = None
    num_preempted: Optional[int] = None


def locate(path: str) -> Any:
    """What ``hydra.utils.instantiate`` does with a ``_target_``: import the longest module prefix, then
    walk attributes (hydra ``_internal/utils.py`` ``_locate``)."""
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(f"cannot import {path!r}")


def install(monkeypatch: Any) -> types.ModuleType:
    """Put this stand-in in ``sys.modules`` as ``verl.experimental.agent_loop.agent_loop`` and
    ``verl.workers.rollout.replica`` (undone with ``monkeypatch``); returns the agent-loop module."""
    _agent_loop_registry.clear()
    names = ["verl", "verl.experimental", "verl.experimental.agent_loop", "verl.workers", "verl.workers.rollout"]
    for name in names:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    this = sys.modules[__name__]
    monkeypatch.setitem(sys.modules, "verl.experimental.agent_loop.agent_loop", this)
    monkeypatch.setitem(sys.modules, "verl.workers.rollout.replica", this)
    return this
