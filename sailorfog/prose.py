"""The template writer of research questions: statements worded around descriptions, never quotes.

Entities are referred to by what they are ("a plant family", then "this family"), never by
letters or names; each statement kind has its own wording; the hidden intermediates are
introduced first and the answer last, so the question reads as a chain to follow:

    There is a plant family whose name begins with “S” and whose article records an event in
    the late 1700s. A plant is a member of this family. This plant was introduced in the 16th
    century. What is this plant?
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Mapping, Sequence

from sailorfog.describe import PERSON_HEADS
from sailorfog.statements import Statement
from sailorfog.text import article

TARGET = "X"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


class _Refs:
    """How each entity is referred to: "a plant" the first time, "this plant" (or "the first plant"
    when two entities share a type) afterwards."""

    def __init__(self, types: Mapping[str, str]):
        self.types = dict(types)
        self.introduced: list[str] = []

    def _head(self, label: str) -> str:
        return self.types[label].split()[-1]

    def _same(self, label: str) -> list[str]:
        return [lab for lab in self.types if self._head(lab) == self._head(label)]

    def ref(self, label: str) -> str:
        kind = self.types[label]
        if label not in self.introduced:
            earlier = [lab for lab in self._same(label) if lab in self.introduced]
            self.introduced.append(label)
            return f"another {kind}" if earlier else f"{article(kind)} {kind}"
        same = [lab for lab in self.introduced if self._head(lab) == self._head(label)]
        if len(same) > 1:
            return f"the {('first', 'second', 'third', 'fourth')[min(same.index(label), 3)]} {self._head(label)}"
        return f"this {self._head(label)}"

    def is_new(self, label: str) -> bool:
        return label not in self.introduced


def _attribute(s: Statement, person: bool) -> str:
    """A relative clause for a unary statement ("whose name begins with “S”")."""
    if s.kind == "name":
        return f"whose name begins with “{s.value}”"
    if s.kind == "name_words":
        return f"whose name is {'a single word' if s.value == 'one' else s.value + ' words long'}"
    if s.kind == "number":
        return f"whose article gives a figure of {s.value}"
    if s.kind == "date":
        if s.predicate == "born":
            return f"{'who' if person else 'which'} was born in {s.value}"
        if s.predicate == "died":
            return f"{'who' if person else 'which'} died in {s.value}"
        if s.predicate:
            return f"{'who' if person else 'which'} {'was ' if s.predicate.endswith('ed') else ''}{s.predicate} " \
                   f"in {s.value}"
        return f"whose article records an event in {s.value}"
    raise ValueError(f"no attribute wording for a {s.kind!r} statement")


def _join(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _clauses(statements: Sequence[Statement], person: bool) -> list[str]:
    """Relative clauses for an entity's unary statements; a name's length and first letter make one."""
    first = next((s for s in statements if s.kind == "name"), None)
    length = next((s for s in statements if s.kind == "name_words"), None)
    out = []
    for s in statements:
        if first and length and s is length:
            continue
        if first and length and s is first:
            size = "single-word" if length.value == "one" else f"{length.value}-word"
            out.append(f"whose {size} name begins with “{first.value}”")
        else:
            out.append(_attribute(s, person))
    # Two statements can read the same (two events blurred to one period): state the clause once;
    # the same words state the same constraint, so the stated clues do not change.
    return list(dict.fromkeys(out))


def _fact(s: Statement, ref: str) -> str:
    """A sentence for a unary statement about an entity already introduced."""
    if s.kind == "name":
        return _cap(f"the name of {ref} begins with “{s.value}”.")
    if s.kind == "name_words":
        return _cap(f"the name of {ref} is {'a single word' if s.value == 'one' else s.value + ' words long'}.")
    if s.kind == "number":
        return _cap(f"the article on {ref} gives a figure of {s.value}.")
    if s.predicate in ("born", "died"):
        return _cap(f"{ref} {'was born' if s.predicate == 'born' else 'died'} in {s.value}.")
    if s.predicate:
        return _cap(f"{ref} {'was ' if s.predicate.endswith('ed') else ''}{s.predicate} in {s.value}.")
    return _cap(f"the article on {ref} records an event in {s.value}.")


def _relation(s: Statement, refs: _Refs) -> str:
    if s.predicate == "mentions":
        subject_new = refs.is_new(s.subject)
        subject = refs.ref(s.subject)
        obj = refs.ref(s.object)
        lead = f"an article about {subject}" if subject_new else f"the article on {subject}"
        return _cap(f"{lead} mentions {obj}.")
    subject = refs.ref(s.subject)
    return _cap(f"{subject} {s.predicate} {refs.ref(s.object)}.")


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
        rels = [s for s in statements if s.kind == "relation"]
        done: set[str] = set()
        parts: list[str] = []
        order = _order(statements)
        for label in order:
            person = is_person(types[label])
            pending = [s for s in rels if s.id not in done and label in s.labels
                       and all(lab in refs.introduced or lab == label for lab in s.labels)]
            clauses = _clauses(unary[label], person)
            if label != TARGET and (clauses or not pending):
                intro = refs.ref(label)
                parts.append(_cap(f"there is {intro}" + (" " + _join(clauses) if clauses else "") + "."))
            for s in pending:
                parts.append(_relation(s, refs))
                done.add(s.id)
            if label == TARGET:
                if refs.is_new(label):
                    parts.append(_cap(f"consider {refs.ref(label)}."))
                first = next((s for s in unary[label] if s.kind == "name"), None)
                length = next((s for s in unary[label] if s.kind == "name_words"), None)
                for s in unary[label]:
                    if first and length and s is length:
                        continue
                    if first and length and s is first:
                        size = "single-word" if length.value == "one" else f"{length.value}-word"
                        parts.append(_cap(f"{refs.ref(label)} has a {size} name that begins with “{first.value}”."))
                    else:
                        parts.append(_fact(s, refs.ref(label)))
        for s in rels:  # relations between entities introduced in another order
            if s.id not in done:
                parts.append(_relation(s, refs))
        digest = int(hashlib.sha1(json.dumps([s.to_dict() for s in statements], sort_keys=True).encode())
                     .hexdigest(), 16)
        ref = refs.ref(TARGET)
        head = types[TARGET].split()[-1]
        if ref != f"this {head}":  # two entities of the same kind: say which one
            asks: tuple[str, ...] = (f"{'Who' if is_person(types[TARGET]) else 'What'} is {ref}?",) * 2 + (
                f"Name {ref}.",)
        elif is_person(types[TARGET]):
            asks = (f"Who is this {head}?", f"Who is this {head}?", f"Name this {head}.")
        else:
            asks = (f"What is this {head}?", f"Which {head} is it?", f"Name this {head}.")
        parts.append(asks[digest % 3])
        return " ".join(dict.fromkeys(parts))  # a sentence that reads the same twice is stated once
