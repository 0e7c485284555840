"""One episode, from reset to the end: the loop every caller that plays an environment shares.

:func:`run_episode` resets an environment (a Gymnasium env, wrapped or not) with a task,
asks an :class:`Agent` for each turn and steps until the environment says the episode is
over; it returns an :class:`Episode`, whose :meth:`Episode.record` is the trajectory JSONL
record (:mod:`envs.trajectory`). Scripted agents (:mod:`envs.baselines`), the live web's
offline demo, synthesis's difficulty checks and the trainers' one-episode-at-a-time
players (a model wrapped as an agent) all go through it.

The trainers' batched rollouts (:mod:`trainers.rollout`) run many episodes at once, with
one batched generation over every episode waiting for the model, so they keep their own
scheduling loop; what an episode's end means is shared from here: how its termination
reads (:func:`termination_of`, :func:`ended_without_answer`), what an exception makes of it
(:func:`failure_info`), how a final answer cut off by the token limit is scored
(:func:`cut_answer`), and how the transcript is read through wrappers (:func:`transcript`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple, Protocol

from envs.protocol import Termination
from envs.tasks import Task
from envs.trajectory import trajectory_record

MAX_ERROR_CHARS = 500
"""Longest error text kept in an episode's ``info["error"]``."""


class Agent(Protocol):
    """What plays an episode turn by turn over the environment's text observations: a scripted
    agent, or a model wrapped as one. (The trainers' :class:`trainers.policies.Policy` is the
    batched token-in, token-out generator underneath a model; it is not an agent.)"""

    name: str

    def reset(self, obs: str, info: dict[str, Any]) -> None:
        """Start an episode from the first prompt."""

    def act(self, obs: str, info: dict[str, Any]) -> str:
        """The next turn, given the last observation."""


class AgentError(RuntimeError):
    """An agent could not produce a turn for a reason that says nothing about its skill (a policy
    endpoint down or too slow): the episode ends with ``termination="policy_error"``."""


class Step(NamedTuple):
    """What one ``env.step`` returned."""

    obs: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


@dataclass
class Episode:
    """A played episode: its task, transcript, total reward and last ``info``."""

    task: Task
    messages: list[dict[str, str]]
    """The ChatML transcript as the environment kept it."""
    reward: float
    """The sum of the step rewards."""
    info: dict[str, Any]
    """The last step's ``info`` (``termination``, ``is_correct``, ``num_tool_calls``, ...)."""
    turns: int
    """Turns the agent played."""
    finished: bool
    """False when ``max_turns`` stopped the episode before the environment ended it."""

    @property
    def termination(self) -> str:
        return termination_of(self.info)

    @property
    def is_correct(self) -> bool:
        return bool(self.info.get("is_correct", False))

    @property
    def num_tool_calls(self) -> int:
        return int(self.info.get("num_tool_calls", 0))

    def record(self, policy: str) -> dict[str, Any]:
        """The trajectory JSONL record (:func:`envs.trajectory.trajectory_record`); ``ValueError`` for an
        episode that did not finish."""
        return trajectory_record(self.task, self.messages, self.reward, self.info, policy)


def termination_of(info: Mapping[str, Any]) -> str:
    """An ended episode's termination reason (``unknown`` where the environment named none)."""
    return str(info.get("termination") or "unknown")


def ended_without_answer(termination: str) -> bool:
    """Whether an episode that ended this way is truncated (no final answer)."""
    return termination != "answer"


def failure_info(info: Mapping[str, Any], exc: BaseException) -> dict[str, Any]:
    """``info`` of an episode that an exception ended: ``policy_error`` when the agent (or policy)
    could not answer (:class:`AgentError`), ``env_error`` otherwise; the error's text kept, bounded."""
    reason: Termination = "policy_error" if isinstance(exc, AgentError) else "env_error"
    return {**info, "termination": reason, "error": f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]}


def cut_answer(reward: float, info: Mapping[str, Any]) -> tuple[float, dict[str, Any]]:
    """Score an episode whose final answer came from a turn the generation limit cut off (``<answer>Par``:
    the model never finished it) as one without an answer: reward 0, not correct, ``token_limit``; the
    environment's verdict is kept in ``info["cut_answer"]``. Other episodes come back unchanged."""
    if info.get("termination") != "answer":
        return reward, dict(info)
    return 0.0, {**info, "termination": "token_limit", "is_correct": False,
                 "cut_answer": {"reward": reward, "is_correct": bool(info.get("is_correct"))}}


def transcript(env: Any) -> list[dict[str, str]]:
    """The environment's ChatML transcript, read through any wrappers."""
    return env.get_wrapper_attr("messages")()


def run_episode(env: Any, agent: Agent, *, options: dict[str, Any] | None = None, seed: int | None = None,
                max_turns: int | None = None, on_step: Callable[[str, Step], None] | None = None) -> Episode:
    """Play one episode of ``env`` with ``agent``: reset (``options`` name the task, e.g. ``{"task": {...}}``
    or ``{"task_index": i}``), then ``agent.act`` and ``env.step`` until ``terminated`` or ``truncated``.

    ``max_turns`` stops after that many turns even if the episode goes on (``Episode.finished`` False).
    ``on_step(action, step)`` sees each turn and what the environment returned. An exception from the
    agent or the environment propagates (the batched rollouts record it instead: :func:`failure_info`)."""
    if max_turns is not None and (isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1):
        raise ValueError(f"max_turns must be a positive integer or None, got {max_turns!r}")
    obs, info = env.reset(seed=seed, options=options)
    agent.reset(obs, info)
    total, turns = 0.0, 0
    while max_turns is None or turns < max_turns:
        action = agent.act(obs, info)
        turns += 1
        step = Step(*env.step(action))
        obs, info = step.obs, step.info
        total += float(step.reward)
        if on_step is not None:
            on_step(action, step)
        if step.terminated or step.truncated:
            return Episode(env.get_wrapper_attr("task"), transcript(env), total, info, turns, True)
    return Episode(env.get_wrapper_attr("task"), transcript(env), total, info, turns, False)
