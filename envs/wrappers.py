"""Wrappers the environment factories apply: a wall-clock limit per episode.

As in Gymnasium (``TimeLimit``), the environment implements only its dynamics; limits are
wrappers. :class:`EpisodeTimeLimit` bounds an episode's wall-clock time (tool calls, and
whatever the agent spends between steps), so that one stuck episode cannot hold a training
step. A single step that hangs is bounded by the per-tool-call deadlines, not here.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import gymnasium as gym

from envs.protocol import Termination

TIME_LIMIT: Termination = "time_limit"
"""``info["termination"]`` of an episode ended by :class:`EpisodeTimeLimit`."""


def check_seconds(value: Any, name: str = "max_episode_seconds") -> float | None:
    """``value`` as a positive finite number of seconds, or ``None`` (no limit)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number of seconds or None, got {value!r}")
    return float(value)


class EpisodeTimeLimit(gym.Wrapper):
    """Truncates an episode once ``max_episode_seconds`` of wall-clock time have passed since
    its reset: the step that crosses the limit returns ``truncated=True``, reward 0 and
    ``info["termination"] = "time_limit"`` (unless that step ended the episode anyway), and
    the next call must be ``reset``.

    ``clock`` (default :func:`time.monotonic`) is injectable for tests.
    """

    def __init__(self, env: gym.Env, max_episode_seconds: float, clock: Callable[[], float] = time.monotonic):
        super().__init__(env)
        self.max_episode_seconds = check_seconds(max_episode_seconds)
        if self.max_episode_seconds is None:
            raise ValueError("max_episode_seconds must be a positive number of seconds, got None")
        self._clock = clock
        self._start: float | None = None

    @property
    def elapsed_seconds(self) -> float:
        """Seconds since the episode's reset (0 before the first)."""
        return 0.0 if self._start is None else self._clock() - self._start

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self._start = self._clock()
        info["max_episode_seconds"] = self.max_episode_seconds
        return obs, info

    def step(self, action):
        if self._start is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        obs, reward, terminated, truncated, info = self.env.step(action)
        elapsed = self.elapsed_seconds
        if not (terminated or truncated) and elapsed >= self.max_episode_seconds:
            info.update(termination=TIME_LIMIT, episode_format_ok=False, episode_seconds=elapsed)
            self._start = None
            return "", 0.0, False, True, info
        if terminated or truncated:
            info["episode_seconds"] = elapsed  # only at the end: a step's info stays deterministic
            self._start = None
        return obs, reward, terminated, truncated, info


def with_episode_limit(env: gym.Env, max_episode_seconds: float | None) -> gym.Env:
    """``env`` wrapped in :class:`EpisodeTimeLimit` when a limit is given, else ``env``."""
    seconds = check_seconds(max_episode_seconds)
    return env if seconds is None else EpisodeTimeLimit(env, seconds)
