"""Run synthesis attempts in worker processes, results in attempt order.

Every attempt depends only on ``(seed, index, subgraph, target)`` and read-only shared
state (graph, corpus index, writer), so attempts can run anywhere: workers are forked
after the state is built (sharing it copy-on-write), each opens its own environment, and
``imap`` hands results back in order, so the output does not depend on ``workers``.
"""

from __future__ import annotations

import multiprocessing
import os
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence

from sailorfog.synth import Outcome, Synthesizer
from wiki_sim.common.orphans import exit_with_parent

Job = tuple[int, Any, str, int]  # (attempt index, subgraph, target, orbit index)


@dataclass
class Shared:
    """What every attempt reads."""

    G: Any
    index: Any
    writer: Any
    seed: int
    aliases: Mapping[str, Sequence[str]]
    heuristic: bool
    wiki: str
    current_date: str
    corpus: str = ""
    mode: str = "subgraph"
    """``research`` (described chains over the whole store) or ``subgraph`` (the quoting generator)."""
    depth: int = 1
    """Research mode: hidden intermediates (0: the one-hop curriculum level)."""
    targets: list[str] | None = None
    """Research mode: the answer of each attempt, in order."""


def make_synthesizer(shared: Shared) -> Synthesizer:
    """A :class:`Synthesizer` with its own environment over the simulator."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers the environments)

    env = gym.make("websailor/WikiSim-v0", wiki_dir=shared.wiki, tasks=[{"question": "placeholder", "answer": "placeholder"}],
                   tools=["search", "visit"], current_date=shared.current_date)
    if shared.mode == "research":
        from sailorfog.research import ResearchRunner, ResearchSynthesizer

        # The environment's simulator, not a second copy (one per process: at 1M pages a copy is
        # hundreds of MB); it closes with the environment.
        synth = ResearchSynthesizer(shared.index, env.unwrapped.simulator, shared.seed, depth=shared.depth)
        return ResearchRunner(synth, env, shared.writer, shared.heuristic, shared.corpus)  # type: ignore[return-value]
    return Synthesizer(shared.G, shared.index, env, shared.writer, shared.seed, shared.aliases,
                       heuristic=shared.heuristic, corpus=shared.corpus)


def attempt(synth: Synthesizer, job: Job) -> Outcome:
    """One attempt; an unexpected error becomes a dropped attempt (an unreachable LLM endpoint does not)."""
    from wiki_sim.common.chat import ChatError

    i, subgraph, target, orbit = job
    try:
        return synth.attempt(i, subgraph, target, orbit)
    except ChatError:
        raise
    except Exception as exc:  # one bad subgraph must not end a long run
        return Outcome(i, None, f"error {type(exc).__name__}: {exc}")


_SHARED: Shared | None = None
_SYNTH: Synthesizer | None = None


def _init(parent: int) -> None:
    global _SYNTH
    assert _SHARED is not None
    exit_with_parent(parent)  # a killed synthesis leaves no worker running
    _SYNTH = make_synthesizer(_SHARED)


def _work(job: Job) -> Outcome:
    assert _SYNTH is not None
    return attempt(_SYNTH, job)


def run_attempts(shared: Shared, jobs: Iterable[Job], workers: int = 1) -> Iterator[Outcome]:
    """Outcomes of ``jobs`` in order, computed in ``workers`` processes (1: in this one)."""
    global _SHARED
    if workers <= 1:
        synth = make_synthesizer(shared)
        try:
            for job in jobs:
                yield attempt(synth, job)
        finally:
            synth.env.close()
        return
    _SHARED = shared
    pool = multiprocessing.get_context("fork").Pool(workers, initializer=_init, initargs=(os.getpid(),))
    try:
        yield from pool.imap(_work, jobs, chunksize=1)
    finally:
        pool.terminate()
        pool.join()
        _SHARED = None
