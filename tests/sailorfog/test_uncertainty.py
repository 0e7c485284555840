"""The uncertainty taxonomy: each transformation separately, on hand-checked clue sets."""

from __future__ import annotations

import math
import random
import re

import pytest

from sailorfog.clues import Clue, ClueSet, build_clues
from sailorfog.constraints import candidates, satisfied_by
from sailorfog.uncertainty import (KINDS, all_checks, apply, comparison, consistent, distractor, entity_by_description,
                                   exclusion, fuzzy_quantities, fuzzy_range, partial_names, period, relative_time,
                                   vague_time, weak_constraints)
from tests.sailorfog.conftest import subgraph

NODES = ("Velmora Observatory", "Idris Kallan", "Mount Ostrel", "Harlow Optics")


def clue_set(toy_G, toy_index_, target="Velmora Observatory", nodes=NODES) -> ClueSet:
    return consistent(build_clues(toy_G, nodes, subgraph(toy_G, nodes).edges, target), toy_index_)


def truth_ok(cs, index):
    return all(satisfied_by(index, k, cs.titles) for c in cs.clues for k in c.checks)


@pytest.mark.parametrize("year", [1000, 1851, 1899, 1900, 1999, 2000, 2011, 2024, 2099])
def test_period_contains_the_year(year):
    for seed in range(12):
        phrase, lo, hi = period(year, random.Random(seed))
        assert lo <= year <= hi and hi - lo >= 2 and not re.search(rf"\b{year}\b", phrase)


def test_the_decade_that_opens_a_century_is_never_read_as_the_century():
    """"The late 1900s" is 1906-1909 to some readers and the 1970s-1990s to others."""
    for year in [*range(1800, 1810), *range(1900, 1910), *range(2000, 2010)]:
        for seed in range(12):
            phrase, lo, hi = period(year, random.Random(seed))
            assert not re.search(r"\d00s\b", phrase) and lo <= year <= hi, (year, phrase)
    assert period(1906, random.Random(0))[0] == "the first decade of the 20th century"
    assert period(1900, random.Random(0))[:3] == ("the turn of the 20th century", 1890, 1910)


def test_period_phrases():
    phrases = {period(2011, random.Random(s))[0] for s in range(40)}
    assert phrases == {"the 2010s", "the early 2010s", "the first half of the 21st century",
                       "the second decade of the 21st century"}
    assert "the last decade of the 19th century" in {period(1895, random.Random(s))[0] for s in range(40)}


def test_a_period_holds_the_year_under_every_reading_and_is_checked_over_all_of_them():
    """"The fifth decade of the 20th century" is 1940-1949 or 1941-1950, "the first half" 1900-1949 or
    1901-1950: never said of a year on such a boundary, and checked over both readings."""
    said = {year: {period(year, random.Random(s)) for s in range(40)} for year in (1940, 1945, 1950, 1900, 1999)}
    assert not any("decade of" in phrase for phrase, _, _ in said[1940] | said[1950] | said[1900])
    assert not any("half of" in phrase for phrase, _, _ in said[1950] | said[1900])
    assert ("the first half of the 20th century", 1900, 1950) in said[1940]
    assert ("the fifth decade of the 20th century", 1940, 1950) in said[1945]
    assert ("the first half of the 20th century", 1900, 1950) in said[1945]
    assert ("the mid 1940s", 1943, 1947) in said[1945]
    assert ("the last decade of the 20th century", 1990, 2000) in said[1999]
    assert all(lo <= year <= hi for year, periods in said.items() for _, lo, hi in periods)


@pytest.mark.parametrize("value", [0.4, 3, 57, 230, 2450, 84000, 3.2e6])
def test_fuzzy_range_contains_the_value(value):
    for seed in range(10):
        phrase, lo, hi = fuzzy_range(value, random.Random(seed))
        assert lo <= value <= hi and phrase


def test_a_stated_range_is_not_centred_on_the_value():
    """"Between 1,900 and 3,800 km" for 2,850 km: the midpoint named the value. Each side is drawn apart."""
    ranges = [fuzzy_range(2850, random.Random(seed)) for seed in range(60)]
    where = [(2850 - lo) / (hi - lo) for phrase, lo, hi in ranges if phrase.startswith("between")]
    assert min(where) < 0.25 and max(where) > 0.6
    assert len({(lo, hi) for _, lo, hi in ranges}) >= 10


def test_vague_time_and_fuzzy_quantities_blur_every_span(toy_G, toy_index_):
    cs = clue_set(toy_G, toy_index_)
    cs.clues += [c for c in cs.pool if c.kind in ("date", "number")]
    out = vague_time(cs, random.Random(0))
    out = fuzzy_quantities(out, random.Random(0))
    assert {"vague_time", "fuzzy_quantities"} <= set(out.uncertainty)
    for clue in out.clues:
        for span in clue.spans:
            assert span["blurred"] and str(span["value"]).split(".")[0] not in clue.text.replace(span["text"], "")
    assert truth_ok(out, toy_index_)
    # Blurring only widens: the answer's candidate set can only grow.
    assert len(candidates(toy_index_, all_checks(out), out.titles)) >= len(
        candidates(toy_index_, all_checks(cs), cs.titles))
    assert cs.clues[0].text != out.clues[0].text or not cs.clues[0].spans  # the input is not modified


def test_blurring_without_values_does_not_apply():
    cs = ClueSet("T", "T", [], {"X": "T"}, [Clue("c", "relation", "{X} is here", [])], [])
    assert vague_time(cs, random.Random(0)) is None
    assert fuzzy_quantities(cs, random.Random(0)) is None


@pytest.mark.parametrize("transform", [partial_names, entity_by_description, relative_time, comparison])
def test_added_constraints_hold_for_the_truth(toy_G, toy_index_, transform):
    applied = 0
    for target in NODES:
        for seed in range(4):
            out = transform(clue_set(toy_G, toy_index_, target), random.Random(seed), toy_index_)
            if out is None:
                continue
            applied += 1
            assert transform.__name__ in out.uncertainty
            assert truth_ok(out, toy_index_), transform.__name__
            assert toy_index_.ids[target] in candidates(toy_index_, all_checks(out), out.titles)
    assert applied


def test_relative_time_replaces_an_absolute_date(toy_G, toy_index_):
    cs = clue_set(toy_G, toy_index_, "Idris Kallan")
    out = relative_time(cs, random.Random(1), toy_index_)
    rel = [c for c in out.clues if c.kind == "relative_time"]
    assert len(rel) == 1 and "years" in rel[0].text
    node = rel[0].checks[0]["node"]
    assert not any(c.kind == "date" and c.checks[0]["node"] == node for c in out.clues + out.pool)


def test_exclusion_removes_a_rival_but_not_the_answer(toy_G, toy_index_):
    cs = clue_set(toy_G, toy_index_, "Edwin Harlow", nodes=("Edwin Harlow", "Tarnis"))
    cs.clues = [c for c in cs.clues if c.kind == "relation"]
    before = candidates(toy_index_, all_checks(cs), cs.titles)
    assert len(before) > 1
    out = exclusion(cs, random.Random(0), toy_index_)
    after = candidates(toy_index_, all_checks(out), out.titles)
    assert toy_index_.ids["Edwin Harlow"] in after and len(after) < len(before)


def test_weak_constraints_are_unique_only_together(toy_G, toy_index_):
    found = 0
    for target in NODES:
        cs = clue_set(toy_G, toy_index_, target)
        cs.clues += cs.pool
        cs.pool = []
        cs = vague_time(cs, random.Random(1)) or cs
        cs = fuzzy_quantities(cs, random.Random(1)) or cs
        out = weak_constraints(cs, random.Random(0), toy_index_)
        if out is None:
            continue
        found += 1
        assert candidates(toy_index_, all_checks(out), out.titles) == {toy_index_.ids[target]}
        assert all(len(candidates(toy_index_, c.checks, out.titles)) > 1 for c in out.clues)
    assert found


def test_distractor_matches_all_clues_but_one(toy_G, toy_index_):
    cs = clue_set(toy_G, toy_index_, "Velmora Observatory")
    cs.clues += [c for c in cs.pool if c.kind == "date" and c.checks[0]["node"] == "X"]
    cs = vague_time(cs, random.Random(0))  # founded in 1887: any period around it holds Brisk's 1889 too
    out = distractor(cs, random.Random(0), toy_index_)
    assert "distractor" in out.uncertainty and out.distractor["title"] != "Velmora Observatory"
    rival = toy_index_.ids[out.distractor["title"]]
    for clue in out.clues:
        fits = rival in candidates(toy_index_, clue.checks, out.titles)
        assert fits == (clue.id != out.distractor["fails"]), clue.id


def test_every_kind_is_deterministic_given_the_seed(toy_G, toy_index_):
    for kind in KINDS:
        runs = [apply(kind, clue_set(toy_G, toy_index_, "Idris Kallan"), random.Random(7), toy_index_)
                for _ in range(2)]
        assert (runs[0] is None) == (runs[1] is None)
        if runs[0] is not None:
            assert runs[0].to_dict() == runs[1].to_dict()
    with pytest.raises(ValueError, match="unknown uncertainty kind"):
        apply("telepathy", clue_set(toy_G, toy_index_), random.Random(0))


def test_blurring_states_a_pool_fact_when_the_question_has_none(toy_G, toy_index_):
    cs = clue_set(toy_G, toy_index_, "Harlow Optics")
    cs.clues = [c for c in cs.clues if not c.spans]
    out = vague_time(cs, random.Random(2))
    added = [c for c in out.clues if c.kind == "date"]
    assert len(added) == 1 and added[0].spans[0]["blurred"] and "vague_time" in added[0].uncertainty
    assert len(out.pool) == len(cs.pool) - 1 and truth_ok(out, toy_index_)


def test_blur_pool_blurs_only_the_pool(toy_G, toy_index_):
    from sailorfog.uncertainty import blur_pool

    cs = clue_set(toy_G, toy_index_, "Idris Kallan")
    out = blur_pool(cs, random.Random(0), "vague_time")
    assert [c.text for c in out.clues] == [c.text for c in cs.clues] and out.uncertainty == cs.uncertainty
    assert all(s.get("blurred") for c in out.pool for s in c.spans if s["type"] == "year")
    assert any(c.text != d.text for c, d in zip(out.pool, cs.pool))


def test_a_quantity_no_range_can_hold_is_never_stated(toy_index_):
    """A 400-digit number on a page reads as infinity; such a page states its other quantities only."""
    from sailorfog.statements import number_statements

    text = "The tower is " + "9" * 400 + " metres tall. The road is 2,850 kilometres long."
    out = number_statements(toy_index_, "X", "Velmora Observatory", text, "n", random.Random(0))
    assert [s.value.endswith("kilometres") for s in out] == [True]
    assert all(math.isfinite(c["lo"]) for s in out for c in s.checks)
