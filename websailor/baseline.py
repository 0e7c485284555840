"""``websailor env baseline``: the scripted baselines of :mod:`envs.cli`, plus the main job's gold agent.

``--policy gold`` plays :class:`websailor.recipe.GoldAgent` (it knows the answer: it searches the question's
quoted words, then answers with the hit that is the answer), in the compact setting (``--compact`` is
implied), so that ``--out`` writes exactly the gold trajectories the main job trains SFT on
(:func:`websailor.recipe.gold_trajectories`); episodes whose answer is wrong are written too and marked
``is_correct: false`` (``websailor sft train`` drops them by default). The command lives here, not in
``envs``, because imports flow ``envs`` <- ``websailor``: the environments know nothing of the recipe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from envs.cli import BaselineConfig as EnvBaselineConfig
from envs.cli import run_baseline as run_env_baseline


@dataclass
class BaselineConfig(EnvBaselineConfig):
    """Play a baseline policy on every task of a file in the simulator environment
    (websailor/WikiSim-v0), print its success rate, and write the trajectories. `--policy gold --out F`
    writes the compact gold trajectories the main job trains SFT on."""

    policy: Literal["heuristic", "random", "gold"] = "heuristic"
    """Which baseline to play: the scripted heuristic, random turns, or the gold agent (knows the answer;
    searches the quoted words and answers with the hit that is the answer; implies --compact)."""

    def __post_init__(self) -> None:
        if self.policy == "gold":
            self.compact = True
        super().__post_init__()


def run_baseline(config: BaselineConfig) -> dict:
    if config.policy != "gold":
        return run_env_baseline(config)
    from websailor.recipe import GoldAgent

    return run_env_baseline(config, agent_for_task=GoldAgent)
