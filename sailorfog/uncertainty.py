"""The uncertainty taxonomy: separate, deterministic transformations of a clue set.

Each transformation takes a :class:`~sailorfog.clues.ClueSet`, a seeded
``random.Random`` and (for the kinds that need the corpus) a
:class:`~sailorfog.corpus.CorpusIndex`, and returns a new clue set with its kind recorded
in ``uncertainty``, or ``None`` when it does not apply. Obfuscations hide a value
(``vague_time``, ``fuzzy_quantities``); the others add or reshape constraints
(``partial_names``, ``entity_by_description``, ``relative_time``, ``comparison``,
``exclusion``, ``weak_constraints``, ``distractor``).
"""

from __future__ import annotations

import math
import random
from typing import Callable, Optional

from sailorfog.clues import TARGET_LABEL, Clue, ClueSet
from sailorfog.constraints import candidate_pages, count_candidates, only, satisfied_by
from sailorfog.corpus import CorpusIndex, initials
from sailorfog.text import display_title

Transform = Callable[[ClueSet, random.Random, Optional[CorpusIndex]], Optional[ClueSet]]
_ORDINALS = {1: "st", 2: "nd", 3: "rd"}


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else _ORDINALS.get(n % 10, 'th')}"


PART_READINGS = {"early": (0, 4), "mid": (3, 7), "late": (6, 9)}
"""Years of a decade that readers count as its early, mid and late part (the early 1940s: 1940-1943 to
some, up to 1944 to others): a period is checked over every reading."""


def period(year: int, rng: random.Random) -> tuple[str, int, int]:
    """A vague period that contains ``year`` under every common reading: ``(phrase, first year, last year)``,
    the range the union of the readings, so that the checks count every page a reader would accept.

    "The fifth decade of the 20th century" is 1940-1949 to some readers and 1941-1950 to others, and "the
    first half" 1900-1949 or 1901-1950: these are said only of a year inside both readings (never of 1940
    or 1950), and a year on such a boundary gets its decade ("the 1940s") instead. The decade that opens a
    century is never "the 1900s" (many read the whole century): it is "the first decade of the 20th century",
    and the year 1900 itself "the turn of the 20th century" (1890-1910)."""
    decade = year - year % 10
    century = year // 100 + 1
    start = (century - 1) * 100
    choice = rng.randrange(4)
    if choice == 3 and year % 10 == 0 or choice == 2 and year % 50 == 0:
        choice = 0
    if decade % 100 == 0 and choice < 2:  # "the 1900s" and "the late 1900s" read as a whole century too
        choice = 3 if year % 10 else 4
    if choice == 4:
        return f"the turn of the {_ordinal(century)} century", year - 10, year + 10
    if choice == 0:
        return f"the {decade}s", decade, decade + 9
    if choice == 1:
        part = "early" if year % 10 <= 3 else "mid" if year % 10 <= 6 else "late"
        lo, hi = PART_READINGS[part]
        return f"the {part} {decade}s", decade + lo, decade + hi
    if choice == 2:
        half = "first" if year - start < 50 else "second"
        lo = start if half == "first" else start + 50
        return f"the {half} half of the {_ordinal(century)} century", lo, lo + 50
    nth = (year - start) // 10
    names = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "last"]
    return f"the {names[nth]} decade of the {_ordinal(century)} century", start + nth * 10, start + nth * 10 + 10


def _nice(value: float, up: bool) -> float:
    """``value`` rounded outward to two significant digits."""
    if value <= 0:
        return 0.0
    step = 10 ** max(0, math.floor(math.log10(value)) - 1)
    return float((math.ceil if up else math.floor)(value / step) * step)


BELOW = (0.1, 0.2, 0.3, 0.4)
"""How far below the value a stated range may start (a share of the value), one drawn per range."""
ABOVE = (0.15, 0.3, 0.45, 0.6)
"""How far above the value it may end, drawn apart from :data:`BELOW`: the value sits from about a seventh
to three quarters of the way into the range, so no midpoint or ratio names it. A range is 0.62 of the value
wide on average (one spread of 0.2, 0.3 or 0.5 on both sides: 0.67)."""


def fuzzy_range(value: float, rng: random.Random) -> tuple[str, float, float]:
    """A range or qualitative statement containing ``value``: ``(phrase, lo, hi)``."""
    if value < 1:
        return "less than 1", 0.0, 1.0
    # Each side drawn on its own: a range centred on the value gives it away (1,900-3,800 km: 2,850 km).
    below, above = rng.choice(BELOW), rng.choice(ABOVE)
    lo, hi = _nice(value * (1 - below), up=False), _nice(value * (1 + above), up=True)
    if rng.random() < 0.25:
        return f"more than {lo:,.0f}", lo, float("inf")
    return f"between {lo:,.0f} and {hi:,.0f}", lo, hi


def _spans(cs: ClueSet, kind: str) -> list[tuple[Clue, dict]]:
    return [(c, s) for c in cs.clues for s in c.spans if s["type"] == kind and not s.get("blurred")]


def _blur(cs: ClueSet, rng: random.Random, span_type: str, kind: str,
          phrase: Callable[[float, random.Random], tuple[str, float, float]], promote: bool = True) -> ClueSet | None:
    out = cs.copy()
    spans = _spans(out, span_type)
    if not spans and not promote:
        return None
    if not spans:  # nothing to blur in the question yet: state one such fact from the pool, blurred
        pooled = [i for i, c in enumerate(out.pool) if any(s["type"] == span_type and not s.get("blurred")
                                                             for s in c.spans)]
        if not pooled:
            return None
        out.clues.append(out.pool.pop(rng.choice(pooled)))
        spans = _spans(out, span_type)
    for clue, span in spans:
        text, lo, hi = phrase(span["value"], rng)
        if span["text"] not in clue.text:
            continue
        if span["text"].startswith("on "):  # "on 30 April 1948" -> "in the 1940s"
            text = "in " + text
        clue.text = clue.text.replace(span["text"], text, 1)
        clue.checks[span["check"]].update(lo=lo, hi=hi)
        span.update(text=text, blurred=True)
        if kind not in clue.uncertainty:
            clue.uncertainty.append(kind)
    out.add_kind(kind)
    return out


def blur_pool(cs: ClueSet, rng: random.Random, kind: str) -> ClueSet:
    """``cs`` with the pool's dates (``vague_time``) or numbers (``fuzzy_quantities``) blurred too, so that
    clues added later by strengthening are as vague as the rest (the question itself is unchanged)."""
    span_type, phrase = {"vague_time": ("year", lambda v, r: period(int(v), r)),
                         "fuzzy_quantities": ("number", fuzzy_range)}[kind]
    swapped = cs.copy()
    swapped.clues, swapped.pool = swapped.pool, swapped.clues
    out = _blur(swapped, rng, span_type, kind, phrase, promote=False)
    if out is None:
        return cs
    out.clues, out.pool = out.pool, out.clues
    out.uncertainty = list(cs.uncertainty)
    return out


def vague_time(cs: ClueSet, rng: random.Random, index: CorpusIndex | None = None) -> ClueSet | None:
    """Exact years become periods ("the early 1840s", "the second half of the 19th century"); a
    question without a date gets one from the pool."""
    return _blur(cs, rng, "year", "vague_time", lambda v, r: period(int(v), r))


def fuzzy_quantities(cs: ClueSet, rng: random.Random, index: CorpusIndex | None = None) -> ClueSet | None:
    """Exact numbers become ranges ("between 120 and 190") or bounds ("more than 50"); a question
    without a number gets one from the pool."""
    return _blur(cs, rng, "number", "fuzzy_quantities", fuzzy_range)


def _add(out: ClueSet, clue: Clue, kind: str) -> ClueSet:
    clue.uncertainty.append(kind)
    out.clues.append(clue)
    out.add_kind(kind)
    return out


def partial_names(cs: ClueSet, rng: random.Random, index: CorpusIndex | None = None) -> ClueSet | None:
    """An entity's name reduced to its initials or first letters ("begins with “Da”")."""
    named = {c.checks[0].get("node") for c in cs.clues if c.kind == "name"}
    labels = [lab for lab in sorted(cs.titles) if lab not in named and display_title(cs.titles[lab])[:1].isalpha()]
    if not labels:
        return None
    label = rng.choice(labels)
    name = display_title(cs.titles[label])
    out = cs.copy()
    if label == TARGET_LABEL:
        prefix = name[:1]
        clue = Clue(f"name{label}", "name", f"The name of {{{label}}} begins with the letter “{prefix}”.",
                    [{"type": "prefix", "node": label, "prefix": prefix}])
    elif len(name.split()) >= 2 and rng.random() < 0.5:
        clue = Clue(f"name{label}", "name", f"The name of {{{label}}} has the initials {initials(name)}.",
                    [{"type": "initials", "node": label, "initials": initials(name)}])
    else:
        prefix = name[:2]
        clue = Clue(f"name{label}", "name", f"The name of {{{label}}} begins with “{prefix}”.",
                    [{"type": "prefix", "node": label, "prefix": prefix}])
    return _add(out, clue, "partial_names")


def _take_pool(cs: ClueSet, pick: Callable[[Clue], bool], rng: random.Random) -> tuple[ClueSet, Clue] | None:
    choices = [i for i, c in enumerate(cs.pool) if pick(c)]
    if not choices:
        return None
    out = cs.copy()
    return out, out.pool.pop(rng.choice(choices))


def entity_by_description(cs: ClueSet, rng: random.Random, index: CorpusIndex | None = None) -> ClueSet | None:
    """A hidden entity described by its type and a distinguishing attribute (its short description)."""
    taken = _take_pool(cs, lambda c: c.kind == "description", rng)
    return None if taken is None else _add(taken[0], taken[1], "entity_by_description")


def _year_clues(cs: ClueSet) -> list[tuple[bool, Clue]]:
    return [(True, c) for c in cs.clues if c.kind == "date"] + [(False, c) for c in cs.pool if c.kind == "date"]


def relative_time(cs: ClueSet, rng: random.Random, index: CorpusIndex | None = None) -> ClueSet | None:
    """A date stated relative to another entity's date ("between 10 and 20 years after {A}'s")."""
    dated = _year_clues(cs)
    by_label: dict[str, tuple[bool, Clue]] = {}
    for active, clue in dated:
        by_label.setdefault(clue.checks[0]["node"], (active, clue))
    if len(by_label) < 2:
        return None
    labels = sorted(by_label)
    node = TARGET_LABEL if TARGET_LABEL in by_label else rng.choice(labels)
    ref = rng.choice([lab for lab in labels if lab != node])
    out = cs.copy()
    (_, n_clue), (r_active, r_clue) = by_label[node], by_label[ref]
    ny, ry = n_clue.spans[0]["value"], r_clue.spans[0]["value"]
    diff = ny - ry
    slack = rng.choice((2, 3, 5))
    lo, hi = diff - slack, diff + slack
    if lo <= 0 <= hi:
        words = f"within {max(abs(lo), abs(hi))} years of"
    elif hi < 0:
        words = f"between {-hi} and {-lo} years before"
    else:
        words = f"between {lo} and {hi} years after"
    text = f"The date tied to {{{node}}} is {words} the date tied to {{{ref}}}."
    clue = Clue(f"rel{node}{ref}", "relative_time", text,
                [{"type": "relyear", "node": node, "ref": ref, "lo": lo, "hi": hi, "years": [ny, ry]}], n_clue.evidence)
    # The node's absolute date is replaced by the relative one; the reference date is stated.
    out.clues = [x for x in out.clues if x.id != n_clue.id]
    out.pool = [x for x in out.pool if x.id != n_clue.id]
    if not r_active:
        moved = next(x for x in out.pool if x.id == r_clue.id)
        out.pool.remove(moved)
        out.clues.append(moved)
    return _add(out, clue, "relative_time")


def comparison(cs: ClueSet, rng: random.Random, index: CorpusIndex | None = None) -> ClueSet | None:
    """The answer is the earliest (or latest) dated among the subgraph's entities."""
    if index is None:
        return None
    first = {lab: index.page_min_year[index.ids[t]] for lab, t in cs.titles.items() if t in index.ids}
    mine = first.get(TARGET_LABEL)
    others = sorted(lab for lab, y in first.items() if lab != TARGET_LABEL and y is not None)
    if mine is None or not others:
        return None
    earlier = [lab for lab in others if first[lab] > mine]
    later = [lab for lab in others if first[lab] < mine]
    if len(earlier) == len(others) or (len(earlier) >= len(later) and earlier and rng.random() < 0.7):
        group, word = earlier, "earliest"
        checks = [{"type": "earlier", "node": TARGET_LABEL, "other": lab} for lab in group]
    elif later:
        group, word = later, "latest"
        checks = [{"type": "earlier", "node": lab, "other": TARGET_LABEL} for lab in group]
    else:
        return None
    names = ", ".join("{" + lab + "}" for lab in group)
    text = f"Of {{{TARGET_LABEL}}} and {names}, the {word} recorded date belongs to {{{TARGET_LABEL}}}."
    return _add(cs.copy(), Clue(f"cmp{word}", "comparison", text, checks), "comparison")


def exclusion(cs: ClueSet, rng: random.Random, index: CorpusIndex | None = None) -> ClueSet | None:
    """Rule out a near candidate: "{X} is not the one whose name begins with “Q”"."""
    if index is None:
        return None
    target = index.ids.get(cs.target)
    own = display_title(cs.target)[:2].lower()
    rivals = []
    for p in candidate_pages(index, all_checks(cs), cs.titles).tolist():  # sorted; the first 20 rivals are drawn from
        name = display_title(index.titles[p])[:2]
        if p != target and name.lower() != own and name.isalpha():
            rivals.append(p)
            if len(rivals) == 20:
                break
    if not rivals:
        return None
    rival = index.titles[rng.choice(rivals[:20])]
    prefix = display_title(rival)[:2]
    clue = Clue("excl", "exclusion", f"{{{TARGET_LABEL}}} is not the one whose name begins with “{prefix}”.",
                [{"type": "not_prefix", "node": TARGET_LABEL, "prefix": prefix}])
    return _add(cs.copy(), clue, "exclusion")


def all_checks(cs: ClueSet) -> list[dict]:
    return [check for clue in cs.clues for check in clue.checks]


def weak_constraints(cs: ClueSet, rng: random.Random, index: CorpusIndex | None = None) -> ClueSet | None:
    """Keep only clues that are each ambiguous alone but unique together (drops a clue that alone
    names the answer when the rest still does)."""
    if index is None or len(cs.clues) < 2:
        return None
    out = cs.copy()
    target = index.ids.get(cs.target)
    if not only(index, all_checks(out), out.titles, target):
        return None
    for clue in sorted(out.clues, key=lambda c: count_candidates(index, c.checks, out.titles)):
        if count_candidates(index, clue.checks, out.titles) > 1:
            continue
        rest = [c for c in out.clues if c.id != clue.id]
        if rest and only(index, [k for c in rest for k in c.checks], out.titles, target):
            out.clues = rest
    if len(out.clues) < 2 or any(count_candidates(index, c.checks, out.titles) <= 1 for c in out.clues):
        return None
    out.add_kind("weak_constraints")
    return out


def distractor(cs: ClueSet, rng: random.Random, index: CorpusIndex | None = None,
               max_rivals: int = 10) -> ClueSet | None:
    """Record a plausible wrong answer: a page of the corpus that satisfies every clue but one,
    taken where dropping that one clue leaves at most ``max_rivals`` rivals (the rest still bind)."""
    if index is None or len(cs.clues) < 2:
        return None
    target = index.ids.get(cs.target)
    options = []
    for clue in sorted(cs.clues, key=lambda c: c.id):
        rest = [k for c in cs.clues if c.id != clue.id for k in c.checks]
        pages = candidate_pages(index, rest, cs.titles)
        if len(pages) > max_rivals + 1:
            continue
        near = [p for p in pages.tolist() if p != target]
        if 0 < len(near) <= max_rivals:
            options.append((len(near), clue.id, near))
    if not options:
        return None
    _, failed, near = min(options)
    out = cs.copy()
    out.distractor = {"title": index.titles[rng.choice(near)], "fails": failed, "matches": len(cs.clues) - 1}
    out.add_kind("distractor")
    return out


TRANSFORMS: dict[str, Transform] = {
    "vague_time": vague_time,
    "fuzzy_quantities": fuzzy_quantities,
    "partial_names": partial_names,
    "entity_by_description": entity_by_description,
    "relative_time": relative_time,
    "comparison": comparison,
    "exclusion": exclusion,
    "weak_constraints": weak_constraints,
    "distractor": distractor,
}
KINDS = tuple(TRANSFORMS)


def apply(kind: str, cs: ClueSet, rng: random.Random, index: CorpusIndex | None = None) -> ClueSet | None:
    """Apply one named transformation (``None`` when it does not apply)."""
    if kind not in TRANSFORMS:
        raise ValueError(f"unknown uncertainty kind {kind!r}; expected one of {list(KINDS)}")
    return TRANSFORMS[kind](cs, rng, index)


def consistent(cs: ClueSet, index: CorpusIndex) -> ClueSet:
    """The clue set without clues that the true entities do not satisfy (extraction mismatches)."""
    out = cs.copy()
    out.clues = [c for c in out.clues if all(satisfied_by(index, k, out.titles) for k in c.checks)]
    out.pool = [c for c in out.pool if all(satisfied_by(index, k, out.titles) for k in c.checks)]
    return out
