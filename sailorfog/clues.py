"""Clue sets: what a question may say about a sampled subgraph without naming its answer.

Every entity of the subgraph gets a label (the target ``X``, the others ``A``, ``B``, ...
in breadth-first order from the target); clue texts refer to entities only through
``{X}``-style placeholders, so no name is ever in clear unless an uncertainty
transformation puts part of it there on purpose (``partial_names``). Each clue carries
machine-checkable ``checks`` (what the verifier evaluates against the whole simulator),
``spans`` (the dates and numbers in its text, which the uncertainty transformations blur)
and its ``evidence`` (the page and sentence the oracle must reach).

Relations come from the subgraph's edges (the evidence sentence of a link or an infobox
fact, with every subgraph entity masked); facts about single entities (dates, numbers,
infobox values, short descriptions) form a pool that uncertainty and verification draw
from to strengthen the set.
"""

from __future__ import annotations

import copy
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

import networkx as nx

from sailorfog.text import clause_around, content_words, display_title, distinctive_words, leaks, mask, years

LABELS = "ABCDEFGHIJKLMNOPQRSTUVW"
TARGET_LABEL = "X"
_PLACEHOLDER = re.compile(r"\{([A-Z])\}")
MONTHS = ("January February March April May June July August September October November December").split()


@dataclass
class Clue:
    """One statement of the question, about entities named only by placeholders."""

    id: str
    kind: str
    """``relation``, ``date``, ``number``, ``fact``, ``description``, ``name``, ``relative_time``,
    ``comparison`` or ``exclusion``."""
    text: str
    """The statement with ``{A}``-style placeholders for entities."""
    checks: list[dict[str, Any]]
    """Predicates the verifier evaluates (see :mod:`sailorfog.constraints`)."""
    evidence: dict[str, str] = field(default_factory=dict)
    """``{"url", "sentence", "query"}``: where the statement can be read."""
    spans: list[dict[str, Any]] = field(default_factory=list)
    """Dates and numbers in ``text``: ``{"type": "year"|"number", "text", "value", "check"}``
    (``check`` is the index in ``checks`` that holds the value)."""
    uncertainty: list[str] = field(default_factory=list)
    """The uncertainty kinds applied to this clue."""

    @property
    def labels(self) -> list[str]:
        return list(dict.fromkeys(_PLACEHOLDER.findall(self.text)))


@dataclass
class ClueSet:
    """The clues of one task and the pool they may be strengthened from."""

    target: str
    answer: str
    aliases: list[str]
    titles: dict[str, str]
    """label -> canonical title of every subgraph entity."""
    clues: list[Clue]
    pool: list[Clue]
    """Clues not (yet) in the question."""
    uncertainty: list[str] = field(default_factory=list)
    distractor: dict[str, Any] | None = None

    @property
    def labels(self) -> dict[str, str]:
        """title -> label."""
        return {t: lab for lab, t in self.titles.items()}

    def copy(self) -> ClueSet:
        return copy.deepcopy(self)

    def add_kind(self, kind: str) -> None:
        if kind not in self.uncertainty:
            self.uncertainty.append(kind)

    def forbidden(self, aliases: Mapping[str, Sequence[str]] | None = None) -> tuple[list[str], list[str]]:
        """Phrases and stems no question may contain: the answer's names and distinctive words,
        and the full titles of the other entities."""
        target_names = [self.target, display_title(self.target), *self.aliases]
        words = [w for name in target_names for w in distinctive_words(name)]
        others = [n for lab, t in self.titles.items() if lab != TARGET_LABEL
                  for n in (t, display_title(t), *((aliases or {}).get(t, ()))) if len(n) >= 4]
        return target_names + others, list(dict.fromkeys(words))

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "titles": self.titles, "clues": [asdict(c) for c in self.clues],
                "uncertainty": self.uncertainty, "distractor": self.distractor}


def assign_labels(G: nx.Graph, nodes: Sequence[str], target: str) -> dict[str, str]:
    """label -> title: ``X`` for the target, then ``A``, ``B``, ... in BFS order (ties by title)."""
    sub = G.subgraph(nodes)
    order, seen, frontier = [], {target}, [target]
    while frontier:
        nxt = []
        for node in frontier:
            for nb in sorted(sub.neighbors(node)):
                if nb not in seen:
                    seen.add(nb)
                    order.append(nb)
                    nxt.append(nb)
        frontier = nxt
    order += sorted(set(nodes) - seen)
    if len(order) > len(LABELS):
        raise ValueError(f"a subgraph may have at most {len(LABELS) + 1} nodes, got {len(order) + 1}")
    return {TARGET_LABEL: target, **{LABELS[i]: t for i, t in enumerate(order)}}


def _names(G: nx.Graph, title: str, aliases: Mapping[str, Sequence[str]]) -> list[str]:
    names = {title, display_title(title), *aliases.get(title, ())}
    return [n for n in names if len(n) >= 2]


def _masked(text: str, G: nx.Graph, titles: Mapping[str, str], aliases: Mapping[str, Sequence[str]]) -> str:
    for label, title in sorted(titles.items(), key=lambda kv: -len(kv[1])):
        text = mask(text, _names(G, title, aliases), "{" + label + "}")
    return text


def _evidence(G: nx.Graph, node: str, sentence: str, query: str = "") -> dict[str, str]:
    prov = G.nodes[node].get("provenance") or {}
    return {"url": G.nodes[node].get("url", ""), "sentence": sentence, "query": query or prov.get("query", ""),
            "title": node}


def _year_spans(clause: str, label: str, checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    spans = []
    for year in dict.fromkeys(years(clause)):
        checks.append({"type": "year", "node": label, "lo": year, "hi": year})
        spans.append({"type": "year", "text": str(year), "value": year, "check": len(checks) - 1})
    return spans


def relation_clues(G: nx.Graph, u: str, v: str, titles: Mapping[str, str], aliases: Mapping[str, Sequence[str]],
                   cid: str, max_words: int = 30) -> list[Clue]:
    """Candidate clues for edge ``u``-``v``, best first: one per evidence sentence (infobox
    facts first, then links, longest sentence first), every subgraph entity masked."""
    labels = {t: lab for lab, t in titles.items()}
    relations = sorted(G.edges[u, v].get("relations") or [],
                       key=lambda r: ({"fact": 0, "link": 1, "shared_fact": 2}.get(r.get("kind"), 3),
                                      -len(r.get("sentence") or "")))
    out: list[Clue] = []
    for rel in relations:
        src, dst = rel.get("source"), rel.get("target")
        if {src, dst} != {u, v}:
            continue
        sentence = " ".join((rel.get("sentence") or "").split())
        a, b = labels[src], labels[dst]
        if rel.get("kind") == "fact" and rel.get("key"):
            key = rel["key"].replace("_", " ")
            text = f"The {key} of {{{a}}} is {{{b}}}."
            checks = [{"type": "link", "a": a, "b": b}]
            out.append(Clue(cid, "relation", text, checks, _evidence(G, src, sentence or text, rel.get("query", ""))))
            continue
        if not sentence:
            continue
        clause = _masked(clause_around(sentence, dst.split()[0], max_words), G, titles, aliases)
        if "{" + b + "}" not in clause and rel.get("anchor"):
            clause = mask(clause, [rel["anchor"]], "{" + b + "}")
        checks: list[dict[str, Any]] = [{"type": "link", "a": a, "b": b}]
        words = content_words(_PLACEHOLDER.sub(" ", clause), limit=5)
        if words:
            checks.append({"type": "words", "node": a, "words": words})
        spans = _year_spans(clause, a, checks)
        if "{" + a + "}" in clause and "{" + b + "}" in clause:
            text = f"A source about {{{a}}} says: “{clause}”"
        else:
            text = f"{{{a}}} is connected to {{{b}}}; a source about {{{a}}} says: “{clause}”"
        out.append(Clue(cid, "relation", text, checks, _evidence(G, src, sentence, rel.get("query", "")), spans))
    return out


def hide_words(clue: Clue, words: Sequence[str]) -> Clue:
    """The clue with every word that starts like one of ``words`` blanked (``___``) and
    dropped from its word checks: the answer's distinctive words inside someone else's sentence."""
    stems = [w.lower()[:6] for w in words]
    hit = lambda token: any(token.lower().startswith(s) for s in stems)  # noqa: E731
    out = copy.deepcopy(clue)
    out.text = re.sub(r"\w+", lambda m: "___" if hit(m.group(0)) else m.group(0), out.text)
    for check in out.checks:
        if check["type"] in ("words", "description"):
            check["words"] = [w for w in check["words"] if not hit(w)]
    out.checks = [c for c in out.checks if c["type"] not in ("words", "description") or c["words"]]
    return out


def node_clues(G: nx.Graph, node: str, label: str, cid: str) -> list[Clue]:
    """Pool clues about one entity: its dates, numbers, infobox facts and description."""
    data = G.nodes[node]
    out: list[Clue] = []
    for i, d in enumerate(data.get("dates") or []):
        year = d.get("year")
        if not isinstance(year, int) or not 1000 <= year <= 2099:
            continue
        month = d.get("month")
        when = f"{MONTHS[month - 1]} {year}" if isinstance(month, int) and 1 <= month <= 12 else f"the year {year}"
        checks = [{"type": "year", "node": label, "lo": year, "hi": year}]
        spans = [{"type": "year", "text": when, "value": year, "check": 0}]
        out.append(Clue(f"{cid}d{i}", "date", f"{{{label}}} is tied to {when}.", checks,
                        _evidence(G, node, d.get("sentence", "")), spans))
    for i, n in enumerate(data.get("numbers") or []):
        value = n.get("value")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or 1000 <= value <= 2099 or value <= 1:
            continue  # years are dates; 0 and 1 say nothing
        unit = f" {n['unit']}" if n.get("unit") else ""
        text_value = f"{value:g}" if value < 1e6 else f"{value:,.0f}"
        checks = [{"type": "number", "node": label, "lo": value, "hi": value}]
        spans = [{"type": "number", "text": text_value, "value": value, "check": 0, "unit": unit.strip()}]
        out.append(Clue(f"{cid}n{i}", "number", f"A figure of {text_value}{unit} is given for {{{label}}}.", checks,
                        _evidence(G, node, n.get("sentence", "")), spans))
    for i, f in enumerate(data.get("facts") or []):
        key, value = f.get("key") or "", " ".join(str(f.get("value") or "").split())
        if f.get("target") or not key or not value or len(value) > 80:
            continue
        if key == "description":
            words = content_words(value, limit=6)
            if words:
                out.append(Clue(f"{cid}s{i}", "description", f"{{{label}}} is described as “{value.lower()}”.",
                                [{"type": "description", "node": label, "words": words}],
                                _evidence(G, node, f.get("sentence", "") or value)))
            continue
        out.append(Clue(f"{cid}f{i}", "fact", f"The {key.replace('_', ' ')} of {{{label}}} is “{value}”.",
                        [{"type": "fact", "node": label, "key": key, "value": value}],
                        _evidence(G, node, f.get("sentence", "") or f"{key}: {value}")))
    return out


def lead_description(G: nx.Graph, node: str, titles: Mapping[str, str],
                     aliases: Mapping[str, Sequence[str]]) -> str | None:
    """"an order comprising ..." from a lead "Dasyuromorphia is an order comprising ...", masked."""
    lead = " ".join((G.nodes[node].get("lead") or "").split())
    m = re.search(r"\b(?:is|was|are|were)\s+((?:a|an|the)\s[^.;:]{8,120})", lead)
    if not m:
        return None
    words = m.group(1).split()
    if len(words) > 20:  # cut at the last comma within 20 words, else at 20 words
        cut = " ".join(words[:20])
        words = (cut[:cut.rindex(",")] if "," in cut[20:] else cut).split()
    phrase = " ".join(words).rstrip(",")
    return _masked(phrase, G, titles, aliases)


def build_clues(G: nx.Graph, nodes: Sequence[str], edges: Sequence[tuple[str, str]], target: str,
                aliases: Mapping[str, Sequence[str]] | None = None, max_words: int = 30) -> ClueSet:
    """The clue set for ``target`` in the subgraph (``nodes``, ``edges``) of ``G``.

    Active clues are one relation per edge that has a usable evidence sentence; the pool
    holds facts about single entities. Clues that would leak the answer are left out.
    """
    aliases = aliases or {}
    if target not in nodes:
        raise ValueError(f"target {target!r} is not a node of the subgraph {list(nodes)}")
    titles = assign_labels(G, nodes, target)
    labels = {t: lab for lab, t in titles.items()}
    cs = ClueSet(target, display_title(target), sorted(set(aliases.get(target, ())) - {target}), titles, [], [])
    phrases, words = cs.forbidden(aliases)
    ok = lambda clue: not leaks(_PLACEHOLDER.sub(" ", clue.text), phrases, words)  # noqa: E731
    by_text: dict[str, Clue] = {}
    for k, (u, v) in enumerate(sorted(tuple(sorted(e)) for e in edges)):
        options = relation_clues(G, u, v, titles, aliases, f"r{k}", max_words)
        clue = next((c for c in options if ok(c)), None)
        if clue is None and options:
            clue = hide_words(options[0], words)
        if clue is None or not ok(clue):
            continue
        key = clue.evidence.get("sentence") or clue.text
        same = by_text.get(key)
        if same is not None:  # one sentence carries several edges: one clue, every link checked
            same.checks.extend(c for c in clue.checks if c["type"] == "link")
            continue
        by_text[key] = clue
        cs.clues.append(clue)
    quoted = {c.evidence.get("sentence") for c in cs.clues}
    for title in sorted(nodes, key=lambda t: labels[t]):
        label = labels[title]
        cs.pool.extend(c for c in node_clues(G, title, label, f"{label}") if ok(c))
        phrase = lead_description(G, title, titles, aliases)
        if phrase:
            desc_words = content_words(_PLACEHOLDER.sub(" ", phrase), limit=5)
            checks: list[dict[str, Any]] = [{"type": "words", "node": label, "words": desc_words}]
            spans = _year_spans(phrase, label, checks)
            lead = G.nodes[title].get("lead", "")
            clue = Clue(f"{label}lead", "description", f"{{{label}}} is {phrase}.", checks,
                        _evidence(G, title, lead[:300]), spans)
            if desc_words and ok(clue) and not any(s and s in lead and phrase[:40] in _masked(
                    s, G, titles, aliases) for s in quoted):
                cs.pool.append(clue)
    return cs


def question_leaks(question: str, cs: ClueSet, aliases: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """Names the final question text must not contain but does (empty when clean)."""
    phrases, words = cs.forbidden(aliases)
    return leaks(question, phrases, words)

