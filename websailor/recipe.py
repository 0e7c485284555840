"""The learning recipe of the main job and the learning benchmark: which tasks, which
observations, which gold turns, which GRPO tasks; and the statistics that say whether a
difference is real.

- **Task mix** (levels): derived title lookups from the simulator (``lookup-description``:
  "which article has the short description ...", ``lookup-lead``: "which article begins with
  this sentence ...", :mod:`envs.derived_tasks`) and synthesized SailorFog-QA-V2 research
  tasks (``sailorfog``). Every task carries its ``level``; results are reported per level.
- **Compact observations** (:mod:`envs.compact`, its defaults): a short system prompt, the top 3
  hits per query with snippets cut to 80 characters, visits cut to 200 characters (same
  simulator, same formats). An episode of a title lookup
  is then about 350 tokens, which a 135M model on two CPU cores can decode and train on in
  minutes.
- **Gold turns for SFT** (:func:`gold_trajectories`): search for the first
  :data:`QUERY_WORDS` words of the question's quoted text, then answer with the hit whose
  title is the gold answer; kept only when the environment judges that answer correct
  (rejection sampling). Two short assistant turns a small model can learn to copy.
- **Few-shot baseline**: the pretrained model with the same compact prompt plus one worked
  example (:data:`FEWSHOT_SYSTEM_PROMPT`).
- **GRPO task selection** (:func:`select_grpo_tasks`): the current model's success per level
  on a probe of training tasks picks the levels whose groups are most likely to have mixed
  rewards (success nearest 1/2); tasks that then give all-equal groups are retired by the
  trainer's pool.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from typing import Any, Iterable, Mapping, Sequence

from envs.compact import COMPACT_SYSTEM_PROMPT, CompactConfig

QUERY_WORDS = 10
"""Words of the question's quoted text the gold search copies."""

FEWSHOT_EXAMPLE = (
    "\n\nExample.\nuser: Which Wikipedia article has the short description \"Capital city of France\"? "
    "Answer with the article's title.\n"
    "assistant: <think>Search for the quoted words.</think>\n<tool_call>\n"
    "{\"name\": \"search\", \"arguments\": {\"query\": [\"Capital city of France\"]}}\n</tool_call>\n"
    "user: <tool_response>\n1. [Paris](https://en.wikipedia.org/wiki/Paris)\n"
    "Paris is the capital and largest city of France.\n</tool_response>\n"
    "assistant: <think>The first hit matches.</think>\n<answer>Paris</answer>"
)
FEWSHOT_SYSTEM_PROMPT = COMPACT_SYSTEM_PROMPT + FEWSHOT_EXAMPLE
"""The few-shot baseline's system prompt: the compact prompt and one worked example."""

LEVELS = ("lookup-description", "lookup-lead", "lookup-hop", "sailorfog")
"""The task levels, easiest first; ``lookup-hop`` (one hop through a described page, read from its search
hit or its visit: :mod:`sailorfog.hop`) is the curriculum level between the lookups and the research tasks."""


def compact_env_kwargs(wiki_dir: str, *, fewshot: bool = False, max_tool_calls: int = 2) -> dict[str, Any]:
    """``gym.make("websailor/WikiSim-v0", **kwargs)`` in the compact setting (:mod:`envs.compact`; a
    second malformed turn in a row ends the episode, which keeps a model that has not learned the
    format from decoding four turns of it)."""
    system_prompt = FEWSHOT_SYSTEM_PROMPT if fewshot else COMPACT_SYSTEM_PROMPT
    return {"wiki_dir": wiki_dir,
            "compact": CompactConfig(max_tool_calls=max_tool_calls, max_format_errors=2, system_prompt=system_prompt)}


# ----------------------------------------------------------------------------- tasks


def lookup_tasks(wiki_dir: str, n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` derived title-lookup tasks, descriptions and leads alternating, each with its ``level``."""
    from envs.derived_tasks import derive_tasks

    out = []
    for task in derive_tasks(wiki_dir, n, seed=seed, kind="mixed"):
        record = task.to_dict()
        record["level"] = f"lookup-{record.get('kind', 'description')}"
        out.append(record)
    return out


def hop_tasks(wiki_dir: str, n: int, seed: int) -> list[dict[str, Any]]:
    """Up to ``n`` one-hop tasks (:mod:`sailorfog.hop`, drawn by ``seed``), level ``lookup-hop``; none when the
    simulator has none."""
    from sailorfog.hop import hop_records

    return hop_records(wiki_dir, n, seed)


def split_by_level(tasks: Sequence[dict], heldout_per_level: Mapping[str, int], seed: int
                   ) -> tuple[list[dict], list[dict]]:
    """Train and held-out splits: ``heldout_per_level[level]`` tasks of each level held out (drawn
    by ``seed``), the rest train."""
    by_level: dict[str, list[dict]] = defaultdict(list)
    for t in tasks:
        by_level[str(t.get("level", "?"))].append(t)
    train, held = [], []
    rng = random.Random(seed)
    for level in sorted(by_level):
        group = list(by_level[level])
        rng.shuffle(group)
        n_held = min(heldout_per_level.get(level, 0), len(group) - 1 if len(group) > 1 else 0)
        held += group[:n_held]
        train += group[n_held:]
    return train, held


def quoted_query(question: str) -> str:
    """The gold search query: the first :data:`QUERY_WORDS` words of the question's quoted text
    (blanks dropped), or its salient words when nothing is quoted."""
    from envs.baselines import quoted_phrases, salient_queries

    quoted = quoted_phrases(question)
    if quoted:
        return " ".join(quoted[0].split()[:QUERY_WORDS])
    return salient_queries(question, 1)[0]


def _search_turn(query: str) -> str:
    import json

    call = json.dumps({"name": "search", "arguments": {"query": [query]}}, ensure_ascii=False)
    return f"<think>Search for the quoted words.</think>\n<tool_call>\n{call}\n</tool_call>"


HOP_THOUGHT = "Hit {rank}. [{via}] names the {kind} {title}."
"""The gold answer turn's thought on a ``lookup-hop`` task read from the search (``read: "hit"``): the hit of
the described page, then the name its snippet gives, which the answer copies."""
HOP_VISIT_THOUGHT = "Hit {rank} is the page."
"""The gold visit turn's thought on a ``lookup-hop`` task whose answer the hit's snippet does not show."""
HOP_READ_THOUGHT = "[{via}] names the {kind} {title}."
"""The gold answer turn's thought after that visit."""
ANSWER_THOUGHT = "Hit {rank}. [{title}] matches."
"""The gold answer turn's thought: it repeats the chosen hit's line as the search result shows it
("1. [Minneapolis]"), which a small model copies from the observation, and the answer copies it from
the thought. On 40 held-out lookups after the main job's SFT: "Hit 1 is the article." 7/40 (the
model often answered with the search query), "Hit 1 is Minneapolis." 9/40 (it often wrote a title
of its own), this 14/40."""


def answer_turn(rank: int, title: str, via: str = "", kind: str = "") -> str:
    """The gold answer turn: ``title`` from hit ``rank``, or (``via``) read from the hit of the page ``via``
    (``rank`` 0: read from that page's visit)."""
    if not via:
        thought = ANSWER_THOUGHT.format(rank=rank, title=title)
    else:
        thought = (HOP_THOUGHT if rank else HOP_READ_THOUGHT).format(rank=rank, via=via, kind=kind, title=title)
    return f"<think>{thought}</think>\n<answer>{title}</answer>"


def _visit_turn(rank: int, url: str, kind: str) -> str:
    import json

    from sailorfog.hop import VISIT_GOAL

    call = json.dumps({"name": "visit", "arguments": {"url": [url], "goal": VISIT_GOAL.format(kind=kind)}},
                      ensure_ascii=False)
    return f"<think>{HOP_VISIT_THOUGHT.format(rank=rank)}</think>\n<tool_call>\n{call}\n</tool_call>"


def _interleave_levels(tasks: Sequence[dict]) -> list[dict]:
    """Tasks of each level taken in turn (the train split lists them level by level, and a gold set cut
    at ``limit`` must not hold one level only)."""
    by_level: dict[str, list[dict]] = defaultdict(list)
    for t in tasks:
        by_level[str(t.get("level", "?"))].append(t)
    groups = [by_level[lv] for lv in sorted(by_level)]
    return [g[i] for i in range(max((len(g) for g in groups), default=0)) for g in groups if i < len(g)]


class GoldAgent:
    """Knows the answer: searches for :func:`quoted_query`, then answers with the hit that is the answer, or
    on a ``lookup-hop`` task with the answer read from the hit of the page it goes through, or from that page's
    visit when the hit's snippet does not show it (``unknown`` when neither does: such an episode is no gold
    trajectory)."""

    name = "gold"

    def __init__(self, task: dict[str, Any]):
        self.task = task
        self.turn = 0

    def reset(self, obs: str, info: dict[str, Any]) -> None:
        self.turn = 0

    def act(self, obs: str, info: dict[str, Any]) -> str:
        from envs.baselines import parse_search_results

        self.turn += 1
        if self.turn == 1:
            return _search_turn(quoted_query(self.task["question"]))
        via = self.task.get("via")
        if self.task.get("level") == "lookup-hop" and isinstance(via, str):
            return self._hop(obs, via, str(self.task.get("type")))
        names = {self.task["answer"], *self.task.get("aliases", [])}
        results = parse_search_results(obs)
        hits = [h for h in results if h.title in names] if self.turn == 2 else []
        return answer_turn(results.index(hits[0]) + 1, hits[0].title) if hits else answer_turn(0, "unknown")

    def _hop(self, obs: str, via: str, kind: str) -> str:
        """Turn 2: answer from the via page's hit, or visit it; turn 3: answer from the visit."""
        import re

        from envs.baselines import parse_search_results
        from envs.derived_tasks import display_title

        answer = str(self.task["answer"])
        name = re.compile(rf"(?<!\w){re.escape(display_title(answer))}(?!\w)")
        if self.turn == 3:
            evidence = obs.split("Evidence in page:", 1)[1] if "Evidence in page:" in obs else ""
            return answer_turn(0, answer, via, kind) if name.search(evidence) else answer_turn(0, "unknown")
        results = parse_search_results(obs) if self.turn == 2 else []
        pages = [h for h in results if h.title == via]
        if not pages:
            return answer_turn(0, "unknown")
        rank = results.index(pages[0]) + 1
        if name.search(pages[0].snippet):
            return answer_turn(rank, answer, via, kind)
        return _visit_turn(rank, pages[0].url, kind)


def gold_trajectories(wiki_dir: str, tasks: Sequence[dict], limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` correct gold trajectories (trajectory JSONL records) of title lookups, played
    by the :class:`GoldAgent` in the compact environment (:func:`envs.episode.run_episode`)."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers the environments)
    from envs.episode import run_episode

    lookups = _interleave_levels([t for t in tasks if str(t.get("level", "")).startswith("lookup")])
    if not lookups:
        return []
    env = gym.make("websailor/WikiSim-v0", tasks=list(lookups), **compact_env_kwargs(wiki_dir))
    records: list[dict[str, Any]] = []
    try:
        for task in lookups:
            if len(records) >= limit:
                break
            episode = run_episode(env, GoldAgent(task), options={"task": task})
            if episode.is_correct:
                records.append(episode.record("gold"))
    finally:
        env.close()
    return records


# ----------------------------------------------------------------------------- statistics


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a success rate (``(0, 1)`` for ``n == 0``)."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def diff_interval(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float]:
    """95% interval of the difference of two success rates ``k1/n1 - k2/n2`` (Newcombe's hybrid
    score method from the two Wilson intervals); a difference is real when it excludes 0."""
    p1, p2 = k1 / max(n1, 1), k2 / max(n2, 1)
    (l1, u1), (l2, u2) = wilson(k1, n1), wilson(k2, n2)
    d = p1 - p2
    return (d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2))


def task_success(rows: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Per task id, the share of its scored samples that were correct (eval rows, :func:`trainers.eval.per_task_rows`);
    tasks without a scored sample are left out."""
    out = {}
    for row in rows:
        if not isinstance(row, Mapping):
            continue
        scored, correct = row.get("scored", row.get("samples")), row.get("correct", 0)
        if _is_number(scored) and _is_number(correct) and 0 <= correct <= scored and scored > 0:
            out[str(row.get("id"))] = float(correct) / float(scored)
    return out


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def paired_interval(a: Mapping[str, float], b: Mapping[str, float], *, resamples: int = 4000,
                    seed: int = 0) -> tuple[float, float, float, int]:
    """``(mean difference, low, high, tasks)``: the mean over the tasks both policies played of
    ``a[task] - b[task]``, with the 95% paired bootstrap interval (tasks resampled with replacement,
    the percentile interval; seeded, so the same files give the same interval). Pairing removes the
    between-task variance an unpaired interval carries: a task both solve or both miss adds nothing."""
    common = sorted(set(a) & set(b))
    if not common:
        return (0.0, -1.0, 1.0, 0)
    diffs = [a[t] - b[t] for t in common]
    n = len(diffs)
    mean = sum(diffs) / n
    rng = random.Random(seed)
    stats = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return (mean, stats[int(0.025 * (resamples - 1))], stats[int(math.ceil(0.975 * (resamples - 1)))], n)


def paired_verdict(low: float, high: float, min_effect: float = 0.10) -> str:
    """What a paired interval says: better, worse, not separated, or too few tasks to separate a
    difference of ``min_effect`` (an interval including 0 that is wider than that on either side)."""
    if low > 0:
        return "above 0: better"
    if high < 0:
        return "below 0: worse"
    if (high - low) / 2 > min_effect:
        return f"includes 0; too few tasks to separate a difference of {min_effect:.2f}"
    return "includes 0: not separated"


def decoding_text(summary: Mapping[str, Any]) -> str:
    """How each evaluated policy decoded, from its summary entry (temperature, top-p, samples per task),
    and what the intervals are: one line for the summary and the report."""
    groups: dict[str, list[str]] = defaultdict(list)
    for name, s in summary.items():
        if not isinstance(s, Mapping):
            continue
        temperature, k = s.get("temperature"), s.get("k") or 1
        if s.get("policy") in ("random", "heuristic"):
            kind = "baseline, no model"
        elif not _is_number(temperature):
            kind = "?"
        elif temperature == 0:
            kind = "greedy"
        else:
            top_p = s.get("top_p", 1.0)
            kind = f"sampled at temperature {temperature:g}, top-p {top_p:g}" if _is_number(top_p) else \
                f"sampled at temperature {temperature:g}, top-p ?"
        if kind != "greedy" and isinstance(k, int) and k > 1:
            kind += f", {k} samples per task"
        groups[kind].append(str(name))
    parts = "; ".join(f"{', '.join(names)}: {kind}" for kind, names in groups.items())
    return (f"decoding: {parts}. Success intervals: Wilson over episodes; differences: paired bootstrap over "
            f"tasks (a task's success is the share of its samples that were right)")


COMPARED = (("sft", "fewshot"), ("grpo", "sft"), ("grpo", "sft-greedy"), ("grpo-greedy", "sft-greedy"))
"""The differences the main job reports: what SFT adds to the pretrained model, what GRPO adds to SFT at the
evaluation's sampling, over the SFT model decoded greedily (what decoding alone gives), and greedy against greedy."""


def comparisons(eval_dir: Any, summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each of :data:`COMPARED` whose two policies were evaluated: the paired difference on the tasks
    both played, from ``eval_dir/NAME.jsonl`` (:func:`paired_interval`), or the unpaired one from the
    summary's rates when a per-task file is missing."""
    from pathlib import Path

    from wiki_sim.common.jsonl import read_jsonl

    out = []
    for a, b in COMPARED:
        sa, sb = summary.get(a), summary.get(b)
        if not (isinstance(sa, Mapping) and isinstance(sb, Mapping)):
            continue
        files = [Path(eval_dir) / f"{name}.jsonl" for name in (a, b)]
        try:
            rates = [task_success(read_jsonl(f)) for f in files] if all(f.is_file() for f in files) else []
        except (OSError, ValueError):  # a damaged per-task file: the summary's rates still compare
            rates = []
        if rates:
            diff, lo, hi, n = paired_interval(*rates)
            out.append({"a": a, "b": b, "difference": diff, "low": lo, "high": hi, "tasks": n, "paired": True,
                        "verdict": paired_verdict(lo, hi)})
            continue
        numbers = [sa.get("episodes"), sb.get("episodes"), sa.get("success"), sb.get("success")]
        if not all(_is_number(x) for x in numbers):
            continue
        na, nb = int(sa.get("episodes", 0)), int(sb.get("episodes", 0))
        lo, hi = diff_interval(round(sa.get("success", 0) * na), na, round(sb.get("success", 0) * nb), nb)
        verdict = "above 0: better" if lo > 0 else "below 0: worse" if hi < 0 else "includes 0: not separated"
        out.append({"a": a, "b": b, "difference": sa.get("success", 0) - sb.get("success", 0), "low": lo,
                    "high": hi, "tasks": None, "paired": False, "verdict": verdict})
    return out


def better(a: Mapping[str, Any], b: Mapping[str, Any], rate: str = "success", count: str = "episodes") -> bool:
    """True when ``a``'s rate beats ``b``'s: the 95% interval of the difference lies above 0."""
    n1, n2 = int(a[count]), int(b[count])
    return diff_interval(round(a[rate] * n1), n1, round(b[rate] * n2), n2)[0] > 0


def turn_counts(trajectories: Iterable[Any]) -> tuple[int, int]:
    """``(well-formed assistant turns, assistant turns)`` over trajectories (objects with ``messages``
    or records)."""
    from envs.protocol import parse_turn

    good = total = 0
    for t in trajectories:
        messages = t.get("messages") if isinstance(t, Mapping) else getattr(t, "messages", None)
        for m in messages or []:
            if isinstance(m, Mapping) and m.get("role") == "assistant":
                total += 1
                good += bool(parse_turn(str(m.get("content", ""))).strict)
    return good, total


def policy_stats(trajectories: Sequence[Any], tasks_by_id: Mapping[str, dict]) -> dict[str, Any]:
    """Success with its 95% interval, well-formed-turn rate with its interval, success per level."""
    def field(t: Any, name: str) -> Any:
        return t.get(name) if isinstance(t, Mapping) else getattr(t, name, None)

    n = len(trajectories)
    wins = sum(bool(field(t, "is_correct")) for t in trajectories)
    good, turns = turn_counts(trajectories)
    per_level: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for t in trajectories:
        task = field(t, "task") or {}
        level = str(task.get("level") or tasks_by_id.get(str(task.get("id")), {}).get("level") or "?")
        per_level[level][0] += bool(field(t, "is_correct"))
        per_level[level][1] += 1
    return {"episodes": n, "success": wins / n if n else 0.0, "success_ci95": list(wilson(wins, n)),
            "well_formed_turns": good / turns if turns else 0.0, "turns": turns,
            "well_formed_ci95": list(wilson(good, turns)),
            "per_level": {lv: {"success": s / m, "episodes": m, "ci95": list(wilson(s, m))}
                          for lv, (s, m) in sorted(per_level.items())}}


def separated(a: Mapping[str, Any], b: Mapping[str, Any], key: str = "success_ci95") -> bool:
    """True when ``a``'s interval lies wholly above ``b``'s."""
    return float(a[key][0]) > float(b[key][1])


# ----------------------------------------------------------------------------- GRPO tasks


def parse_level_shares(text: str) -> dict[str, float]:
    """``"lookup-hop=0.6,lookup-lead=0.4"`` as ``{level: share}`` (empty text: ``{}``); a ValueError that
    says what was expected for an unknown level, a share that is not a positive number, or a level named twice."""
    shares: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        level, sep, value = part.partition("=")
        level = level.strip()
        if not sep or level not in LEVELS:
            raise ValueError(f"--grpo-levels: expected LEVEL=SHARE with LEVEL one of {', '.join(LEVELS)}, got {part!r}")
        try:
            share = float(value)
        except ValueError:
            share = float("nan")
        if not share > 0 or share == float("inf"):
            raise ValueError(f"--grpo-levels: the share of {level} must be a positive number, got {value.strip()!r}")
        if level in shares:
            raise ValueError(f"--grpo-levels: {level} is named twice")
        shares[level] = share
    return shares


def select_grpo_tasks(tasks: Sequence[dict], probe_outcomes: Mapping[str, Sequence[float]], n: int,
                      seed: int, shares: Mapping[str, float] | None = None) -> tuple[list[dict], dict[str, Any]]:
    """Training tasks of useful difficulty for the current model.

    ``probe_outcomes[level]`` are the model's outcomes (1 correct, 0 not) on probe episodes of
    that level. A group of G episodes of a task solved with probability p has mixed rewards
    with probability ``1 - p**G - (1-p)**G``, largest at p = 1/2; levels are weighted by
    ``p (1 - p)`` (with a floor, so no level with some success is shut out), and ``n`` tasks
    are drawn in proportion. Where the probe saw no success on any level, every level with tasks
    gets an equal share (the probe cannot tell them apart; ``fallback`` says so). A level with
    fewer tasks than its share leaves the rest to the other chosen levels' tasks; fewer than ``n``
    in all is counted in ``short`` (GRPO then draws some tasks again). ``shares`` (``--grpo-levels``)
    replace the probe's weights (a ValueError when a level they name has no task). Returns the tasks and
    what decided them."""
    rates = {lv: (sum(o) / len(o) if o else 0.0) for lv, o in probe_outcomes.items()}
    weights = {lv: p * (1 - p) if 0 < p < 1 else (0.02 if p > 0 else 0.0) for lv, p in rates.items()}
    by_level: dict[str, list[dict]] = defaultdict(list)
    for t in tasks:
        by_level[str(t.get("level", "?"))].append(t)
    usable = {lv: w for lv, w in weights.items() if w > 0 and by_level.get(lv)}
    fallback = None
    if shares:
        missing = sorted(lv for lv in shares if not by_level.get(lv))
        if missing:  # training without them would not be the asked mix (a hop-only pool cost the lookups 0.30)
            raise ValueError(f"--grpo-levels: SFT saw, or the probe played, every train task of {', '.join(missing)}; "
                             "raise that level's "
                             "task count (--lookup-tasks, --hop-tasks, --synth-tasks) or lower --sft-steps")
        usable = dict(shares)
        fallback = "fixed shares (--grpo-levels): " + ", ".join(f"{lv}={w:g}" for lv, w in sorted(usable.items()))
    elif not usable:
        usable = {lv: 1.0 for lv in sorted(by_level)}
        fallback = "the probe saw no success on any level: an equal share of every level's tasks"
    total = sum(usable.values())
    rng = random.Random(seed)
    pools = {}
    for lv in sorted(usable):
        pools[lv] = list(by_level.get(lv, []))
        rng.shuffle(pools[lv])
    quota = {lv: max(1, round(n * w / total)) for lv, w in usable.items()}
    chosen: list[dict] = [t for lv in sorted(quota) for t in pools[lv][:quota[lv]]]
    if len(chosen) < n:  # a level's share was more than its tasks: the rest from the other chosen levels
        rest = [t for lv in sorted(quota) for t in pools[lv][quota[lv]:]]
        rng.shuffle(rest)
        chosen += rest[:n - len(chosen)]
    rng.shuffle(chosen)
    chosen = chosen[:max(n, 1)]
    return chosen, {"probe_success": rates, "weights": weights, "fallback": fallback,
                    "chosen_per_level": dict(Counter(str(t.get("level")) for t in chosen)),
                    "wanted": n, "short": max(0, n - len(chosen))}
