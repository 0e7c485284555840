"""Simple tasks derived from a built simulator, answerable inside it (title lookups).

The released task files need the live web; these give the baselines and the benchmark
something the offline simulator can answer. Three kinds, each answered by a page title:

- ``description``: "Which Wikipedia article has the short description "<d>"?", for
  short descriptions that exactly one page of the store has;
- ``lead``: "Which Wikipedia article begins with this sentence (its subject replaced by
  ___): "<first sentence, title masked>"?", for pages whose first sentence names them;
- ``hop``: one hop through a described, unnamed page: "Which <type> does the Wikipedia article
  with the short description "<d>" name in its opening words?" (:func:`hop_tasks`). The page
  described is never named; the answer is the one page of that type its opening words link to,
  read from the search hit of the description (two turns in the compact setting).

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

TaskKind = Literal["description", "lead", "hop", "mixed"]
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


def _display(title: str) -> str:
    return re.sub(r"\s*\([^)]*\)$", "", title).strip() or title


def masked_first_sentence(title: str, lead: str, max_chars: int = 300) -> str | None:
    """The lead's first sentence with the title replaced by ``___``, or ``None`` when the
    sentence does not name the page, is too short, or is too long."""
    sentence = _SENTENCE_END.split(lead.strip(), maxsplit=1)[0].strip()
    name = _display(title)
    pattern = re.compile(rf"(?<!\w){re.escape(name)}(?!\w)", re.IGNORECASE)
    if not sentence or len(sentence) > max_chars or not pattern.search(sentence):
        return None
    masked = pattern.sub("___", sentence)
    if len(re.findall(r"\w+", masked)) < 6:
        return None
    return masked


def _unique_descriptions(sim: WikiSim) -> dict[str, str]:
    pages_by_value: dict[str, set[str]] = defaultdict(set)
    descriptions = [(page, " ".join(str(value).split())) for page, _, value, _, _ in sim.iter_facts("description")]
    for page, value in descriptions:
        if len(value) >= 12:
            pages_by_value[value.lower()].add(page)
    return {page: value for page, value in descriptions if len(pages_by_value.get(value.lower(), ())) == 1}


def _task(sim: WikiSim, title: str, kind: str, question: str) -> Task:
    aliases = [a for a in sim.aliases(title) if a != title]
    if _display(title) != title:
        aliases.insert(0, _display(title))
    return Task(id=f"wikisim-{kind}-{title_to_url(title).rsplit('/', 1)[1]}", question=question, answer=title,
                aliases=tuple(dict.fromkeys(aliases)),
                metadata={"kind": kind, "source": "wikisim-derived", "url": title_to_url(title)})


def _candidates(sim: WikiSim, kind: TaskKind) -> list[Task]:
    candidates: list[Task] = []
    if kind in ("description", "mixed"):
        descriptions = _unique_descriptions(sim)
        for title in sorted(descriptions):
            q = (f"Which Wikipedia article has the short description \"{descriptions[title]}\"? "
                 "Answer with the article's title.")
            candidates.append(_task(sim, title, "description", q))
    if kind == "hop":
        candidates.extend(hop_tasks(sim))
    if kind in ("lead", "mixed"):
        for title, lead in sim.iter_leads():
            masked = masked_first_sentence(title, lead)
            if masked:
                q = (f"Which Wikipedia article begins with this sentence (its subject replaced by ___): "
                     f"\"{masked}\"? Answer with the article's title.")
                candidates.append(_task(sim, title, "lead", q))
    return candidates


OPENING_CHARS = 80
"""The opening words of a page a ``hop`` task asks about: the characters of a search hit's snippet in the
compact setting (:class:`envs.compact.CompactConfig`), where the answer must be readable."""
HOP_QUERY_WORDS = 10
"""Words of the description the feasibility check searches for (the main job's gold query, its
``QUERY_WORDS``)."""
_VERB = re.compile(r"\b(?:is|was|are|were)\b")
_NAME_SPAN = re.compile(r"[A-Z][\w'’\-]*(?:\s+(?:(?:of|the|de|and)\s+)?[A-Z][\w'’\-]*)*")


def _type_of(lead: str) -> str | None:
    """The head noun of the type a page's defining first sentence gives it (``river``), or None."""
    from sailorfog.describe import defining_type

    words = defining_type(lead)
    return words[-1].lower() if words else None


def _given_away(answer: str, text: str, answer_lead: str) -> bool:
    """Whether ``text`` (the question's description, the page's title) names the answer, a word of its stem
    ("Athenian statesman" for Athens), or a name its page opens with ("French overseas collectivity" for
    France, whose lead says "the French Republic"; "Dutch" for the Netherlands)."""
    if _display(answer).lower() in text.lower():
        return True
    initials = "".join(w[0] for w in _display(answer).split() if w[:1].isupper())
    if len(initials) >= 2 and re.search(r"(?<!\w)" + r"\.?".join(initials) + r"\.?(?!\w)", text):
        return True  # "U.S. territory" for the United States
    stems = {w.lower()[:4] for w in re.findall(r"\w{4,}", text)}
    if any(w.lower()[:4] in stems for w in re.findall(r"\w{4,}", _display(answer))):
        return True
    opening = answer_lead[:300]
    return any(re.search(rf"(?<!\w){re.escape(w)}(?!\w)", opening) for w in re.findall(r"\b[A-Z]\w{3,}", text))


def _names_in(text: str) -> set[str]:
    """Capitalized names in ``text``, whole and split at their joining words ("United Kingdom of Great
    Britain and Ireland" -> that, "United Kingdom", "Great Britain", "Ireland")."""
    out = set()
    for span in _NAME_SPAN.findall(text):
        out.add(span)
        out.update(p.strip() for p in re.split(r"\s+(?:of|the|de|and)\s+", span) if p.strip())
    return out


def _hop_answer(sim: WikiSim, title: str, description: str, opening: str, types: dict[str, str | None],
                leads: dict[str, str]) -> tuple[str, str] | None:
    """``(answer, type)`` of a hop task about ``title``: the one page of its type that the opening words
    link to, named there by its title after the defining verb ("X is a city on the Garonne"), as a whole
    name (not part of a longer one), with no other page of that type named there (linked or not), and
    not given away by the description or the page's title; None when there is none or more than one."""
    verb = _VERB.search(opening)
    if verb is None:
        return None
    after = opening[verb.end():]
    by_kind: dict[str, set[str]] = defaultdict(set)
    for link in sim.page_links(title):
        target, anchor = link.target, link.anchor.strip()
        kind = types.get(target)
        if target == title or not kind or anchor not in (target, _display(target)) or not anchor[:1].isupper():
            continue
        m = re.search(rf"(?<![\w\-]){re.escape(anchor)}(?![\w\-])(?!\s+[A-Z])", after)
        if m is None or re.search(r"[A-Z][\w'’\-]*\s+(?:(?:of|the|de)\s+)?$", after[:m.start()]):
            continue  # absent, or the end of a longer name ("Republic of Venice", "Mecca Province")
        by_kind[kind].add(target)
    named = {sim.resolve(n) for n in _names_in(after)} - {None, title}
    for kind in sorted(by_kind):
        targets = by_kind[kind]
        if len(targets) != 1:
            continue
        target = next(iter(targets))
        if any(types.get(other) == kind for other in named - {target}):
            continue  # another page of the same type is named there: two answers
        if _given_away(target, f"{description} {title}", leads.get(target, "")):
            continue
        return target, kind
    return None


def hop_tasks(sim: WikiSim, check: bool = True) -> list[Task]:
    """Every ``hop`` task of the simulator, in title order; with ``check``, only those whose answer the
    compact search shows: the description's first :data:`HOP_QUERY_WORDS` words find the page among the
    top 3 hits with the answer's name in its :data:`OPENING_CHARS`-character snippet."""
    descriptions = _unique_descriptions(sim)
    leads = dict(sim.iter_leads())
    types = {title: _type_of(lead) for title, lead in leads.items()}
    out = []
    for title in sorted(descriptions):
        opening = " ".join(leads.get(title, "").split())[:OPENING_CHARS]
        found = _hop_answer(sim, title, descriptions[title], opening, types, leads)
        if found is None:
            continue
        answer, kind = found
        if check:
            query = " ".join(descriptions[title].split()[:HOP_QUERY_WORDS])
            hits = sim.search([query], k=3)[0]
            name = re.compile(rf"(?<!\w){re.escape(_display(answer))}(?!\w)")
            if not any(h.title == title and name.search(h.snippet[:OPENING_CHARS]) for h in hits):
                continue
        q = (f"Which {kind} does the Wikipedia article with the short description \"{descriptions[title]}\" name in "
             f"its opening words? Answer with that {kind}'s article title.")
        task = _task(sim, answer, "hop", q)
        slug = title_to_url(title).rsplit("/", 1)[1]
        out.append(Task(id=f"{task.id}-via-{slug}", question=q, answer=task.answer, aliases=task.aliases,
                        metadata={**task.metadata, "via": title, "type": kind}))
    return out


def derive_tasks(wiki_dir: str | os.PathLike, n: int, *, seed: int = 0, kind: TaskKind = "mixed") -> list[Task]:
    """Up to ``n`` tasks from the simulator in ``wiki_dir`` (reproducible for a seed)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if kind not in ("description", "lead", "hop", "mixed"):
        raise ValueError(f"kind must be 'description', 'lead', 'hop' or 'mixed', got {kind!r}")
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
