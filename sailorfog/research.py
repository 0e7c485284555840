"""Research tasks: an answer reached only through described, unnamed intermediate entities.

For the ``i``-th answer (drawn against popularity from the whole store), :class:`ResearchSynthesizer`
picks a chain of linked entities (``X - B`` by default, ``X - B - C`` with ``depth=2``), reads
structured statements about each (:mod:`sailorfog.statements`), and adds weak ones until the
stated clues single out the answer while the answer's own clues do not (so the text needs
the hop through ``B``). The same statements drive the writer, the verifier (their checks) and
the oracle (their words); a task breaking any rule (ambiguous, shallow, leaking, quoting a
page, unsolvable) is dropped with its reason.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import networkx as nx
import numpy as np

from sailorfog.constraints import candidate_pages, count_candidates
from sailorfog.pagesets import ByteLRU, contains
from sailorfog.corpus import CorpusIndex
from sailorfog.describe import other_names, subject_names
from sailorfog.statements import (Statement, date_statements, lifespan, name_statement, name_words_statement,
                                  number_statements, relation_statement, type_statement)
from sailorfog.text import display_title, distinctive_words, leaks
from sailorfog.writers import WriterError
from wiki_sim.records import title_to_url

RESEARCH_VERSION = "sailorfog-research-0.3"
HUB_QUANTILE = 0.99
"""Pages above this inbound-link quantile (the corpus's top 1%) are hubs: never answers or hidden intermediates."""
FAMOUS_QUANTILE = 0.95
"""Pages above this inbound-link quantile (the top 5%) are famous: their names get no first-letter or word-count
hint (knowledge completes "emperor K" at once)."""
LABELS = "BCDEFG"
QUOTE_WORDS = 6
"""No run of this many consecutive question words may appear in a page of the task."""
_WORDS = re.compile(r"[a-z0-9]+")
TEXT_CACHE_BYTES = 32 << 20
"""Page texts kept per process (least recently read dropped first)."""
BRANCH_TRIES = 4
"""Linked entities tried for a side branch on a hidden entity before it is left out
(:meth:`ResearchSynthesizer._branch`)."""


def inbound_links(index: CorpusIndex) -> np.ndarray:
    """Inbound links per page id (``int64``; empty when the index does not know them)."""
    values = index.inbound.values if hasattr(index, "typed") else index.inbound  # the memory-mapped index: a column
    return np.asarray(values, np.int64)


def inbound_quantile(inbound: np.ndarray, q: float) -> int:
    """The inbound-link count at quantile ``q`` of the corpus (pages above it are its top ``1 - q``)."""
    return int(np.sort(inbound)[int(q * (len(inbound) - 1))]) if len(inbound) else 0


def answer_order(index: CorpusIndex, seed: int, alpha: float = 0.5) -> list[int]:
    """Every page with a defining type and a link, in a seeded order drawn against popularity
    (weight ``(1 + inbound) ** -alpha``, exponential keys): long-tail answers come first, no page
    is drawn twice, and the corpus's top 1% by inbound links are left out."""
    rng = random.Random(f"sailorfog-answers:{seed}")
    n = len(index)
    if hasattr(index, "typed"):  # the memory-mapped index: per-page arrays
        typed, degree = index.typed(), index.degrees()
    else:
        typed = np.fromiter((bool(t) for t in index.page_type), bool, n)
        degree = np.fromiter((len(nb) for nb in index.neighbors), np.int64, n)
    inbound = inbound_links(index)
    known = len(inbound) > 0
    hub = inbound_quantile(inbound, HUB_QUANTILE)  # the top 1% are never answers
    full = np.zeros(n, np.int64)
    full[:min(n, len(inbound))] = inbound[:n]
    keep = typed & (degree > 0) & (full <= hub) if known else typed & (degree > 0)
    weights: dict[int, float] = {}
    keys = []
    for pid, links in zip(np.flatnonzero(keep).tolist(), full[keep].tolist()):
        weight = weights.get(links)
        if weight is None:
            weight = weights[links] = (1.0 + max(links, 0)) ** -alpha
        keys.append((-math.log(1.0 - rng.random()) / weight, pid))
    keys.sort()
    return [pid for _, pid in keys]


def ngrams(text: str, n: int = QUOTE_WORDS) -> set[tuple[str, ...]]:
    words = _WORDS.findall(text.lower())
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def quotes(question: str, pages: Sequence[str], n: int = QUOTE_WORDS) -> list[str]:
    """Runs of ``n`` consecutive question words that some page holds verbatim."""
    grams = ngrams(question, n)
    found: list[str] = []
    for text in pages:
        found += [" ".join(g) for g in grams & ngrams(text, n)]
    return sorted(set(found))


def name_leaks(question: str, titles: Sequence[str], names: Mapping[str, Sequence[str]], answer: str) -> list[str]:
    """Names of the task's entities (and the answer's words, initials, non-Latin letters) in ``question``."""
    phrases = [n for t in titles for n in (t, display_title(t), *names.get(t, ())) if len(n) >= 3]
    words = [w for n in (answer, display_title(answer), *names.get(answer, ())) for w in distinctive_words(n)]
    found = leaks(question, phrases, words)
    initials = "".join(w[0] for w in display_title(answer).split() if w[:1].isalpha()).upper()
    if len(initials) >= 2 and re.search(r"(?<!\w)" + re.escape(initials) + r"(?!\w)", question):
        found.append(initials)
    if any(ord(ch) > 0x2FF and ch.isalpha() for ch in question):
        found.append("non-Latin letters")
    return found


def distinct_periods(statements: Sequence[Statement]) -> list[Statement]:
    """One dated statement per period and per sentence, and none whose period holds or lies in another's:
    "published in the 1830s and accepted in the 1830s" from one sentence says one thing twice."""
    seen: set[str] = set()
    spans: list[tuple[int, int]] = []
    out = []
    for s in statements:
        keys = {s.value, s.evidence.get("sentence", "")}
        lo, hi = s.checks[0].get("lo", 0), s.checks[0].get("hi", 0)
        if keys & seen or any(a <= lo and hi <= b or lo <= a and b <= hi for a, b in spans):
            continue  # "the 1930s" and "the fourth decade of the 20th century"; "the 1910s" inside "1900-1950"
        seen |= keys
        spans.append((lo, hi))
        out.append(s)
    return out


def task_entities(record: Mapping[str, Any]) -> tuple[str, frozenset[str]]:
    """A written task's answer and the titles of all its entities (the answer's among them)."""
    answer = str(record.get("answer", ""))
    nodes = (record.get("subgraph") or {}).get("nodes") or []
    return answer, frozenset(str(n.get("title", "")) for n in nodes) | {answer}


def repeats(record: Mapping[str, Any], earlier: Sequence[tuple[str, frozenset[str]]]) -> str | None:
    """Why a task retells one written before it in the same run (:func:`task_entities` of each), or ``None``:
    its answer is an entity of the other (solving one gives the other away), the other's answer is one of
    its entities, or the two share two entities or more (the same chain with another letter asked)."""
    answer, nodes = task_entities(record)
    for other_answer, other_nodes in earlier:
        if answer in other_nodes or other_answer in nodes:
            return f"repeated: {answer!r} and {other_answer!r} are entities of each other's tasks"
        shared = nodes & other_nodes
        if len(shared) >= 2:
            return f"repeated: shares {len(shared)} entities with the task on {other_answer!r}"
    return None


@dataclass
class Chain:
    """The entities of one task: label -> title, and the statements read about them."""

    titles: dict[str, str]
    base: list[Statement]
    far: list[Statement]
    """Unary statements about the intermediates (added first: they pin ``B``)."""
    near: list[Statement]
    """Unary statements about the answer (weak: they must leave it ambiguous on their own)."""
    path: list[str] = field(default_factory=list)
    """Labels of the hidden intermediates, nearest to the answer first."""


@dataclass
class ResearchSynthesizer:
    """Builds research tasks over a simulator; one instance per worker process."""

    index: CorpusIndex
    sim: Any
    seed: int
    depth: int = 2
    """Hidden intermediates between the answer and the entity pinned by its own clues (0: a one-hop
    curriculum level where the answer's own clues may decide). 2 by default: at 1 a strong agent needed 1.95
    tool calls a task in blind play (knowledge names the one hidden entity), at 2 it needed 2.67 over 60 tasks
    in six rounds (benchmarks/README.md#synth_difficulty)."""
    min_x_candidates: int = 2
    """With ``depth >= 1``: pages the answer's own clues must leave (so the hop is required)."""
    max_added: int = 5
    """Statements added at most to make the answer unique."""
    min_answer_type: int = 12
    """The answer's type is stated with words that fit at least this many pages (a search for it
    alone cannot list the answer; a person of a rarer type is "a person")."""
    min_statements: int = 12
    """Weak, true statements are added (without changing the answer) until the question has this many."""
    min_words: int = 51
    """Shorter questions are dropped (they say too little to be research tasks); 20 at ``depth=0``."""
    max_words: int = 90
    """Longer questions are dropped: a question of 98 words on seed 0 chained seven associations among three
    countries, a peninsula, a waterway, a sea and a city, past what a reader keeps in mind."""
    branch_p: float = 1.0
    """Probability of each side branch (an entity known only by its type, linked to the answer or to
    the last intermediate). Every branch by default: on the default corpus, 60 asked, 0.8 with 3 branches
    kept 29 research tasks (9 WL classes), 1.0 with 4 kept 57 (16 classes): a question without its side
    entities often says too little to reach ``min_words`` or to single out its answer."""
    branches: int = 4
    """Side branches tried at most (one on the answer, the others on the intermediates: a branch on the
    answer counts among its own clues)."""
    answer_letter: bool = False
    """Whether the answer's first letter may be stated. Off by default: on the default corpus (10k vital
    articles, every answer famous) blind players read "a politician whose name begins with F" next to Cuba as
    Fidel Castro at once, without the research (seeds 6161 and 8383: 11 of 20 solved by the first search);
    off, 3 to 4 of every 20 attempts' tasks are lost on seeds 1 and 2 (54 against 46 tasks in 6,000
    attempts). The one-hop level (``depth=0``) keeps it: there the answer's own clues must decide, and
    without its letter 29 of 60 asked were written instead of 50. Hidden intermediates never get one."""
    cycle_p: float = 0.7
    """Probability that a relation the pages state between two entities already chosen (not yet joined) is
    added, closing a cycle."""
    attack_filter: bool = True
    """Drop a task when one search (the whole question, one clause, or one 6-word window of it)
    lists the answer in the top 10."""
    plain_check: bool = True
    """Drop a task when a looser, reader-like reading of its statements (:mod:`sailorfog.reader`)
    leaves a second candidate answer."""
    texts: ByteLRU = field(default_factory=lambda: ByteLRU(TEXT_CACHE_BYTES))
    _reader: Any = field(default=None, repr=False)
    _given_away: int = field(default=0, repr=False)
    """Neighbours of the answer skipped in the current chain because its type and their title find it."""
    _bounds: tuple[int, int] | None = field(default=None, repr=False)
    """(famous, hub) inbound-link bounds of the corpus, computed once (:meth:`inbound_bounds`)."""

    def second_answers(self, statements: Sequence[Statement], target: str,
                       titles: Mapping[str, str] | None = None) -> list[str]:
        """Pages other than ``target`` that the plain reading of ``statements`` also accepts; with the
        chain's ``titles`` (label -> page), also the answer's peers without a page
        (:func:`sailorfog.peers.unpaged_peers`: "It also stars Jack Hawkins, Anthony Quinn, ...")."""
        from sailorfog.peers import unpaged_peers
        from sailorfog.reader import PlainReader

        if self._reader is None:
            self._reader = PlainReader(self.index, self.sim)
        found = self._reader.candidates(statements, answer=self.index.ids.get(target))
        pages = sorted(self.index.titles[p] for p in found if self.index.titles[p] != target)
        if titles is None:
            return pages
        return pages + unpaged_peers(statements, display_title(target), self.text, titles, is_page=self.names_a_page,
                                     is_place=self.names_a_place)

    def names_a_place(self, name: str) -> bool:
        """Whether ``name`` is the title or an alias of a place's page (a country, a state, a region, ...)."""
        title = self.sim.resolve(name)
        return title is not None and self.index.ids.get(title) in self._reader.places()

    def names_a_page(self, name: str) -> bool:
        """Whether ``name`` is a page's title or alias, or the opening word of one ("Apollonius" of Apollonius
        of Perga): a reader takes it for that page, which the page-level checks read."""
        if name in self.index.ids or self.sim.resolve(name) is not None:
            return True
        return " " not in name and bool(self.index.with_prefix(name + " "))

    def dates(self, label: str, title: str, rng: random.Random) -> list[Statement]:
        """The page's date statements (:func:`~sailorfog.statements.date_statements`), none outside the
        lifespan its short description gives."""
        description = next((f["value"] for f in self.sim.facts(title) if f.get("key") == "description"), "")
        return date_statements(self.index, label, title, self.text(title), f"{label}d", rng,
                               life=lifespan(description or ""))

    def text(self, title: str) -> str:
        found = self.texts.get(title)
        if found is None:
            found = self.texts[title] = (self.sim.page(title) or {}).get("text", "")
        return found

    # --- choosing the chain -------------------------------------------------------------
    def _neighbor(self, title: str, avoid: set[str], rng: random.Random, label: str,
                  other: tuple[str, str], kind: str = "") -> tuple[str, Statement, Statement] | None:
        """A typed entity linked to ``title`` with a relation sentence; with ``kind`` (the answer's type,
        when ``title`` is the answer) none whose title searched with ``kind`` lists the answer."""
        pid = self.index.ids[title]
        typed = self.index.typed() if hasattr(self.index, "typed") else None  # the memory-mapped index
        options = sorted(self.index.titles[n] for n in self.index.neighbors[pid]
                         if (typed[n] if typed is not None else self.index.page_type[n]))
        rng.shuffle(options)
        found = []
        for cand in options[:12]:
            if cand in avoid or self._above(cand, self.inbound_bounds()[1]):  # no hub is a hidden entity
                continue
            if kind and self.type_neighbour_finds(kind, cand, title):
                self._given_away += 1
                continue
            statement = type_statement(self.index, label, cand, self.text(cand), f"{label}t")
            rel = relation_statement(self.index, self.sim, other, (label, cand), f"r{other[0]}{label}")
            if statement is None or rel is None:
                continue
            found.append((rel.predicate == "mentions", len(found), (cand, statement, rel)))
            if rel.predicate != "mentions":
                break
        return min(found)[2] if found else None

    def _branch(self, anchor: str, titles: Mapping[str, str], rng: random.Random, label: str,
                kind: str) -> tuple[str, list[Statement]] | None:
        """A side branch on ``anchor``: an entity linked to it, with the relation and its type, and (on a hidden
        entity) a date, else a quantity, else its name's word count: "a city is associated with a state" says
        nothing a reader can use, so an undescribed candidate is passed over, up to :data:`BRANCH_TRIES` of
        them (a branch on the answer counts among the answer's clues). On seed-0 synthesis of 60 tasks: 20
        Weisfeiler-Lehman classes, the largest 22% (undescribed branches kept: 25, 32%; a date asked of one
        candidate: 14, 40%)."""
        avoid = set(titles.values())
        for _ in range(BRANCH_TRIES):
            step = self._neighbor(titles[anchor], avoid, rng, label, (anchor, titles[anchor]), kind)
            if step is None:
                return None
            cand = step[0]
            said = [] if anchor == "X" else (
                distinct_periods(self.dates(label, cand, rng))[:1]
                or number_statements(self.index, label, cand, self.text(cand), f"{label}q", rng)[:1]
                or self.name_hints(label, cand, letter=False))
            if anchor == "X" or said:
                return cand, [step[2], step[1], *said]
            avoid.add(cand)
        return None

    def inbound_bounds(self) -> tuple[int, int]:
        """(famous, hub): the corpus's inbound-link counts at :data:`FAMOUS_QUANTILE` and :data:`HUB_QUANTILE`."""
        if self._bounds is None:
            inbound = inbound_links(self.index)
            self._bounds = (inbound_quantile(inbound, FAMOUS_QUANTILE), inbound_quantile(inbound, HUB_QUANTILE))
        return self._bounds

    def _above(self, title: str, bound: int) -> bool:
        inbound = self.index.inbound
        pid = self.index.ids[title]
        return len(inbound) > pid and bound > 0 and int(inbound[pid]) > bound

    def name_hints(self, label: str, title: str, letter: bool = True) -> list[Statement]:
        """The first letter (with ``letter``) and word count of a name, none for a famous page."""
        if self._above(title, self.inbound_bounds()[0]):
            return []
        found = [name_statement(self.index, label, title, f"{label}n")] if letter else []
        return [s for s in (*found, name_words_statement(self.index, label, title, f"{label}w")) if s]

    def type_neighbour_finds(self, kind: str, neighbour: str, target: str) -> bool:
        """Whether a search of the answer's type with a neighbour's title ("officer Burkina Faso") lists
        the answer in the top 10 (:func:`sailorfog.attacks.type_neighbour_rank`)."""
        from sailorfog.attacks import type_neighbour_rank

        return self.attack_filter and type_neighbour_rank(self.sim, kind, [neighbour], {target}) is not None

    def chain(self, target: str, rng: random.Random) -> Chain | str:
        min_type = max(2, min(self.min_answer_type, len(self.index) // 800))  # small corpora: fewer pages per type
        x_type = type_statement(self.index, "X", target, self.text(target), "Xt", min_type)
        if x_type is None:
            return "no type: the answer's first sentence defines no type shared by enough pages"
        titles, base, far = {"X": target}, [x_type], []
        prev = ("X", target)
        self._given_away = 0
        for k in range(max(self.depth, 1)):
            label = LABELS[k]
            step = self._neighbor(prev[1], set(titles.values()), rng, label, prev,
                                  x_type.value if prev[0] == "X" else "")
            if step is None:
                if self._given_away:
                    return (f"given away: a search of the answer's type {x_type.value!r} with the title of each "
                            f"usable linked entity finds it")
                return "no relation: no linked entity with a type and a linking sentence"
            cand, kind, rel = step
            titles[label] = cand
            base += [rel, kind]
            far += distinct_periods(self.dates(label, cand, rng))[:3]
            far += number_statements(self.index, label, cand, self.text(cand), f"{label}q", rng)[:1]
            # a hidden entity's first letter gives it away to anyone who knows the field ("emperor K")
            far += self.name_hints(label, cand, letter=False)
            prev = (label, cand)
        path = [lab for lab in titles if lab != "X"]
        extra = len(titles)
        anchors = ("X", path[-1], path[-1], path[0])[:self.branches]
        if len(path) >= 2:  # which intermediates the branches hang on is drawn: several shapes, not one
            anchors = ("X", *(rng.choice(path) for _ in anchors[1:]))
        for anchor in anchors if self.depth >= 1 else ():  # side branches: an entity known by its type
            if rng.random() < self.branch_p:
                branch = self._branch(anchor, titles, rng, LABELS[extra - 1], x_type.value if anchor == "X" else "")
                if branch is not None:
                    titles[LABELS[extra - 1]] = branch[0]
                    base += branch[1]
                    extra += 1
        if self.depth >= 1:
            base += self.cycles(titles, base, x_type.value, rng)
        near = distinct_periods(self.dates("X", target, rng))[:2]
        near += number_statements(self.index, "X", target, self.text(target), "Xq", rng)[:1]
        near += self.name_hints("X", target, letter=self.answer_letter or self.depth == 0)
        if self.depth == 0:  # one hop: the neighbour is described by its type only
            far = []
        rng.shuffle(far)
        far.sort(key=lambda s: s.kind != "date" or not s.predicate)
        return Chain(titles, base, far, near, path)

    def cycles(self, titles: Mapping[str, str], base: Sequence[Statement], kind: str,
               rng: random.Random) -> list[Statement]:
        """Relations between entities already chosen that the pages state (each with probability
        ``cycle_p``): they close cycles, so the answer is reached by several paths. None gives the answer
        away by its type (``kind``) and the other entity's title."""
        joined = {frozenset(s.labels) for s in base if s.kind == "relation"}
        linked = {lab: set(self.index.neighbors[self.index.ids[t]]) for lab, t in titles.items()}
        out = []
        for a, b in itertools.combinations(list(titles), 2):
            if frozenset((a, b)) in joined or rng.random() >= self.cycle_p:
                continue
            if self.index.ids[titles[b]] not in linked[a]:
                continue
            if "X" in (a, b) and self.type_neighbour_finds(kind, titles[b if a == "X" else a], titles["X"]):
                continue
            rel = relation_statement(self.index, self.sim, (a, titles[a]), (b, titles[b]), f"r{a}{b}")
            if rel is not None:
                out.append(rel)
        return out

    # --- uniqueness ------------------------------------------------------------------------
    def count(self, statements: Sequence[Statement], labels: Sequence[str]) -> int:
        checks = [c for s in statements for c in s.checks if all(lab in labels for lab in s.labels)]
        return count_candidates(self.index, checks, labels)

    def x_only(self, statements: Sequence[Statement], path: Sequence[str] = ()) -> int:
        """Candidates of the answer under every statement that does not involve a hidden intermediate."""
        kept = [s for s in statements if not set(s.labels) & set(path)] if path else \
            [s for s in statements if s.labels == ["X"]]
        labels = sorted({lab for s in kept for lab in s.labels} | {"X"})
        return self.count(kept, labels)

    def select(self, chain: Chain) -> tuple[list[Statement], list[dict[str, Any]]] | str:
        """The statements to state: the base, plus weak ones until the answer is the only candidate."""
        labels = list(chain.titles)
        chosen = list(chain.base)
        count = self.count(chosen, labels)
        steps = [{"step": "base", "statement": "", "candidates": count}]
        added: list[Statement] = []
        for s in chain.far + chain.near:
            if count <= 1 or len(added) >= self.max_added:
                break
            trial = chosen + [s]
            if s.subject == "X" and self.depth >= 1 and self.x_only(trial, chain.path) < self.min_x_candidates:
                continue
            new = self.count(trial, labels)
            if new < count:
                chosen, count = trial, new
                added.append(s)
                steps.append({"step": "add", "statement": s.id, "candidates": count})
        if count != 1:
            return f"not unique: {count} candidates remain"
        for s in reversed(added):  # keep only what is needed: every clue stays weak
            trial = [t for t in chosen if t.id != s.id]
            if self.count(trial, labels) == 1:
                chosen = trial
                steps.append({"step": "remove", "statement": s.id, "candidates": 1})
        for s in chain.far + chain.near:  # weak, true clues until the question says enough
            if len(chosen) >= self.min_statements:
                break
            if s in chosen or s.subject == "X" and self.depth >= 1 and \
                    self.x_only(chosen + [s], chain.path) < self.min_x_candidates:
                continue
            if s.kind == "name_words" and sum(t.kind == "name_words" for t in chosen) >= 2:
                continue  # "whose name has two words" three times reads as a template
            chosen.append(s)
            steps.append({"step": "weak", "statement": s.id, "candidates": 1})
        if not contains(candidate_pages(self.index, [c for s in chosen for c in s.checks], labels),
                        self.index.ids[chain.titles["X"]]):
            return "inconsistent: the answer does not satisfy its own clues"
        return chosen, steps

    def disambiguate(self, chain: Chain, chosen: list[Statement],
                     steps: list[dict[str, Any]]) -> tuple[list[Statement], list[str]]:
        """Add unused statements while they remove second answers of the plain reading (never one that
        lets the answer's own clues decide); the statements and the second answers left."""
        target = chain.titles["X"]
        others = self.second_answers(chosen, target, chain.titles)
        for s in chain.far + chain.near:
            if not others or len(chosen) >= self.min_statements + 2:
                break
            if s in chosen or s.subject == "X" and self.depth >= 1 and \
                    self.x_only(chosen + [s], chain.path) < self.min_x_candidates:
                continue
            fewer = self.second_answers(chosen + [s], target, chain.titles)
            if len(fewer) < len(others):
                chosen, others = chosen + [s], fewer
                steps.append({"step": "plain", "statement": s.id, "candidates": 1 + len(others)})
        return self.told_apart(chain, chosen, others, steps)

    def told_apart(self, chain: Chain, chosen: list[Statement], others: list[str],
                   steps: list[dict[str, Any]]) -> tuple[list[Statement], list[str]]:
        """Where the second answers left are the question's own entities (a reader could take "a politician"
        for the nationalist named before), the answer is said to be none of them ("a politician other than
        this nationalist"): its type statement gets :attr:`Statement.apart`. The statements and the second
        answers left."""
        labels = sorted(lab for lab, title in chain.titles.items() if lab != "X" and title in others)
        kind = next((s for s in chosen if s.kind == "type" and s.subject == "X"), None)
        if not labels or kind is None or len(labels) < len(others):
            return chosen, others
        trial = [replace(s, apart=labels) if s is kind else s for s in chosen]
        fewer = self.second_answers(trial, chain.titles["X"], chain.titles)
        if fewer:
            return chosen, others
        steps.append({"step": "apart", "statement": kind.id, "labels": labels, "candidates": 1})
        return trial, fewer

    # --- everything about one task but the oracle -------------------------------------------
    def names(self, title: str) -> list[str]:
        return list(dict.fromkeys([*self.sim.aliases(title), *other_names(self.text(title))]))

    def aliases(self, title: str) -> list[str]:
        """What the judge accepts: the title, the title without its disambiguator, redirects, other names,
        the names the first sentence gives its subject ("The Amur River or Heilong River is ..." for Amur; blind
        play, seed 11010, marked "Amur River" wrong), and a group's name without its group noun ("French" for
        French language, "Qing" for Qing dynasty)."""
        return list(dict.fromkeys(n for n in [title, display_title(title), *self.names(title),
                                              *subject_names(self.text(title)), self.group_name(title)] if n))

    def group_name(self, title: str) -> str:
        """The name of a language, dynasty or people without its group noun ("French" for French language),
        where the page writes that name capitalized inside a sentence or as the subject of its first one
        ("Spanish or Castilian is a Romance language") and never in lower case ("sign language" is no name);
        else ""."""
        m = _GROUP_NOUN.fullmatch(display_title(title))
        if not m:
            return ""
        text = self.text(title)[:20_000]
        name = m.group(1)
        if display_title(title).lower() in text:
            return ""
        inside = re.search(r"[a-z,;] +" + re.escape(name) + r"\b", text)
        subject = re.match(re.escape(name) + r"(?: or | is | \(|, )", text)
        return name if inside or subject else ""

    def subgraph(self, chain: Chain, statements: Sequence[Statement]) -> tuple[dict[str, Any], nx.Graph]:
        H = nx.Graph()
        H.add_nodes_from(chain.titles)
        nodes = [{"title": t, "label": lab, "url": title_to_url(t), "provenance": {"query": "", "url": ""}}
                 for lab, t in sorted(chain.titles.items(), key=lambda kv: (kv[0] != "X", kv[0]))]
        edges = []
        for s in statements:
            if s.kind == "relation":
                H.add_edge(s.subject, s.object)
                edges.append({"source": chain.titles[s.subject], "target": chain.titles[s.object],
                              "relations": [{"predicate": s.predicate, "sentence": s.evidence["sentence"],
                                             "url": s.evidence["url"], "kind": "link"}]})
        return {"nodes": nodes, "edges": edges, "target": chain.titles["X"]}, H

    def search_words(self, s: Statement, types: Mapping[str, str]) -> str:
        if s.kind == "type":
            return s.value
        if s.kind == "date":
            return f"{s.predicate} {s.value}".strip()
        if s.kind == "relation":
            pred = "" if s.predicate == "mentions" else s.predicate
            return f"{types[s.subject]} {pred} {types[s.object]}".strip()
        return ""

    def annotate(self, statements: Sequence[Statement], titles: Mapping[str, str],
                 types: Mapping[str, str]) -> None:
        """Record, per statement, whether a search of its own words finds its subject in the top 10."""
        queries = [self.search_words(s, types) for s in statements]
        asked = [q for q in queries if q]
        results = dict(zip(asked, self.sim.ranked_titles(asked, k=10))) if asked else {}
        for s, q in zip(statements, queries):
            s.search_top10 = (titles[s.subject] in results[q]) if q else None

    # --- one attempt ---------------------------------------------------------------------------
    def attempt(self, i: int, target: str, env: Any, writer: Any, heuristic: bool = False,
                corpus: str = "") -> Any:
        """The task of attempt ``i`` with answer ``target``, or the reason it was dropped."""
        from sailorfog.gold import play_gold
        from sailorfog.synth import Outcome, attempt_rng

        rng = attempt_rng(self.seed, i)
        chain = self.chain(target, rng)
        if isinstance(chain, str):
            return Outcome(i, None, chain)
        picked = self.select(chain)
        if isinstance(picked, str):
            return Outcome(i, None, picked)
        statements, steps = picked
        x_only = self.x_only(statements, chain.path)
        if self.depth >= 1 and x_only < self.min_x_candidates:
            return Outcome(i, None, "shallow: the answer's own clues single it out", steps)
        if self.plain_check:
            statements, others = self.disambiguate(chain, statements, steps)
            if others:
                return Outcome(i, None, f"second answer: a plain reading also accepts {others[:3]}", steps)
            x_only = self.x_only(statements, chain.path)
        types = {s.subject: s.value for s in statements if s.kind == "type"}
        titles = list(chain.titles.values())
        names = {t: self.names(t) for t in titles}
        pages = [self.text(t) for t in titles]

        def check(text: str) -> list[str]:
            found = [f"it names {x!r}" for x in name_leaks(text, titles, names, target)]
            return found + [f"it copies {q!r} from a page" for q in quotes(text, pages)[:2]]

        try:
            question = writer.write(statements, types, check=check)
        except WriterError as exc:
            return Outcome(i, None, f"writer: {exc}", steps)
        leaked = name_leaks(question, titles, names, target)
        if leaked:
            return Outcome(i, None, f"leak: the question names {leaked[:3]}", steps)
        min_words = self.min_words if self.depth >= 1 else min(self.min_words, 20)  # the easy level may be brief
        if len(question.split()) < min_words:
            return Outcome(i, None, f"short: {len(question.split())} words, fewer than {min_words}", steps)
        if len(question.split()) > self.max_words:
            return Outcome(i, None, f"long: {len(question.split())} words, more than {self.max_words}", steps)
        quoted = quotes(question, pages)
        if quoted:
            return Outcome(i, None, f"quote: the question copies {quoted[0]!r} from a page", steps)
        self.annotate(statements, chain.titles, types)
        task = {"id": f"sailorfog-{self.seed}-{i}", "question": question, "answer": display_title(target),
                "aliases": self.aliases(target)}
        oracle = play_gold(env, task, statements, chain.titles, types, self.names)
        if not oracle.solved:
            return Outcome(i, None, f"oracle: {oracle.reason}", steps)
        if self.attack_filter:
            from sailorfog.attacks import first_shortcut

            hit = first_shortcut(self.sim, question, {target})
            if hit:
                return Outcome(i, None, f"shortcut: one search of the {hit} finds the answer", steps)
            near = [chain.titles[s.object if s.subject == "X" else s.subject] for s in statements
                    if s.kind == "relation" and "X" in (s.subject, s.object)]
            found = next((n for n in near if self.type_neighbour_finds(types.get("X", ""), n, target)), None)
            if found:
                return Outcome(i, None, f"shortcut: a search of the answer's type and {found!r} finds it", steps)
        sub, H = self.subgraph(chain, statements)
        record = {**task, **self.measures(question, target, statements, H, x_only, oracle.tool_calls)}
        record.update({
            "uncertainty": sorted({k for s in statements for k in s.uncertainty} | {"entity_by_description"}),
            "clues": [s.to_dict() for s in statements],
            "subgraph": sub,
            "uniqueness": {"steps": steps, "candidates": 1, "answer_own_clues_candidates": x_only},
            "distractor": None,
            "oracle": oracle.record,
            "generator": {"version": RESEARCH_VERSION, "seed": self.seed, "index": i, "writer": writer.name,
                          "corpus": corpus, "depth": self.depth},
        })
        if heuristic:
            from envs.baselines import HeuristicAgent
            from envs.episode import run_episode

            episode = run_episode(env, HeuristicAgent(), options={"task": dict(task)})
            record["difficulty"]["heuristic_solved"] = episode.is_correct
        return Outcome(i, record, "", steps)

    def measures(self, question: str, target: str, statements: Sequence[Statement], H: nx.Graph, x_only: int,
                 calls: int) -> dict[str, Any]:
        """Structure and measured difficulty: hops the text requires, oracle calls, the whole-question attack."""
        from sailorfog.orbits import automorphism_orbits, orbit_role
        from sailorfog.sampling import wl_hash

        hops = max(nx.single_source_shortest_path_length(H, "X").values()) if x_only > 1 else 0
        orbits = automorphism_orbits(H)
        orbit = next(k for k, o in enumerate(orbits) if "X" in o)
        [found] = self.sim.ranked_titles([question], k=10)
        rank = next((r for r, title in enumerate(found, 1) if title == target), None)
        level = "hard" if hops >= 2 else "medium" if hops == 1 else "easy"
        return {"wl_hash": wl_hash(H), "target_orbit": orbit, "target_role": orbit_role(H, orbits[orbit]),
                "hops": hops,
                "difficulty": {"level": level, "hops_required": hops, "oracle_tool_calls": calls,
                               "answer_own_clues_candidates": x_only, "whole_question_rank": rank,
                               "clues_found_alone_by_search": sum(bool(s.search_top10) for s in statements)}}


_GROUP_NOUN = re.compile(r"((?:[A-Z][\w'-]*\s)*[A-Z][\w'-]*) (?:language|languages|dynasty|people|peoples)")
"""A title that is a capitalized name and a group noun: the name alone answers "name this language"."""


@dataclass
class ResearchRunner:
    """The per-process state of a research run, with :class:`~sailorfog.synth.Synthesizer`'s
    ``attempt(index, subgraph, target, orbit)`` signature (``subgraph`` and ``orbit`` unused)."""

    synth: ResearchSynthesizer
    env: Any
    writer: Any
    heuristic: bool = False
    corpus: str = ""

    def attempt(self, i: int, subgraph: Any, target: str, orbit: int) -> Any:
        return self.synth.attempt(i, target, self.env, self.writer, self.heuristic, self.corpus)
