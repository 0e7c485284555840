"""Simple tasks derived from a built simulator, answerable inside it (title lookups).

The released task files need the live web; these give the baselines and the benchmark
something the offline simulator can answer. Two kinds, both answered by a page title:

- ``description``: "Which Wikipedia article has the short description "<d>"?", for
  short descriptions that exactly one page of the store has;
- ``lead``: "Which Wikipedia article begins with this sentence (its subject replaced by
  ___): "<first sentence, title masked>"?", for pages whose first sentence names them.

One hop further, through a described page, are :mod:`sailorfog.hop`'s tasks.

Aliases are the page's redirects and its title without a trailing parenthetical.
"""

from __future__ import annotations

import os
import random
import re
from collections import defaultdict
from pathlib import Path
from typing import Literal

from envs.tasks import Task
from wiki_sim import WikiSim
from wiki_sim.records import title_to_url

TaskKind = Literal["description", "lead", "mixed"]
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


def display_title(title: str) -> str:
    """The title without a trailing parenthetical ("Mercury (planet)" -> "Mercury")."""
    return re.sub(r"\s*\([^)]*\)$", "", title).strip() or title


def masked_first_sentence(title: str, lead: str, max_chars: int = 300) -> str | None:
    """The lead's first sentence with the title replaced by ``___``, or ``None`` when the
    sentence does not name the page, is too short, or is too long."""
    sentence = _SENTENCE_END.split(lead.strip(), maxsplit=1)[0].strip()
    name = display_title(title)
    pattern = re.compile(rf"(?<!\w){re.escape(name)}(?!\w)", re.IGNORECASE)
    if not sentence or len(sentence) > max_chars or not pattern.search(sentence):
        return None
    masked = pattern.sub("___", sentence)
    if len(re.findall(r"\w+", masked)) < 6:
        return None
    return masked


def unique_descriptions(sim: WikiSim) -> dict[str, str]:
    """Page -> its short description, for descriptions (12+ characters) that no other page has."""
    pages_by_value: dict[str, set[str]] = defaultdict(set)
    descriptions = [(page, " ".join(str(value).split())) for page, _, value, _, _ in sim.iter_facts("description")]
    for page, value in descriptions:
        if len(value) >= 12:
            pages_by_value[value.lower()].add(page)
    return {page: value for page, value in descriptions if len(pages_by_value.get(value.lower(), ())) == 1}


def title_task(sim: WikiSim, title: str, kind: str, question: str) -> Task:
    """A task answered by the page ``title`` (its other names as aliases)."""
    aliases = [a for a in sim.aliases(title) if a != title]
    if display_title(title) != title:
        aliases.insert(0, display_title(title))
    return Task(id=f"wikisim-{kind}-{title_to_url(title).rsplit('/', 1)[1]}", question=question, answer=title,
                aliases=tuple(dict.fromkeys(aliases)),
                metadata={"kind": kind, "source": "wikisim-derived", "url": title_to_url(title)})


def _candidates(sim: WikiSim, kind: TaskKind) -> list[Task]:
    candidates: list[Task] = []
    if kind in ("description", "mixed"):
        descriptions = unique_descriptions(sim)
        for title in sorted(descriptions):
            q = (f"Which Wikipedia article has the short description \"{descriptions[title]}\"? "
                 "Answer with the article's title.")
            candidates.append(title_task(sim, title, "description", q))
    if kind in ("lead", "mixed"):
        for title, lead in sim.iter_leads():
            masked = masked_first_sentence(title, lead)
            if masked:
                q = (f"Which Wikipedia article begins with this sentence (its subject replaced by ___): "
                     f"\"{masked}\"? Answer with the article's title.")
                candidates.append(title_task(sim, title, "lead", q))
    return candidates


def derive_tasks(wiki_dir: str | os.PathLike, n: int, *, seed: int = 0, kind: TaskKind = "mixed") -> list[Task]:
    """Up to ``n`` tasks from the simulator in ``wiki_dir`` (reproducible for a seed)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if kind not in ("description", "lead", "mixed"):
        raise ValueError(f"kind must be 'description', 'lead' or 'mixed', got {kind!r}")
    with WikiSim(Path(wiki_dir)) as sim:
        candidates = _candidates(sim, kind)
    if not candidates:
        raise ValueError(f"{wiki_dir}: no page yields a {kind} task (no unique short descriptions or naming leads)")
    random.Random(seed).shuffle(candidates)
    if kind == "mixed":  # alternate the kinds so a small n still has both
        by_kind = {k: [t for t in candidates if t.metadata["kind"] == k] for k in ("description", "lead")}
        candidates = [t for pair in zip(by_kind["description"], by_kind["lead"]) for t in pair] + \
            [t for k in by_kind for t in by_kind[k][min(map(len, by_kind.values())):]]
    return candidates[:n]
