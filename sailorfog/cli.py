"""``websailor synth``, ``websailor synth-filter`` and ``websailor synth-report``.

Imports stay light (the dispatcher imports this module to build its parser); the
simulator, graph and environments are imported inside the run functions.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from wiki_sim.common.errors import UserError

MIN_PAGES = 10


class SynthError(UserError):
    """A problem the user can fix (printed as one line by the CLI)."""


@dataclass
class SynthConfig:
    """Synthesize SailorFog-QA-V2 tasks from a built simulator: entity graph, structurally
    distinct subgraphs, obfuscated and verified clue sets, a gold oracle trajectory each.

    Same seed and corpus give a byte-identical file. Records are appended to OUT.partial as
    they are made (a rerun resumes there) and the file is renamed to OUT when complete."""

    wiki: str = field(metadata={"flag": "--wiki"})
    """The simulator directory (built by `websailor wiki build`)."""
    out: str = field(metadata={"flag": "--out"})
    """Task JSONL file to write."""
    n: int = 100
    """Number of verified tasks to write."""
    seed: int = 0
    """Seed of every random choice (graph, subgraphs, targets, uncertainty)."""
    mode: Literal["research", "subgraph", "hop"] = "research"
    """research: answers reached through described, unnamed intermediates (SailorFog-QA style);
    subgraph: the earlier generator over a sampled entity graph, whose clues quote the pages;
    hop: the one-hop curriculum level of title lookups (sailorfog.hop: which page of a type the page
    with a short description names in its opening words, read from its search hit or its visit), every
    one the simulator has, drawn by --seed."""
    depth: int = 2
    """research mode: hidden intermediate entities on the way to the answer (1 or 2: at 1 a strong agent's
    knowledge often names the one hidden entity); 0 writes the one-hop curriculum level (entities still
    described, never quoted), for small models."""
    writer: Literal["template", "llm"] = "template"
    """Question writer: deterministic templates, or a language model over an OpenAI-compatible endpoint."""
    graph: str | None = None
    """A saved entity graph (JSON from sailorfog.graph.save_graph) to use instead of building one."""
    seeds: list[str] = field(default_factory=list)
    """Seed entities (page titles) to grow the graph from; empty: obscure pages drawn from the corpus."""
    graph_nodes: int = 300
    """Entities in the graph built from the simulator (ignored with --graph)."""
    min_nodes: int = 3
    """Smallest subgraph (entities per question)."""
    max_nodes: int = 7
    """Largest subgraph."""
    max_attempts: int | None = None
    """Attempts at most (default: 5 per requested task in subgraph mode, 400 in research mode, where most
    answers are dropped: no shared type, given away by their type and a neighbour, ambiguous, shallow, solved by
    one search; most drops cost a few milliseconds)."""
    heuristic: bool = True
    """Play the scripted heuristic agent on every task (part of its difficulty)."""
    llm_base_url: str = "http://127.0.0.1:8000/v1"
    """--writer llm: the API root of the chat-completions endpoint."""
    llm_model: str = ""
    """--writer llm: the model name."""
    llm_api_key_env: str = "OPENAI_API_KEY"
    """--writer llm: environment variable holding the API key (unset: no key sent)."""
    llm_timeout: float = 60.0
    """--writer llm: seconds per request."""
    current_date: str = "2025-09-01"
    """Date in the oracle trajectories' system prompt (fixed, so output is reproducible)."""
    workers: int = 2
    """Processes that run attempts (the output does not depend on it)."""
    progress: bool = True
    """Show a progress bar on stderr."""

    def __post_init__(self) -> None:
        if self.graph_nodes < self.max_nodes:
            raise ValueError(f"--graph-nodes must be >= --max-nodes ({self.max_nodes}), got {self.graph_nodes}")
        if self.depth not in (0, 1, 2):
            raise ValueError(f"--depth must be 0, 1 or 2, got {self.depth}")
        if self.workers < 1:
            raise ValueError(f"--workers must be >= 1, got {self.workers}")
        if self.n < 1:
            raise ValueError(f"--n must be >= 1, got {self.n}")
        if not 2 <= self.min_nodes <= self.max_nodes <= 20:
            raise ValueError(f"expected 2 <= --min-nodes <= --max-nodes <= 20, got {self.min_nodes} and "
                             f"{self.max_nodes}")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(f"--max-attempts must be >= 1, got {self.max_attempts}")
        if self.writer == "llm" and not self.llm_model:
            raise ValueError("--writer llm needs --llm-model (and --llm-base-url)")
        if not (Path(self.wiki) / "build.json").is_file():
            raise ValueError(f"{self.wiki} is not a built simulator (no build.json); "
                             "build one with `websailor wiki build`")
        if self.graph is not None and not Path(self.graph).is_file():
            raise ValueError(f"graph file not found: {self.graph}")


def read_partial(path: Path, seed: int, writer: str) -> list[dict[str, Any]]:
    """The complete records of a partial output (a torn last line is cut off the file)."""
    if not path.is_file():
        return []
    records, good = [], 0
    with path.open("rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                break
            try:
                record = json.loads(raw)
            except json.JSONDecodeError:
                break
            gen = record.get("generator") or {}
            if (gen.get("seed"), gen.get("writer")) != (seed, writer):
                raise SynthError(f"{path} was written with seed {gen.get('seed')!r} and writer {gen.get('writer')!r}, "
                                 f"not {seed} and {writer!r}; delete it or pass the same --seed and --writer")
            records.append(record)
            good += len(raw)
    if good != path.stat().st_size:
        with path.open("r+b") as fh:
            fh.truncate(good)
    return records


def _make_writer(config: SynthConfig) -> Any:
    from sailorfog.writers import LLMWriter, TemplateWriter

    if config.writer == "template":
        if config.mode == "research":
            from sailorfog.prose import DescribedWriter

            return DescribedWriter()
        return TemplateWriter()
    from wiki_sim.common.chat import ChatClient

    client = ChatClient(config.llm_base_url, config.llm_model, api_key=os.environ.get(config.llm_api_key_env),
                        timeout=config.llm_timeout, max_retries=1)
    if config.mode == "research":
        from sailorfog.prose_llm import DescribedLLMWriter

        return DescribedLLMWriter(client)
    return LLMWriter(client)


def _graph(config: SynthConfig, sim: Any) -> Any:
    from sailorfog.graph import GraphConfig, build_graph, load_graph

    if config.graph is not None:
        return load_graph(config.graph)
    return build_graph(sim, GraphConfig(max_nodes=config.graph_nodes, seeds=tuple(config.seeds), seed=config.seed))


def run_synth(config: SynthConfig) -> dict[str, Any]:
    """Synthesize ``config.n`` tasks (resuming a partial file); returns the summary (printed as JSON)."""
    from sailorfog.corpus_index import open_corpus_index
    from sailorfog.parallel import Shared
    from sailorfog.sampling import sample_subgraphs
    from wiki_sim import WikiSim

    out = Path(config.out)
    partial = out.with_name(out.name + ".partial")
    if config.mode == "research":
        return run_research(config, out, partial)
    if config.mode == "hop":
        return run_hop(config, out)
    with WikiSim(config.wiki) as sim:
        pages = sim.stats()["pages"]
        if pages < MIN_PAGES:
            raise SynthError(f"{config.wiki} has {pages} page(s); synthesis needs a corpus of at least {MIN_PAGES}")
        writer = _make_writer(config)
        G = _graph(config, sim)
        if G.number_of_nodes() < config.min_nodes:
            raise SynthError(f"the entity graph has {G.number_of_nodes()} node(s), fewer than --min-nodes "
                             f"{config.min_nodes}; no subgraph can be sampled")
        subgraphs = sample_subgraphs(G, config.max_attempts or 5 * config.n, min_nodes=config.min_nodes,
                                     max_nodes=config.max_nodes, seed=config.seed)
        if not subgraphs:
            raise SynthError(f"no connected subgraph of {config.min_nodes}-{config.max_nodes} nodes in the entity "
                             f"graph ({G.number_of_nodes()} nodes, {G.number_of_edges()} edges)")
        index = open_corpus_index(sim)  # built once per simulator, memory-mapped
        aliases = {t: sim.aliases(t) for t in sorted({n for s in subgraphs for n in s.nodes})}
        corpus = str((sim.build_info.get("source_fingerprint") or {}).get("sha256", ""))[:16]
    done = read_partial(partial, config.seed, config.writer)
    shared = Shared(G, index, writer, config.seed, aliases, config.heuristic, config.wiki, config.current_date,
                    corpus)
    summary = _loop(config, shared, subgraphs, done, partial)
    if summary["tasks"] >= config.n or summary["attempts"] >= len(subgraphs):
        os.replace(partial, out)
        summary["out"] = str(out)
    if summary["tasks"] == 0:
        raise SynthError(f"no task passed verification in {summary['attempts']} subgraph(s): "
                         f"{summary['dropped']}")
    if summary["tasks"] < config.n:
        print(f"websailor synth: warning: {summary['tasks']} of {config.n} tasks: every one of the "
              f"{len(subgraphs)} distinct subgraphs was tried (a larger --graph-nodes or --max-attempts gives more)",
              file=sys.stderr)
    print(json.dumps(summary, sort_keys=True))
    return summary


def run_hop(config: SynthConfig, out: Path) -> dict[str, Any]:
    """Hop mode: up to ``--n`` one-hop tasks (:mod:`sailorfog.hop`), written at once."""
    from sailorfog.hop import derive_hop_tasks
    from wiki_sim.common.jsonl import atomic_write_text

    tasks = derive_hop_tasks(config.wiki, config.n, seed=config.seed)
    if not tasks:
        raise SynthError(f"no page of {config.wiki} gives a one-hop task (a unique short description and opening "
                         "words that link to exactly one page of a type); use --mode research")
    atomic_write_text(out, "".join(json.dumps(t.to_dict(), ensure_ascii=False) + "\n" for t in tasks))
    summary = {"mode": "hop", "out": str(out), "tasks": len(tasks)}
    if len(tasks) < config.n:
        print(f"websailor synth: warning: {len(tasks)} of {config.n} tasks: the simulator has no more one-hop tasks",
              file=sys.stderr)
    print(json.dumps(summary, sort_keys=True))
    return summary


def run_research(config: SynthConfig, out: Path, partial: Path) -> dict[str, Any]:
    """Research mode: answers from the whole store, drawn against popularity, each written at most once."""
    from sailorfog.corpus_index import open_corpus_index
    from sailorfog.parallel import Shared
    from sailorfog.research import answer_order
    from wiki_sim import WikiSim

    with WikiSim(config.wiki) as sim:
        pages = sim.stats()["pages"]
        if pages < MIN_PAGES:
            raise SynthError(f"{config.wiki} has {pages} page(s); synthesis needs a corpus of at least {MIN_PAGES}")
        if not ((sim.build_info or {}).get("counts") or {}).get("links_resolved"):
            raise SynthError(f"{config.wiki} has no links between pages, and research tasks follow links; rebuild "
                             "it with derived links (`websailor wiki build`)")
        index = open_corpus_index(sim)  # built once per simulator, memory-mapped
        corpus = str((sim.build_info.get("source_fingerprint") or {}).get("sha256", ""))[:16]
    order = answer_order(index, config.seed)
    if not order:
        raise SynthError(f"no page of {config.wiki} has both a defining first sentence (\"X is a ...\") and a link; "
                         "research tasks need both")
    order = order * RESEARCH_PASSES  # a later pass draws other neighbours and clues; a written answer repeats
    limit = min(len(order), config.max_attempts or RESEARCH_ATTEMPTS_PER_TASK * config.n)
    subgraphs = [None] * limit
    done = read_partial(partial, config.seed, config.writer)
    shared = Shared(None, index, _make_writer(config), config.seed, {}, config.heuristic, config.wiki,
                    config.current_date, corpus, mode="research", depth=config.depth)
    shared.targets = [index.titles[pid] for pid in order[:limit]]
    summary = _loop(config, shared, subgraphs, done, partial)
    return _finish(config, summary, partial, out, limit)


RESEARCH_ATTEMPTS_PER_TASK = 400
"""Research mode's default attempt budget per requested task."""
RESEARCH_PASSES = 3
"""Research mode draws every answer up to this many times, in passes over the answer order: an attempt
dropped for a chance reason (a second answer, too short) may pass with other neighbours and clues, and a
task whose answer was written before is dropped as ``repeated``. On the default corpus, seed 0, 60 asked:
one pass wrote 41 tasks in 4,191 attempts, two 55 in 8,382, three all 60 in 9,961."""


# What to try when most attempts end for a reason (the reason's prefix, as counted in "dropped").
_ADVICE = {
    "no type": "few answers' first sentences define a type (\"X is a ...\") that enough other pages share: a "
               "larger --max-attempts, a corpus with more pages of each kind, or --mode subgraph (needs no types; "
               "its clues quote the pages)",
    "no relation": "few answers link to a typed page through a sentence: a larger --max-attempts, a corpus with more "
                   "links between its pages (`websailor wiki build` derives them), or --mode subgraph",
    "given away": "the answer's type searched with the title of any page it links to finds it (typical of a "
                  "small corpus, where few pages compete): a larger corpus or --max-attempts",
    "not unique": "the clues leave several candidates: a corpus with more distinct pages, or --depth 0",
    "second answer": "a plain reading of the corpus accepts a second answer: a corpus with more distinct pages, "
                     "or --depth 0",
    "shallow": "the answer's own clues single it out, so nothing is hidden on the way to it (a small corpus has "
               "few look-alikes): --depth 0 writes the one-hop level, which does not need them",
    "shortcut": "one search of the question finds the answer (a small corpus has few competing pages): a larger "
                "corpus, or --depth 0",
    "oracle": "the scripted oracle could not replay the clues through the environment: a larger --max-attempts",
    "short": "the questions came out too short: --depth 0 accepts shorter ones",
    "long": "the questions came out too long (a dense corpus ties many entities together): --depth 1",
    "leak": "the writer could not avoid naming an entity: a larger --max-attempts",
    "quote": "the writer could not avoid copying page text: a larger --max-attempts",
    "writer": "the writer failed: see the reasons in \"dropped\"",
}


def drop_advice(dropped: dict[str, int], *, depth: int = 2) -> str:
    """What to try, from the reasons the attempts were dropped (the two most frequent that have advice);
    ``depth``: the research mode's --depth (advice to use --depth 0 is left out when it is already 0)."""
    tips = []
    for reason, count in sorted(dropped.items(), key=lambda kv: (-kv[1], kv[0])):
        key = next((k for k in _ADVICE if reason.startswith(k)), None)
        if key is None:
            continue
        tip = _ADVICE[key]
        if depth == 0:
            tip = tip.replace(", or --depth 0", "").replace(": --depth 0 writes the one-hop level, which does not "
                                                             "need them", "")
        tips.append(f"{count} x {reason}: {tip}")
        if len(tips) == 2:
            break
    return "; ".join(tips) if tips else "see the reasons above"


def _finish(config: SynthConfig, summary: dict[str, Any], partial: Path, out: Path, limit: int) -> dict[str, Any]:
    if summary["tasks"] >= config.n or summary["attempts"] >= limit:
        os.replace(partial, out)
        summary["out"] = str(out)
    if summary["tasks"] == 0:
        raise SynthError(f"no task passed verification in {summary['attempts']} attempt(s): {summary['dropped']}. "
                         f"What to try: {drop_advice(summary['dropped'], depth=config.depth)}")
    if summary["tasks"] < config.n:
        print(f"websailor synth: warning: {summary['tasks']} of {config.n} tasks after {summary['attempts']} "
              f"attempts (a larger --max-attempts or corpus gives more; most were dropped as "
              f"{drop_advice(summary['dropped'], depth=config.depth)})", file=sys.stderr)
    print(json.dumps(summary, sort_keys=True))
    return summary


def _jobs(config: SynthConfig, shared: Any, subgraphs: list, start: int) -> list[tuple[int, Any, str, int]]:
    """(index, subgraph, target, orbit) of every attempt from ``start`` on; targets are chosen for
    all attempts from 0, in order, so the balancing over orbits is the same after a resume."""
    from sailorfog.orbits import choose_target
    from sailorfog.synth import attempt_rng

    if getattr(shared, "targets", None) is not None:
        return [(i, None, t, 0) for i, t in enumerate(shared.targets) if i >= start]
    counts: Counter = Counter()
    jobs = []
    for i, subgraph in enumerate(subgraphs):
        target, orbit = choose_target(subgraph, shared.G, counts, attempt_rng(config.seed, i))
        if i >= start:
            jobs.append((i, subgraph, target, orbit))
    return jobs


def _loop(config: SynthConfig, shared: Any, subgraphs: list, done: list[dict], partial: Path) -> dict[str, Any]:
    from sailorfog.parallel import run_attempts
    from wiki_sim.common.chat import ChatError

    from sailorfog.research import repeats, task_entities

    resume_at = done[-1]["generator"]["index"] + 1 if done else 0
    research = getattr(shared, "mode", "") == "research"
    written = [task_entities(record) for record in done] if research else []
    kept, attempts, dropped = len(done), resume_at, Counter()
    bar = _progress(config, kept)
    outcomes = run_attempts(shared, _jobs(config, shared, subgraphs, resume_at), config.workers)
    try:
        with partial.open("a", encoding="utf-8") as fh:
            while kept < config.n:
                try:
                    outcome = next(outcomes)
                except StopIteration:
                    break
                except ChatError as exc:
                    raise SynthError(f"the LLM endpoint failed ({exc}); {kept} task(s) kept in {partial}") from None
                attempts = outcome.index + 1
                if outcome.record is None:
                    dropped[outcome.reason.split(":")[0]] += 1
                    continue
                if research:
                    why = repeats(outcome.record, written)
                    if why is not None:
                        dropped[why.split(":")[0]] += 1
                        continue
                    written.append(task_entities(outcome.record))
                fh.write(json.dumps(outcome.record, ensure_ascii=False, sort_keys=True) + "\n")
                fh.flush()
                kept += 1
                if bar is not None:
                    bar.update(1)
    finally:
        outcomes.close()
        if bar is not None:
            bar.close()
    return {"tasks": kept, "attempts": attempts, "resumed_from": resume_at, "dropped": dict(sorted(dropped.items()))}


def _progress(config: SynthConfig, initial: int) -> Any:
    if not config.progress:
        return None
    from tqdm import tqdm

    return tqdm(total=config.n, initial=initial, desc="synth", unit="task", file=sys.stderr)
