"""Episode reward: ``w_format * format + w_answer * answer``.

Given once, on the episode's last step (every other step gives 0). ``format`` is 1 when
the episode ended with an answer and every assistant turn was strictly well-formed
(:attr:`envs.protocol.ParsedTurn.strict`), else 0; ``answer`` is the judge's score in
[0, 1]. A truncated episode (no answer) therefore earns 0 whatever the weights.
"""

from __future__ import annotations

import math

DEFAULT_WEIGHTS: tuple[float, float] = (0.0, 1.0)
"""(format, answer): pure correctness, as in the newest recipe (WebSailor-V2 / Tongyi DeepResearch)."""
WEBSAILOR_V1_WEIGHTS: tuple[float, float] = (0.1, 0.9)
"""(format, answer) as in WebSailor (V1): a small reward for a well-formed trajectory."""


def check_weights(weights: tuple[float, float]) -> tuple[float, float]:
    """``weights`` as a pair of finite non-negative floats; ``ValueError`` otherwise."""
    try:
        w_format, w_answer = (float(w) for w in weights)
    except (TypeError, ValueError):
        raise ValueError(f"reward_weights must be a pair (format, answer) of numbers, got {weights!r}") from None
    if not (math.isfinite(w_format) and math.isfinite(w_answer)) or w_format < 0 or w_answer < 0:
        raise ValueError(f"reward_weights must be finite and >= 0, got {weights!r}")
    return w_format, w_answer


def episode_reward(weights: tuple[float, float], format_ok: bool, answer_score: float) -> float:
    """``w_format * format_ok + w_answer * answer_score`` (``answer_score`` clipped to [0, 1])."""
    w_format, w_answer = weights
    return w_format * float(format_ok) + w_answer * min(max(float(answer_score), 0.0), 1.0)
