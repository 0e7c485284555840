"""The template writer of research questions: statements worded around descriptions, never quotes.

Entities are referred to by what they are ("a plant family", then "this family"), never by
letters or names. Each relation is one sentence between two descriptions; an entity is
described in full (its type with its clauses: dates, ranges, the shape of its name) the first
time it appears, and by "this <kind>" afterwards; relations sharing a subject are joined. The
entities far from the answer come first and the answer last, so the question reads as a chain:

    A plant family whose two-word name has a recorded date in the late 1700s is connected with a
    plant that was introduced in the 16th century. Which plant is it?
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from sailorfog.describe import PERSON_HEADS, types_alike
from sailorfog.statements import Statement
from sailorfog.text import article

TARGET = "X"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


_SPELLINGS = ((re.compile(r"isation(s?)$"), r"ization\1"), (re.compile(r"tre(s?)$"), r"ter\1"))
"""British spellings of a type noun that a reader takes for the American ones (organisation, centre)."""


def spelling_key(word: str) -> str:
    """One key for the British and American spellings of a word ("organisation" and "organization")."""
    word = word.lower()
    for pattern, american in _SPELLINGS:
        word = pattern.sub(american, word)
    return word


def one_spelling(types: Mapping[str, str]) -> dict[str, str]:
    """The types with each word spelled as where it is first met, so that two pages' spellings of one noun read
    as one ("an intergovernmental organisation ... another intergovernmental organisation", not "... an
    intergovernmental organization", whose "this organisation" a reader could not place)."""
    first: dict[str, str] = {}
    return {label: " ".join(first.setdefault(spelling_key(w), w) for w in kind.split())
            for label, kind in types.items()}


_ORDINALS = ("first", "second", "third", "fourth")


class _Refs:
    """How each entity is referred to: "a plant" the first time, "this plant" (or "the first plant"
    when two entities share a type) afterwards."""

    def __init__(self, types: Mapping[str, str]):
        self.types = one_spelling(types)
        self.introduced: list[str] = []

    def _head(self, label: str) -> str:
        return self.types[label].split()[-1]

    def _alike(self, a: str, b: str) -> bool:
        """Whether a reader could take one entity's reference for the other's (:func:`types_alike`)."""
        return types_alike(self.types[a], self.types[b])

    def _same(self, label: str) -> list[str]:
        return [lab for lab in self.types if self._alike(lab, label)]

    def ref(self, label: str) -> str:
        kind = self.types[label]
        if label not in self.introduced:
            earlier = [lab for lab in self._same(label) if lab in self.introduced]
            self.introduced.append(label)
            # "another archipelagic country" would call the first country archipelagic too
            same_kind = any(self.types[lab] == kind for lab in earlier)
            if len(earlier) > 1 and all(set(kind.split()) <= set(self.types[lab].split()) for lab in earlier):
                # "another city" after two cities could be either's other; "a third landlocked country" would call
                # both earlier countries landlocked, so only where every earlier one is said to be what this one is
                return f"a {_ORDINALS[min(len(earlier), 3)]} {kind}"
            return f"another {kind}" if same_kind else f"{article(kind)} {kind}"
        same = [lab for lab in self.introduced if self._alike(lab, label)]
        if len(same) > 1:
            return f"the {_ORDINALS[min(same.index(label), 3)]} {self._shared(label, same)}"
        return f"this {self._head(label)}"

    def _shared(self, label: str, same: list[str]) -> str:
        """The noun by which entities alike are counted: their head, or a word all their types share ("an island
        ... an island country": the first and the second island; "the second country" would count one country)."""
        common = [w for w in self.types[label].split() if all(w in self.types[lab].split() for lab in same)]
        return common[-1] if common else self._head(label)

    def is_new(self, label: str) -> bool:
        return label not in self.introduced


_ASSOCIATIONS = ("is connected with", "is associated with", "has ties to")
"""How a link with no stated predicate reads (a plain association, true of every link)."""


_MADE_BY = re.compile(r"\b(written|composed|directed|designed|developed|produced|created|built) by\b")


def made_by(s: Statement) -> str:
    """A relation's predicate as written: "was made by" in the verb its sentence uses ("This novel was written by
    a poet"; "was made by" a person would not write of a novel), any other predicate as it is."""
    if s.predicate != "was made by":
        return s.predicate
    m = _MADE_BY.search(s.evidence.get("sentence", "") if s.evidence else "")
    return f"was {m.group(1)} by" if m else s.predicate


def _dateless(s: Statement, person: bool) -> bool:
    """A date stated without its event: none was read, or a person's event other than birth and death
    (the page's "founded ... in 1975" is about what the person founded)."""
    return s.kind == "date" and (not s.predicate or person and s.predicate not in ("born", "died"))


MEASURES = {"area": ("covering {}", "covers {}"), "length": ("{} long", "is {} long"),
            "height": ("with a height of {}", "has a height of {}"),
            "elevation": ("lying at an elevation of {}", "lies at an elevation of {}"),
            "width": ("measuring {} across", "measures {} across"),
            "depth": ("reaching a depth of {}", "reaches a depth of {}"),
            "population": ("home to {}", "is home to {}"),
            "count": ("with {}", "has {}")}
"""How a quantity reads for what it measures (:func:`sailorfog.describe.quantity_predicate`): a participial
phrase ("covering between 12,000 and 25,000 square kilometres") and a predicate for a sentence ("covers ...")."""


def measure_phrase(s: Statement, finite: bool = False) -> str:
    """The quantity's phrase: participial, or ``finite`` for a sentence of its own."""
    if s.predicate not in MEASURES:
        raise ValueError(f"a number statement measures one of {sorted(MEASURES)}, got {s.predicate!r}")
    return MEASURES[s.predicate][int(finite)].format(s.value)


def _participle(s: Statement, person: bool = False) -> str | None:
    """A participial phrase for a dateless event or a range ("tied to a date in the 1880s")."""
    if s.kind == "number":
        return measure_phrase(s)
    if _dateless(s, person):
        return f"tied to a date {in_periods([s.value])}"
    return None


def _attribute(s: Statement, person: bool) -> str:
    """A relative clause for a unary statement ("whose name begins with “S”")."""
    if s.kind == "name":
        return f"whose name begins with “{s.value}”"
    if s.kind == "name_words":
        return f"whose name {'is a single word' if s.value == 'one' else 'has ' + s.value + ' words'}"
    if s.kind == "date" and s.predicate:
        who = "who" if person else "which"
        if s.predicate == "born":
            return f"{who} was born {in_periods([s.value])}"
        if s.predicate == "died":
            return f"{who} died {in_periods([s.value])}"
        if s.predicate == "independence":
            return f"{who} gained independence {in_periods([s.value])}"
        return f"{who} {'was ' if s.predicate.endswith('ed') else ''}{s.predicate} {in_periods([s.value])}"
    found = _participle(s, person)
    if found:
        return found
    raise ValueError(f"no attribute wording for a {s.kind!r} statement")


def _join(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def in_periods(periods: Sequence[str]) -> str:
    """Periods after their preposition: "in the 1880s", "at the turn of the 16th century", "in the 1830s
    and at the turn of the 16th century"."""
    plain = [p for p in periods if not p.startswith("the turn of")]
    turns = [p for p in periods if p.startswith("the turn of")]
    return " and ".join(([f"in {_join(plain)}"] if plain else []) + ([f"at {_join(turns)}"] if turns else []))


def _earliest(s: Statement) -> float:
    """The first year a date statement allows (for periods in time order: "in the 1520s and the 1530s")."""
    return min((float(c["lo"]) for c in s.checks if c.get("type") == "year" and "lo" in c), default=float("inf"))


def _clauses(statements: Sequence[Statement], person: bool) -> list[str]:
    """Phrases for an entity's unary statements, participles first; a name's length and first letter
    make one clause. Two statements that read the same (two events blurred to one period) are stated
    once: the same words state the same constraint, so the stated clues do not change."""
    first = next((s for s in statements if s.kind == "name"), None)
    length = next((s for s in statements if s.kind == "name_words"), None)
    participles, relatives = [], []
    periods = list(dict.fromkeys(s.value for s in sorted((s for s in statements if _dateless(s, person)),
                                                         key=_earliest)))
    if periods:
        participles.append(f"tied to {'a date' if len(periods) == 1 else 'dates'} {in_periods(periods)}")
    for s in statements:
        if first and length and s is length or _dateless(s, person):
            continue
        if first and length and s is first:
            size = "single-word" if length.value == "one" else f"{length.value}-word"
            relatives.append(f"whose {size} name begins with “{first.value}”")
        elif _participle(s, person):
            participles.append(_participle(s, person))
        else:
            relatives.append(_attribute(s, person))
    return list(dict.fromkeys(participles + relatives))


def _describe(clauses: Sequence[str]) -> tuple[str, bool]:
    """The clauses after a noun, and whether a verb after them needs a comma (when both kinds are there). The
    count of a name's words comes first, the participles after a comma ("a marginal sea whose name has two words,
    tied to a date in the 1640s and measuring ... across": after the measure, "whose name" would seem said of the
    kilometres); other relative clauses come after the participles ("a physician tied to ..., who was born in the
    1880s"), a first letter too (beside the type, "movement whose two-word name begins with “R”" is one search
    away from Romanticism)."""
    rel_start = ("who ", "which ", "whose ")
    parts = [c for c in clauses if not c.startswith(rel_start)]
    rel = [c for c in clauses if c.startswith(rel_start)]
    if parts and rel and all(c.startswith("whose name ") and "begins" not in c for c in rel):
        return _join(rel) + ", " + _join(parts), True
    text = _join(parts) if parts else ""
    if rel:
        text = (text + ", " if text else "") + _join(rel)
    return text, bool(rel) and bool(parts)


def is_person(kind: str) -> bool:
    return kind.split()[-1].lower() in PERSON_HEADS


def _order(statements: Sequence[Statement]) -> list[str]:
    """Entities far from the answer first, the answer last (breadth-first distances over relations)."""
    dist = {TARGET: 0}
    frontier = [TARGET]
    rels = [s for s in statements if s.kind == "relation"]
    while frontier:
        nxt = []
        for lab in frontier:
            for s in rels:
                for a, b in ((s.subject, s.object), (s.object, s.subject)):
                    if a == lab and b not in dist:
                        dist[b] = dist[lab] + 1
                        nxt.append(b)
        frontier = nxt
    labels = sorted({lab for s in statements for lab in s.labels} | {TARGET}, key=lambda lab: (-dist.get(lab, 0), lab))
    return labels


def _relations_in_order(statements: Sequence[Statement]) -> list[Statement]:
    """Relations far from the answer first (by the nearer end's distance), each sharing an entity with
    an earlier one where it can."""
    labels = _order(statements)
    rank = {lab: i for i, lab in enumerate(labels)}
    rels = sorted((s for s in statements if s.kind == "relation"),
                  key=lambda s: (max(rank[s.subject], rank[s.object]), min(rank[s.subject], rank[s.object]), s.id))
    out, seen = [], set()
    while rels:
        pick = next((s for s in rels if not seen or set(s.labels) & seen), rels[0])
        rels.remove(pick)
        out.append(pick)
        seen |= set(pick.labels)
    return out


@dataclass
class DescribedWriter:
    """Deterministic questions from statements (no model needed)."""

    name: str = "template"

    def write(self, statements: Sequence[Statement], types: Mapping[str, str], check: object = None) -> str:
        """The question (``check``, the LLM writer's acceptance test, is not needed: templates are checked
        by the synthesizer after writing)."""
        refs = _Refs(types)
        unary = {lab: [s for s in statements if s.kind in ("date", "name", "name_words", "number")
                       and s.subject == lab] for lab in types}
        digest = int(hashlib.sha1(json.dumps([s.to_dict() for s in statements], sort_keys=True).encode())
                     .hexdigest(), 16)

        apart = {s.subject: s.apart for s in statements if s.apart}

        def mention(label: str, subject: bool = False) -> str:
            if not refs.is_new(label):
                return refs.ref(label)
            intro = refs.ref(label)
            said, comma = _describe(_clauses(unary[label], is_person(types[label])))
            others = [mention(other) for other in apart.get(label, ()) if other in types and other != label]
            if others:  # "a politician other than this nationalist", where a reader could take one for the other
                return f"{intro} {said}, other than {_join(others)}" + ("," if subject else "") if said \
                    else f"{intro} other than {_join(others)}"
            return f"{intro} {said}" + ("," if comma and subject else "") if said else intro

        def verb(s: Statement) -> str:
            if s.predicate == "mentions":
                return _ASSOCIATIONS[(digest + int(hashlib.sha1(s.id.encode()).hexdigest(), 16)) % 3]
            return made_by(s)

        sentences: list[str] = []
        last_subject, last_described = None, False
        for s in _relations_in_order(statements):
            if s.predicate == "mentions" and refs.is_new(s.subject) and not refs.is_new(s.object) \
                    and refs._alike(s.subject, s.object):  # "this philosopher is associated with another
                s = replace(s, subject=s.object, object=s.subject)  # philosopher", not "another ... the first"
            subject_new = refs.is_new(s.subject)
            subject = mention(s.subject, subject=True)
            # an entity introduced with clauses of its own ends its sentence: "..., whose name has three words,
            # and is connected with a conflict" would read as said of it, not of the subject
            described = refs.is_new(s.object) and bool(unary[s.object])
            phrase = f"{verb(s)} {mention(s.object)}"
            if last_subject == s.subject and not subject_new and not last_described and sentences:
                sentences[-1] = sentences[-1][:-1] + f", and {phrase}."  # "... and has ties to ..."
            else:
                sentences.append(_cap(f"{subject} {phrase}."))
            last_subject, last_described = s.subject, described
        for label in _order(statements):  # an entity no relation names (a lone answer)
            if refs.is_new(label):
                sentences.append(_cap(f"consider {mention(label)}."))
        ref = refs.ref(TARGET)
        head = refs.types[TARGET].split()[-1]
        if ref != f"this {head}":  # two entities of the same kind: say which one
            asks: tuple[str, ...] = (f"{'Who' if is_person(types[TARGET]) else 'What'} is {ref}?",) * 2 + (
                f"Name {ref}.",)
        elif is_person(types[TARGET]):
            asks = (f"Who is this {head}?", f"Who is this {head}?", f"Name this {head}.")
        else:
            asks = (f"What is this {head}?", f"Which {head} is it?", f"Name this {head}.")
        sentences.append(asks[digest % 3])
        return " ".join(dict.fromkeys(sentences))
