"""One research episode driven by structured tool calls instead of model text.

TRL's ``environment_factory``, OpenEnv clients and verifiers hand the environment a tool
name and an arguments object, not a whole ReAct turn. :class:`ToolEpisode` turns each such
call into the turn the environment understands (``<tool_call>\\n{json}\\n</tool_call>``, or
``<answer>...</answer>`` for the final answer) and steps a ``gym.make`` environment with it,
so every tool output, budget note, deadline and reward is exactly the environment's own.
The tool's text is returned without the ``<tool_response>`` wrapper (the caller's chat
template adds its own); notes the environment appends after it are kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

ENV_ID = "websailor/WikiSim-v0"
_OPEN, _CLOSE = "<tool_response>\n", "\n</tool_response>"


def unwrap_tool_response(content: str) -> str:
    """The text inside ``<tool_response>`` plus whatever the environment added after it."""
    if content.startswith(_OPEN):
        end = content.find(_CLOSE, len(_OPEN))
        if end >= 0:
            return content[len(_OPEN):end] + content[end + len(_CLOSE):]
    return content


@dataclass
class StepResult:
    """What one call did: the observation text and the environment's step outputs."""

    observation: str
    reward: float = 0.0
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)


class ToolEpisode:
    """A ``gym.make`` research environment played one structured call at a time.

    Args:
        env_id: the registered environment (default ``websailor/WikiSim-v0``).
        env_kwargs: keyword arguments of ``gym.make`` (``wiki_dir``, ``tasks``, ``tools``, ...).
            ``tasks`` may be omitted: each :meth:`reset` then names its task.
    """

    def __init__(self, env_id: str = ENV_ID, **env_kwargs: Any):
        import gymnasium as gym

        import envs  # noqa: F401  (registers the environments)

        self._placeholder = "tasks" not in env_kwargs
        if self._placeholder:  # the environment needs a task list to start; every reset names its own
            env_kwargs["tasks"] = [{"question": "(no task yet)", "answer": "(none)"}]
        self.env = gym.make(env_id, **env_kwargs)
        self.reward = 0.0
        self.done = True
        self.last_info: dict[str, Any] = {}
        self.question = ""

    @property
    def tool_names(self) -> list[str]:
        return [t.name for t in self.env.unwrapped.tools]

    def reset(self, task: Mapping[str, Any] | None = None, seed: int | None = None) -> str:
        """Start an episode on ``task`` (a task dict; None: the environment draws one); the question."""
        options = {"task": dict(task)} if task is not None else None
        if options is None and self._placeholder:
            raise ValueError("this episode has no task list: pass a task dict with 'question' and 'answer'")
        self.env.reset(seed=seed, options=options)
        self.reward, self.done, self.last_info = 0.0, False, {}
        self.question = self.env.unwrapped.task.question
        return self.question

    def call(self, name: str, arguments: Mapping[str, Any] | None) -> StepResult:
        """Run tool ``name`` with ``arguments`` as one turn; the tool's text without its wrapper."""
        if self.done:
            return self._over()
        if not isinstance(name, str) or not name:
            raise ValueError(f"a tool call needs a tool name, got {name!r}")
        payload = json.dumps({"name": name, "arguments": dict(arguments or {})}, ensure_ascii=False)
        return self._step(f"<tool_call>\n{payload}\n</tool_call>", unwrap=True)

    def answer(self, text: str) -> StepResult:
        """Give the final answer; the environment's judge scores it (``reward``, ``info["is_correct"]``)."""
        if self.done:
            return self._over()
        if not isinstance(text, str):
            raise ValueError(f"the answer must be a string, got {type(text).__name__}")
        return self._step(f"<answer>{text}</answer>", unwrap=False)

    def turn(self, text: str) -> StepResult:
        """Play a whole model turn in the ReAct text protocol (a text policy's action)."""
        if self.done:
            return self._over()
        if not isinstance(text, str):
            raise ValueError(f"a turn must be a string, got {type(text).__name__}")
        return self._step(text, unwrap=True)

    def _over(self) -> StepResult:
        """A call after the episode ended: refused, with reward 0 (the episode's reward was given once,
        on its last step; :attr:`reward` still holds it)."""
        return StepResult("Error: the episode is over; reset to start another.", 0.0, True,
                          {"termination": self.last_info.get("termination", ""), "episode_over": True})

    def _step(self, action: str, unwrap: bool) -> StepResult:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.done = bool(terminated or truncated)
        self.reward = float(reward) if self.done else 0.0
        self.last_info = info
        text = unwrap_tool_response(obs) if unwrap else obs
        if self.done and not text:
            text = (f"The episode is over ({info.get('termination', '')}); reward {self.reward:g}, "
                    f"correct: {bool(info.get('is_correct'))}.")
        return StepResult(text, self.reward, self.done, info)

    def close(self) -> None:
        self.env.close()
