"""One-hop tasks: the curriculum level between title lookups and research tasks (``lookup-hop``).

"Which country does the Wikipedia article with the short description "Tibeto-Burman language" name in
its opening words?" The page (Burmese language) is given only by its short description; the answer
(Myanmar) is the one page of the asked type that its opening words link to. A task is kept only when:

- the answer is named there by its title, after the defining verb ("X is a city on the Garonne"), as a
  whole name (not the end of a longer one such as "Mecca Province");
- no other page of that type is named there, linked or not (two answers);
- neither the description nor the page's title names it, a stem of it ("Athenian" for Athens), its
  initials ("U.S.") or a capitalized word its own page opens with ("French" for France);
- the compact search for the description's first :data:`HOP_QUERY_WORDS` words shows the page among
  its 3 hits, and the answer is read either in that hit's :data:`SNIPPET_CHARS`-character snippet (two
  turns: ``read: "hit"``) or, further on, in the compact visit of the page (:data:`OPENING_CHARS` characters
  of evidence; three turns: search, visit, answer: ``read: "visit"``).

A strong agent's knowledge still names some answers once the page is known (ETH Zurich's country).
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from envs.derived_tasks import display_title, title_task, unique_descriptions
from envs.tasks import Task
from sailorfog.describe import defining_type
from wiki_sim import WikiSim
from wiki_sim.records import title_to_url

SNIPPET_CHARS = 80
"""Characters of a search hit's snippet in the compact setting (:class:`envs.compact.CompactConfig`):
an answer named there is read from the search (``read: "hit"``)."""
OPENING_CHARS = 200
"""The opening words of a page a hop task asks about: the characters of evidence a compact visit shows,
where an answer past the snippet is read (``read: "visit"``)."""
VISIT_GOAL = "{kind}"
"""The goal of the gold visit on a hop task (``kind`` is the asked type)."""
HOP_QUERY_WORDS = 10
"""Words of the description the feasibility check searches for (the main job's gold query, its
``QUERY_WORDS``)."""
_VERB = re.compile(r"\b(?:is|was|are|were)\b")
_NAME_SPAN = re.compile(r"[A-Z][\w'’\-]*(?:\s+(?:(?:of|the|de|and)\s+)?[A-Z][\w'’\-]*)*")


def _type_of(lead: str) -> str | None:
    """The head noun of the type a page's defining first sentence gives it (``river``), or None."""
    words = defining_type(lead)
    return words[-1].lower() if words else None


def _given_away(answer: str, text: str, answer_lead: str) -> bool:
    """Whether ``text`` (the question's description, the page's title) names the answer, a word of its stem
    ("Athenian statesman" for Athens), or the stem of a name its page opens with ("French overseas collectivity"
    for France, whose lead says "the French Republic"; "American territory" for the United States of America;
    "Dutch" for the Netherlands)."""
    if display_title(answer).lower() in text.lower():
        return True
    initials = "".join(w[0] for w in display_title(answer).split() if w[:1].isupper())
    if len(initials) >= 2 and re.search(r"(?<!\w)" + r"\.?".join(initials) + r"\.?(?!\w)", text):
        return True  # "U.S. territory" for the United States
    stems = {w.lower()[:4] for w in re.findall(r"\w{4,}", text)}
    if any(w.lower()[:4] in stems for w in re.findall(r"\w{4,}", display_title(answer))):
        return True
    # a capitalized word that shares its first 4 letters with a name the answer's page opens with: "American"
    # for the United States ("The United States of America"), "Burman" for Myanmar ("also known as Burma")
    opening_stems = {w[:4] for w in re.findall(r"\b[A-Z]\w{3,}", answer_lead[:300])}
    return any(w[:4] in opening_stems for w in re.findall(r"\b[A-Z]\w{3,}", text))


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
        if target == title or not kind or anchor not in (target, display_title(target)) \
                or not anchor[:1].isupper():
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


def _named(answer: str, text: str) -> bool:
    """Whether ``text`` names the page ``answer`` by its display title, as a whole name."""
    return re.search(rf"(?<!\w){re.escape(display_title(answer))}(?!\w)", text) is not None


def hop_tasks(sim: WikiSim, check: bool = True) -> list[Task]:
    """Every one-hop task of the simulator, in title order; with ``check``, only those whose answer the
    compact tools show: the description's first :data:`HOP_QUERY_WORDS` words find the page among the
    top 3 hits, with the answer's name in its :data:`SNIPPET_CHARS`-character snippet (``read: "hit"``) or
    in the first :data:`OPENING_CHARS` characters of the page's evidence that a visit with
    :data:`VISIT_GOAL` shows (``read: "visit"``)."""
    descriptions = unique_descriptions(sim)
    leads = dict(sim.iter_leads())
    types = {title: _type_of(lead) for title, lead in leads.items()}
    out = []
    for title in sorted(descriptions):
        opening = " ".join(leads.get(title, "").split())[:OPENING_CHARS]
        if display_title(title).lower() in descriptions[title].lower():
            continue  # the description names the page it describes
        found = _hop_answer(sim, title, descriptions[title], opening, types, leads)
        if found is None:
            continue
        answer, kind = found
        read = "hit" if _named(answer, opening[:SNIPPET_CHARS]) else "visit"
        if check:
            query = " ".join(descriptions[title].split()[:HOP_QUERY_WORDS])
            hits = [h for h in sim.search([query], k=3)[0] if h.title == title]
            if not hits:
                continue
            read = "hit" if _named(answer, hits[0].snippet[:SNIPPET_CHARS]) else "visit"
            if read == "visit":
                page = sim.read(hits[0].url, VISIT_GOAL.format(kind=kind))
                if page is None or not _named(answer, page[1].evidence[:OPENING_CHARS]):
                    continue
        q = (f"Which {kind} does the Wikipedia article with the short description \"{descriptions[title]}\" name in "
             f"its opening words? Answer with that {kind}'s article title.")
        task = title_task(sim, answer, "hop", q)
        slug = title_to_url(title).rsplit("/", 1)[1]
        out.append(Task(id=f"{task.id}-via-{slug}", question=q, answer=task.answer, aliases=task.aliases,
                        metadata={**task.metadata, "via": title, "type": kind, "read": read}))
    return out


def derive_hop_tasks(wiki_dir: str | Path, n: int, *, seed: int = 0) -> list[Task]:
    """Up to ``n`` of the simulator's one-hop tasks (:func:`hop_tasks`), drawn by ``seed``."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    with WikiSim(Path(wiki_dir)) as sim:
        tasks = hop_tasks(sim)
    random.Random(seed).shuffle(tasks)
    return tasks[:n]


def hop_records(wiki_dir: str | Path, n: int, seed: int) -> list[dict[str, Any]]:
    """:func:`derive_hop_tasks` as task records of level ``lookup-hop``."""
    return [{**task.to_dict(), "level": "lookup-hop"} for task in derive_hop_tasks(wiki_dir, n, seed=seed)]
