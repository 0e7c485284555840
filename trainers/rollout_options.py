"""Options that every command playing episodes shares, declared once.

:class:`SamplingOptions` (how a turn is sampled: ``max_new_tokens``, ``temperature``,
``top_p``) and :class:`EpisodeOptions` (those plus the tool-call budget) are keyword-only
dataclass bases: :class:`trainers.rollout.RolloutConfig`, :class:`trainers.grpo.GRPOConfig`,
:class:`trainers.eval.EvalConfig` and :class:`websailor.pipeline.PipelineConfig` inherit
them, each field with its one docstring (the CLI's help) and one validation; a command that
wants another default redeclares the field with its default only. :class:`EnvOptions` is
how ``websailor grpo`` and ``websailor eval`` name the environment they build: the same
``--env-id``, ``--wiki-dir`` and ``--env-kwargs``, parsed and checked the same way
(:meth:`EnvOptions.env_options`).

Standard library only: the CLI imports a config's module to build its parser.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, ClassVar

SIMULATOR_ID = "websailor/WikiSim-v0"


def check_sampling(max_new_tokens: int, temperature: float, top_p: float) -> None:
    """``ValueError`` saying expected vs actual for a bad sampling setting."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be >= 0 (0 is greedy), got {temperature!r}")
    if not (isinstance(top_p, (int, float)) and 0 < top_p <= 1):
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")


@dataclass(kw_only=True)
class SamplingOptions:
    """How each assistant turn is sampled."""

    max_new_tokens: int = 2048
    """Tokens the policy may sample per assistant turn."""
    temperature: float = 1.0
    """Sampling temperature (0: greedy; RL rollouts sample at 1.0, the paper's evaluation at 0.85)."""
    top_p: float = 1.0
    """Nucleus sampling mass (RL rollouts: 1.0; the paper's evaluation: 0.95)."""

    def __post_init__(self) -> None:
        check_sampling(self.max_new_tokens, self.temperature, self.top_p)


@dataclass(kw_only=True)
class EpisodeOptions(SamplingOptions):
    """Sampling, and the environment's tool-call budget."""

    max_tool_calls: int = 100
    """Tool-call budget per episode (the environment's ``max_tool_calls``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.max_tool_calls, bool) or not isinstance(self.max_tool_calls, int) or self.max_tool_calls < 1:
            raise ValueError(f"max_tool_calls must be a positive integer, got {self.max_tool_calls!r}")


@dataclass(kw_only=True)
class EnvOptions:
    """The environment a command builds (``gym.make(env_id, **env_options())``)."""

    env_id: str = SIMULATOR_ID
    """Environment id for ``gym.make`` (``module:Name-vN`` imports ``module`` first)."""
    wiki_dir: str | None = None
    """Simulator directory (``websailor/WikiSim-v0``); the same as ``--env-kwargs '{"wiki_dir": DIR}'``."""
    env_kwargs: str = "{}"
    """JSON object of further keyword arguments for ``gym.make`` (e.g. ``{"tools": ["search", "visit"]}``)."""

    own_options: ClassVar[dict[str, str]] = {"max_tool_calls": "--max-tool-calls", "tasks": "the task file"}
    """``gym.make`` arguments that ``env_kwargs`` may not name, as the command sets each from its own option."""

    def __post_init__(self) -> None:
        self.env_options()

    def env_options(self) -> dict[str, Any]:
        """``--env-kwargs`` as a dict, with ``--wiki-dir`` as its ``wiki_dir``; ``ValueError`` saying expected
        vs actual when it is not a JSON object, names an argument that has its own option, or gives another
        ``wiki_dir`` than ``--wiki-dir``."""
        try:
            kwargs = json.loads(self.env_kwargs)
        except (TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"env_kwargs must be a JSON object, got {self.env_kwargs!r} "
                             f"({getattr(exc, 'msg', exc)})") from None
        if not isinstance(kwargs, dict):
            raise ValueError(f"env_kwargs must be a JSON object, got {type(kwargs).__name__}")
        for key, option in self.own_options.items():
            if key in kwargs:
                raise ValueError(f"env_kwargs must not name {key!r} (got {kwargs[key]!r}): it comes from {option}")
        if self.wiki_dir:
            if kwargs.get("wiki_dir", self.wiki_dir) != self.wiki_dir:
                raise ValueError(f"--wiki-dir {self.wiki_dir!r} and env_kwargs' wiki_dir {kwargs['wiki_dir']!r} "
                                 "disagree: give the simulator directory once")
            kwargs["wiki_dir"] = self.wiki_dir
        return kwargs

    def require_simulator(self) -> None:
        """``ValueError`` when the simulator environment has no simulator directory."""
        if self.env_id == SIMULATOR_ID and not self.env_options().get("wiki_dir"):
            raise ValueError(f"--wiki-dir is required for {SIMULATOR_ID} (or \"wiki_dir\" in --env-kwargs)")
